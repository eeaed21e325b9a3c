"""The choice of the next probe and the answer, on hand-made outcomes; the search settings."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ramplab.campaign.schema import parse_campaign
from ramplab.campaign.search import SearchSpec
from ramplab.errors import CampaignError, UsageError
from ramplab.load.shapes import parse_shape
from ramplab.search.strategy import Outcome, answer, bracket, next_rate


def simulate(spec: SearchSpec, passes: Callable[[float], bool]) -> list[float]:
    """The rates the search probes against a target that passes exactly where ``passes``."""
    outcomes: list[Outcome] = []
    while (rate := next_rate(spec, outcomes)) is not None:
        outcomes.append(Outcome(rate, "pass" if passes(rate) else "fail"))
    return [o.rate for o in outcomes]


def test_probe_doubles_then_bisects_to_the_resolution() -> None:
    spec = SearchSpec(start_qps=8, max_qps=64, resolution_pct=10, min_qps=1)
    rates = simulate(spec, lambda r: r <= 20.5)
    assert rates[:3] == [8, 16, 32]
    outcomes = [Outcome(r, "pass" if r <= 20.5 else "fail") for r in rates]
    high_pass, low_fail = bracket(outcomes)
    assert high_pass is not None
    assert low_fail is not None
    assert high_pass <= 20.5 < low_fail
    assert low_fail - high_pass <= 0.1 * high_pass
    result = answer(spec, outcomes)
    assert result.status == "found"
    assert result.rate == high_pass


def test_first_probe_failing_goes_down_geometrically() -> None:
    spec = SearchSpec(start_qps=16, max_qps=64, resolution_pct=10, min_qps=1)
    rates = simulate(spec, lambda r: r <= 3)
    assert rates[:4] == [16, 8, 4, 2]
    outcomes = [Outcome(r, "pass" if r <= 3 else "fail") for r in rates]
    assert answer(spec, outcomes).status == "found"


def test_every_probe_failing_ends_below_min() -> None:
    spec = SearchSpec(start_qps=4, min_qps=1)
    rates = simulate(spec, lambda r: False)
    assert rates == [4, 2, 1]
    result = answer(spec, [Outcome(r, "fail") for r in rates])
    assert result.status == "below-min"
    assert result.rate is None


def test_passing_at_max_ends_above_max() -> None:
    spec = SearchSpec(start_qps=10, max_qps=50)
    rates = simulate(spec, lambda r: True)
    assert rates == [10, 20, 40, 50]
    result = answer(spec, [Outcome(r, "pass") for r in rates])
    assert result.status == "above-max"
    assert result.rate == 50


def test_a_pass_above_a_failure_does_not_widen_the_bracket() -> None:
    outcomes = [Outcome(10, "pass"), Outcome(20, "fail"), Outcome(15, "fail"), Outcome(17, "pass")]
    assert bracket(outcomes) == (10, 15)


def test_a_generator_limited_probe_ends_the_search_without_a_rate() -> None:
    spec = SearchSpec(start_qps=8)
    outcomes = [Outcome(8, "pass"), Outcome(16, "generator-limited", "worker-1 used 97 %")]
    assert next_rate(spec, outcomes) is None
    result = answer(spec, outcomes)
    assert result.status == "generator-limited"
    assert result.rate is None
    assert "worker-1 used 97 %" in result.reason


def test_max_probes_bounds_the_search() -> None:
    spec = SearchSpec(start_qps=1, max_qps=1000, max_probes=3, resolution_pct=1)
    rates = simulate(spec, lambda r: r < 3)
    assert len(rates) == 3
    outcomes = [Outcome(r, "pass" if r < 3 else "fail") for r in rates]
    assert answer(spec, outcomes).status == "probe-limit"


def test_probe_shape_is_a_warm_up_then_equal_windows() -> None:
    spec = SearchSpec(warmup="2s", window="1.5s", windows=3, goodput_min=90)
    shape = parse_shape(spec.shape_text(200.0))  # fast enough for the plan's 379 arrivals
    assert [st.rate for st in shape.stages] == [200.0] * 3
    assert shape.stages[0].warmup_s == 2.0
    assert [st.measured_s for st in shape.stages] == [1.5] * 3


def test_windows_stretch_to_hold_the_plans_arrivals() -> None:
    spec = SearchSpec(window="1s", windows=3, goodput_min=95, max_hold="60s")
    needed = spec.min_requests()
    assert needed == spec.plan().requests
    assert spec.window_s(10.0) * 3 * 10.0 >= needed
    assert spec.window_s(1000.0) == 1.0
    assert spec.window_s(0.01) == 20.0  # capped by max_hold


@pytest.mark.parametrize(
    ("search", "field"),
    [
        ({"goodput_min": 120}, "search.goodput_min"),
        ({"goodput_min": 0}, "search.goodput_min"),
        ({"start_qps": 100, "max_qps": 50}, "search.start_qps"),
        ({"growth": 1}, "search.growth"),
        ({"windows": 1}, "search.windows"),
        ({"window": "soon"}, "search.window"),
        ({"goodput_min": 100, "criterion": "lower_bound"}, "search.goodput_min"),
        ({"goodput_min": 10, "tolerance_pct": 10}, "search.tolerance_pct"),
        ({"power": 1}, "search.power"),
        ({"ci": "bootstrap"}, "search.ci"),
        ({"unknown": 1}, "search.unknown"),
    ],
)
def test_bad_search_settings_name_the_field(search: dict[str, object], field: str) -> None:
    with pytest.raises(CampaignError) as caught:
        parse_campaign({"name": "s", "slo": {"ttft_ms": 100}, "search": search})
    assert caught.value.field == field


def test_a_search_campaign_needs_no_shape_but_cannot_be_run_as_a_ramp() -> None:
    campaign = parse_campaign({"name": "s", "slo": {"ttft_ms": 100}, "search": {}})
    assert campaign.search is not None
    with pytest.raises(UsageError) as caught:
        campaign.load_shape  # noqa: B018
    assert caught.value.field == "shape"


def test_without_search_a_shape_is_still_required() -> None:
    with pytest.raises(CampaignError) as caught:
        parse_campaign({"name": "s"})
    assert caught.value.field == "shape"


def test_flags_replace_the_campaigns_values_and_none_keeps_them() -> None:
    spec = SearchSpec(start_qps=4, max_qps=64).with_flags({"max_qps": 128.0, "start_qps": None})
    assert (spec.start_qps, spec.max_qps) == (4, 128.0)


def test_a_bad_flag_value_names_the_flag() -> None:
    with pytest.raises(UsageError) as caught:
        SearchSpec().with_flags({"goodput_min": 120.0})
    assert caught.value.field == "--goodput-min"
