"""A probe judged on hand-made windows: over-saturation, the generator check, the attainment."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ramplab.campaign.search import SearchSpec
from ramplab.search.verdict import Window, judge, saturation

SPEC = SearchSpec(goodput_min=90, confidence=0.95, tolerance_pct=10)
BOUND = SPEC.model_copy(update={"criterion": "lower_bound"})


def window(**more: object) -> Window:
    base = Window(requests=40, good=40, dropped=0, scheduled=40, offered_qps=20.0,
                  achieved_qps=20.0, ttft_p50_ms=15.0, lateness_p99_ms=2.0)  # fmt: skip
    return replace(base, **more)  # type: ignore[arg-type]


HEALTHY = [window(), window(), window()]


def test_a_healthy_probe_passes_on_its_lower_bound() -> None:
    judged = judge(BOUND, HEALTHY, {"worker-1": 0.3}, 2.0)
    assert judged.verdict == "pass"
    assert judged.attainment.method == "wilson"
    assert judged.attainment.low is not None
    assert judged.attainment.low >= 0.9
    assert "lower bound" in judged.reason


def test_a_point_estimate_above_the_goal_with_a_low_bound_below_fails_on_the_bound() -> None:
    windows = [window(requests=10, good=10, scheduled=10)] * 2  # 20/20: Wilson low 83.9 %
    assert judge(BOUND, windows, {}, 2.0).verdict == "fail"
    point = SPEC.model_copy(update={"criterion": "point"})
    assert judge(point, windows, {}, 2.0).verdict == "pass"


def test_the_t_interval_can_decide() -> None:
    spec = BOUND.model_copy(update={"ci": "t"})
    windows = [window(good=40), window(good=30), window(good=40)]
    judged = judge(spec, windows, {}, 2.0)
    assert judged.attainment.method == "t"
    assert judged.verdict == "fail"  # one bad window widens the interval below 90 %


def test_misses_count_dropped_arrivals() -> None:
    windows = [window(good=40, dropped=1, scheduled=41)] * 3
    judged = judge(SPEC, windows, {}, 2.0)
    assert judged.wilson.estimate == pytest.approx(120 / 123)


@pytest.mark.parametrize(
    ("windows", "why"),
    [
        ([window(requests=30, good=30)] * 3, "achieved"),
        ([window(dropped=5, scheduled=45)] * 3, "dropped"),
        ([window(ttft_p50_ms=15), window(ttft_p50_ms=60), window(ttft_p50_ms=120)], "queue"),
        ([window(lateness_p99_ms=2), window(lateness_p99_ms=15), window(lateness_p99_ms=40)],
         "lateness grows"),
    ],
)  # fmt: skip
def test_over_saturation_fails_the_probe(windows: list[Window], why: str) -> None:
    judged = judge(SPEC, windows, {"worker-1": 0.2}, 40.0)
    assert judged.verdict == "fail"
    assert judged.reason.startswith("over-saturated")
    assert why in judged.reason


def test_a_healthy_probe_passes_the_binomial_test() -> None:
    judged = judge(SPEC, HEALTHY, {"worker-1": 0.3}, 2.0)
    assert judged.verdict == "pass"
    assert "exact binomial test" in judged.reason


def test_34_of_35_good_no_longer_fails_a_90_percent_goal() -> None:
    # The bug: a 35-arrival hold on a Wilson lower bound passed only 35/35 (34/35: 89.8 % < 90 %).
    windows = [window(requests=12, good=12, scheduled=12)] * 2 + [
        window(requests=11, good=10, scheduled=11)
    ]
    assert judge(BOUND, windows, {}, 2.0).verdict == "fail"
    assert judge(SPEC, windows, {}, 2.0).verdict == "pass"


def test_arrivals_missing_from_a_window_are_misses_and_said() -> None:
    # Two arrivals of one window have neither a record nor a drop count: formerly one per window
    # was forgiven as an edge effect and none reached the attainment.
    windows = [window(), window(requests=38, good=38), window()]
    judged = judge(SPEC, windows, {}, 2.0)
    assert judged.wilson.estimate == pytest.approx(118 / 120)
    assert "2 scheduled arrivals have no record and no drop count, counted as misses" in (
        judged.reason
    )
    assert saturation(SPEC, [window(requests=39, good=39)] * 3) is None  # 2.5 %: no shortfall


def test_lost_and_unrecorded_arrivals_are_named() -> None:
    windows = [window(requests=38, good=38, dispatched=39, lost=1, unaccounted=1)] * 3
    judged = judge(SPEC, windows, {}, 2.0)
    assert "6 scheduled arrivals have no record and no drop count" in judged.reason
    assert "(3 never sent, 3 dispatched without a record)" in judged.reason


def test_a_ttft_that_wobbles_is_not_a_growing_queue() -> None:
    windows = [window(ttft_p50_ms=15), window(ttft_p50_ms=90), window(ttft_p50_ms=70)]
    assert saturation(SPEC, windows) is None


def test_a_busy_generator_cannot_pass() -> None:
    judged = judge(SPEC, HEALTHY, {"worker-1": 0.4, "worker-2": 0.97}, 2.0)
    assert judged.verdict == "generator-limited"
    assert "worker-2 used 97 %" in judged.reason


def test_a_busy_generator_outranks_a_saturated_target() -> None:
    windows = [window(dropped=10, scheduled=50)] * 3
    assert judge(SPEC, windows, {"worker-1": 0.95}, 2.0).verdict == "generator-limited"


def test_late_sends_without_a_saturated_target_are_the_generator() -> None:
    judged = judge(SPEC, HEALTHY, {"worker-1": 0.3}, 80.0)
    assert judged.verdict == "generator-limited"
    assert "lateness p99 80 ms" in judged.reason


def test_late_sends_outrank_an_early_stop() -> None:
    early = "stopped early: 9 misses already"
    assert judge(SPEC, HEALTHY, {}, 80.0, early).verdict == "generator-limited"
    judged = judge(SPEC, HEALTHY, {}, 2.0, early)
    assert (judged.verdict, judged.reason) == ("fail", early)


def test_an_early_stopped_probe_is_not_judged_on_its_lost_requests() -> None:
    windows = [window(requests=10, good=0, scheduled=40)]
    judged = judge(SPEC, windows, {}, 2.0, "stopped early: over-saturated")
    assert judged.reason == "stopped early: over-saturated"
