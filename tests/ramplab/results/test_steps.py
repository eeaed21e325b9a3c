from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ramplab.load.shapes import Shape, parse_shape
from ramplab.measure.record import RequestRecord
from ramplab.results.producer import EngineCounts, RunFacts, summarize
from ramplab.results.steps import count_measured, group_measured, percentiles, recovery_time_s
from ramplab.results.summary import Percentiles, RunSummary, StepStats

T0 = 1_700_000_000.0  # run start, epoch seconds


def rec(
    t: float,
    *,
    ok: bool = True,
    status: int | None = 200,
    kind: str | None = None,
    step: int | None = None,
    attempts: int = 1,
    ttft: float | None = 100.0,
    ttlt: float | None = 1000.0,
    tpot: float | None = 10.0,
    itl: list[float] | None = None,
    tokens: int | None = 10,
    slo_ok: bool | None = None,
    lateness: float = 0.0,
) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{t}",
        worker="w",
        intended_start=T0 + t,
        actual_start=T0 + t + lateness / 1000,
        ok=ok,
        status=status,
        error_kind=kind,
        step=step,
        attempts=attempts,
        ttft_ms=ttft,
        ttft_send_ms=None if ttft is None else ttft - lateness,
        ttlt_ms=ttlt,
        tpot_ms=tpot,
        itl_ms=itl or [],
        output_tokens=tokens,
        slo_ok=slo_ok,
        lateness_ms=lateness,
    )


def ramp(
    records: list[RequestRecord],
    shape: Shape,
    scheduled: list[int] | None = None,
    dropped: list[int] | None = None,
) -> RunSummary:
    """The producer as the open-loop master calls it (dispatched = scheduled − dropped)."""
    counts = None
    if dropped is not None:
        sent = [s - d for s, d in zip(scheduled or dropped, dropped, strict=True)]
        counts = EngineCounts(sent, dropped)
    facts = RunFacts(shape=shape, run_start=T0, mode="open", scheduled=scheduled, counts=counts)
    return summarize(records, facts)


def step_stats(
    records: list[RequestRecord],
    shape: Shape,
    scheduled: list[int] | None = None,
    dropped: list[int] | None = None,
) -> tuple[StepStats, ...]:
    return ramp(records, shape, scheduled, dropped).steps


def p(got: Percentiles) -> dict[str, float | None]:
    return {"p50": got.p50, "p90": got.p90, "p99": got.p99}


def test_percentiles_are_exact_linear_interpolation() -> None:
    got = percentiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    # numpy linear: position q·(n−1) → 50 % at 4.5 → 5.5; 90 % at 8.1 → 9.1; 99 % at 8.91 → 9.91
    assert p(got) == pytest.approx({"p50": 5.5, "p90": 9.1, "p99": 9.91})
    assert got.count == 10
    assert percentiles([]) == Percentiles(p50=None, p90=None, p99=None, count=0)
    assert p(percentiles([147.0])) == {"p50": 147.0, "p90": 147.0, "p99": 147.0}  # not 150


def test_percentiles_report_p95_p999_extremes_and_mean() -> None:
    got = percentiles(float(v) for v in range(1, 1001))  # 1 … 1000
    # position q·(n−1): 95 % at 949.05 → 950.05; 99.9 % at 998.001 → 999.001
    assert got.p95 == pytest.approx(950.05)
    assert got.p999 == pytest.approx(999.001)
    assert (got.min, got.max, got.mean) == (1.0, 1000.0, 500.5)
    assert got.p50 <= got.p90 <= got.p95 <= got.p99 <= got.p999 <= got.max  # type: ignore[operator]
    empty = percentiles([])
    assert (empty.p95, empty.p999, empty.min, empty.max, empty.mean) == (None,) * 5
    one = percentiles([147.0])
    assert one.p999 == one.max == one.mean == 147.0


def test_percentiles_keep_their_existing_keys_and_add_the_new_ones() -> None:
    # summary.json is additive: readers of p50/p90/p99/count are unaffected.
    keys = list(percentiles([1.0, 2.0]).model_dump())
    assert {"p50", "p90", "p99", "count"} <= set(keys)
    assert keys == ["p50", "p90", "p95", "p99", "p999", "min", "max", "mean", "count"]


def test_step_figures_against_hand_computed_values() -> None:
    shape = parse_shape("2,4@10s/2s")  # stage 0: [0,10) measured [2,10), 8 s; stage 1: [12,20)
    records = [
        rec(1.0, ttft=9999),  # warm-up: excluded everywhere
        rec(2.0, ttft=100, ttlt=1000, tpot=10, itl=[5, 15], tokens=20),
        rec(3.0, ttft=200, ttlt=2000, tpot=20, itl=[25], tokens=30, attempts=2),
        rec(4.0, ok=False, status=503, kind="http_status", ttft=None, tokens=None, attempts=3),
        rec(5.0, ok=False, status=None, kind="timeout", ttft=None, tokens=4, attempts=1),
        rec(
            6.0, ok=False, status=None, kind="client_throttled", attempts=0, ttft=None, tokens=None
        ),
        rec(7.0, ttft=300, ttlt=3000, tpot=30, tokens=50, slo_ok=False),
        rec(9.999, ttft=400, ttlt=4000, tpot=None, tokens=1, lateness=40),
        rec(13.0, step=1, ttft=50),
    ]
    s0, s1 = step_stats(records, shape, scheduled=[16, 32], dropped=[1, 0])
    assert (s0.index, s0.target_qps, s0.measured_s) == (0, 2, 8)
    assert s0.requests == 7
    assert s0.ok == 4
    assert s0.attempts == 1 + 2 + 3 + 1 + 0 + 1 + 1
    assert s0.achieved_qps == pytest.approx(6 / 8)  # the throttled one was never sent
    assert s0.offered_qps == pytest.approx(16 / 8)
    assert s0.scheduled == 16
    assert s0.dropped == 1
    assert s0.drop_ratio == pytest.approx(1 / 16)
    assert s0.errors == {"503": 1, "client_throttled": 1, "timeout": 1}
    # good: ok and slo_ok not False → records at 2, 3, 9.999 (7.0 has slo_ok False)
    assert s0.goodput_qps == pytest.approx(3 / 8)
    assert s0.goodput_ratio == pytest.approx(3 / 7)
    assert s0.success_ratio == pytest.approx(4 / 7)
    assert s0.error_ratio == pytest.approx(3 / 7)
    assert s0.output_tokens_per_s == pytest.approx((20 + 30 + 4 + 50 + 1) / 8)
    assert s0.attempts_per_s == pytest.approx(9 / 8)
    assert s0.retry_amplification == pytest.approx(9 / 7)
    assert p(s0.ttft_ms) == pytest.approx(
        {"p50": 250.0, "p90": 370.0, "p99": 397.0}
    )  # [100, 200, 300, 400]
    assert s0.tpot_ms.p50 == pytest.approx(20.0)  # None TPOT skipped: [10, 20, 30]
    assert s0.itl_ms.p50 == pytest.approx(15.0)  # pooled [5, 15, 25]
    assert s0.ttlt_ms.p99 == pytest.approx(np.percentile([1000, 2000, 3000, 4000], 99))
    assert s0.ttft_send_ms.p99 == pytest.approx(np.percentile([100, 200, 300, 360], 99))
    assert s0.lateness_ms.p99 == pytest.approx(np.percentile([0, 0, 0, 0, 0, 40], 99))
    assert s1.requests == 1
    assert s1.ttft_ms.p50 == 50
    d = s0.model_dump(mode="json")
    for key in (
        "target_qps",
        "achieved_qps",
        "dropped",
        "requests",
        "errors",
        "goodput_qps",
        "output_tokens_per_s",
        "ttft_ms",
        "itl_ms",
        "tpot_ms",
        "ttlt_ms",
    ):
        assert key in d


def test_empty_step_has_none_ratios_and_zero_rates() -> None:
    (s,) = step_stats([], parse_shape("5@10s"))
    assert s.requests == 0
    assert s.achieved_qps == 0
    assert s.success_ratio is None
    assert s.retry_amplification is None
    assert s.scheduled is None
    assert s.ttft_ms == Percentiles(p50=None, p90=None, p99=None, count=0)


def test_step_field_wins_over_time_and_warmup_uses_intended_start() -> None:
    shape = parse_shape("1,1@10s/5s")
    groups = group_measured(
        [rec(3.0, step=1), rec(16.0, step=1), rec(16.0), rec(12.0), rec(99.0), rec(1, step=7)],
        shape,
        T0,
    )
    # step=1 at t=3 is outside stage 1's measured window [15, 20): excluded; t=12 is warm-up.
    assert [len(g) for g in groups] == [0, 2]


def test_an_arrival_on_a_stages_first_instant_is_not_lost_to_the_epochs_float() -> None:
    # The search's "two arrivals in one window went missing without a count": 18 QPS in 3
    # stages of 2.074… s; the arrival scheduled at stage 1's start (4.074074074074074 s) came
    # back from the worker as run_start + offset = 4.074074029922485 s (a float near 1.8e9 has
    # 2.4e-7 s steps), before the window the schedule counted it in: no window kept its record.
    run_start = 1796400557.9000666
    shape = parse_shape("custom:18.0@4.074074074074074s/2.0s,18.0@2.074074074074074s/0.0s")
    start = shape.stages[1].start_s
    stamped = run_start + start
    assert stamped - run_start < start  # the float really rounds it before the stage
    record = dataclasses.replace(rec(start, step=1), intended_start=stamped)
    groups = group_measured([record], shape, run_start)
    assert [len(g) for g in groups] == [0, 1]
    assert count_measured([start], shape) == [0, 1]  # the schedule's count agrees


def test_count_measured_and_length_checks() -> None:
    shape = parse_shape("1,1@10s/5s")
    assert count_measured([0, 4.9, 5, 9.99, 10, 14, 15, 19.9, 20], shape) == [2, 2]
    with pytest.raises(ValueError, match="scheduled has 1 counts"):
        step_stats([], shape, scheduled=[1])


def test_summarize_has_run_totals_and_steps() -> None:
    shape = parse_shape("1,1@10s")
    records = [rec(1.0, ttft=100), rec(11.0, ttft=300), rec(12.0, ok=False, status=429, ttft=None)]
    summary = ramp(records, shape, scheduled=[10, 10], dropped=[0, 2])
    assert summary.requests == 3
    assert summary.measured_s == 20
    assert summary.achieved_qps == pytest.approx(3 / 20)
    assert summary.error_ratio == pytest.approx(1 / 3)
    assert summary.ttft_ms.p50 == pytest.approx(200)
    assert summary.dropped == 2
    assert summary.drop_ratio == pytest.approx(2 / 20)
    assert [s.requests for s in summary.steps] == [1, 2]


def test_recovery_time_after_an_outage() -> None:
    end = T0 + 100
    records = [rec(100 + i * 0.1, ok=i >= 30) for i in range(200)]  # failures until +3.0 s
    # first window [c, c+2) with ≥ 95 % success: 19 of 20 ok needs c ≥ 2.9
    got = recovery_time_s(records, end, window_s=2.0, threshold=0.95)
    assert got == pytest.approx(2.9)
    assert recovery_time_s(records, end, window_s=2.0, threshold=1.0) == pytest.approx(3.0)


def test_recovery_none_when_never_healthy_or_no_data() -> None:
    end = T0
    failing = [rec(i * 0.5, ok=False, status=503) for i in range(40)]
    assert recovery_time_s(failing, end, window_s=2.0) is None
    assert recovery_time_s([], end) is None
    # healthy but the data ends before one full window
    assert recovery_time_s([rec(0.1), rec(0.2)], end, window_s=5.0) is None


def test_recovery_can_use_goodput_and_min_requests() -> None:
    end = T0
    records = [rec(i * 1.0, slo_ok=i >= 5) for i in range(20)]
    assert recovery_time_s(records, end, window_s=3, threshold=1.0) == 0
    assert recovery_time_s(records, end, window_s=3, threshold=1.0, use_goodput=True) == 5
    sparse = [rec(0.0, ok=False, status=503), rec(10.0), rec(20.0)]
    assert recovery_time_s(sparse, end, window_s=5, min_requests=2) is None
    assert recovery_time_s(sparse, end, window_s=5, min_requests=1) == 10.0
