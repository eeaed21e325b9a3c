"""The stamps' trust rule, on records written by hand and through the real producer: a step is
untrusted exactly when its p99s could move by more than 1 ms, its timing gates read untrusted
and the run exits 4; a gate on anything else keeps its verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ramplab.exitcodes import ExitCode
from ramplab.load.shapes import parse_shape
from ramplab.measure.record import RequestRecord
from ramplab.results.outcome import exit_code
from ramplab.results.producer import EngineCounts, RunFacts, summarize
from ramplab.results.slo import parse_gates
from ramplab.results.summary import RunSummary, WorkerHealth
from ramplab.results.trust import run_warnings
from tests.ramplab.results.handmade import T0, rec

SHAPE = parse_shape("10,10@10s/0s")
N = 100  # requests per step: 1 % is one request


def health(lag_ms: float) -> WorkerHealth:
    return WorkerHealth(
        samples=100, cpu_max=0.2, cpu_mean=0.1, loop_lag_max_ms=lag_ms, loop_lag_mean_ms=lag_ms / 10
    )


def run(
    second: list[RequestRecord], gates: tuple[str, ...] = (), lag_ms: float = 0.5
) -> RunSummary:
    first = [rec(0, i, N, stamp_error_ms=0.05) for i in range(N)]
    facts = RunFacts(
        shape=SHAPE,
        run_start=T0,
        mode="open",
        scheduled=[N, N],
        counts=EngineCounts([N, N], [0, 0]),
        health=[{"w0": health(0.5)}, {"w0": health(lag_ms)}],
        gates=parse_gates(gates),
    )
    return summarize(first + second, facts)


def step(uncertain: int = 0, coalesced: int = 0, unbounded: int = 0) -> list[RequestRecord]:
    """A second step of N records: ``uncertain`` with a 5 ms stamp bound, ``coalesced`` with
    their first token read merged with the second, ``unbounded`` stamped in user space."""
    out = []
    for i in range(N):
        r = rec(1, i, N, stamp_error_ms=0.05)
        if i < uncertain:
            r = replace(r, stamp_error_ms=5.0)
        elif i < uncertain + coalesced:
            r = replace(r, coalesced_events=[0, 1, 2])
        elif i < uncertain + coalesced + unbounded:
            r = replace(r, stamp_error_ms=None)
        out.append(r)
    return out


@pytest.mark.parametrize(
    ("records", "lag_ms", "untrusted", "reason"),
    [
        (step(), 0.5, False, None),
        (step(uncertain=1), 0.5, False, None),  # 1 of 100: the p99 cannot move by it
        (step(uncertain=2), 0.5, True, "2 of 100 requests' send or token stamps"),
        # 3 gaps of 19 each in 7 records: 21 of 1900 gaps, 1.1 %
        (step(coalesced=7), 0.5, True, "21 of 1900 inter-token gaps"),
        (step(coalesced=6), 0.5, False, None),  # 18 of 1900: 0.95 %
        (step(unbounded=50), 0.5, False, None),  # user-space stamps, a loop that kept up
        (step(unbounded=50), 4.0, True, "stamped in user space"),
    ],
)
def test_the_rule(
    records: list[RequestRecord], lag_ms: float, untrusted: bool, reason: str | None
) -> None:
    s = run(records, lag_ms=lag_ms)
    assert s.steps[0].untrusted is False
    assert s.steps[1].untrusted is untrusted
    assert s.untrusted is untrusted
    if reason is None:
        assert s.steps[1].untrusted_reason is None
        assert run_warnings(s) == []
    else:
        assert reason in (s.steps[1].untrusted_reason or "")
        assert any("cannot be trusted" in w for w in run_warnings(s))


def test_coalesced_gaps_are_counted_not_pooled() -> None:
    slow = [replace(r, itl_ms=[500.0] * 19, coalesced_events=[0, 1]) for r in step()[:5]]
    s = run(slow + step()[5:])
    # Gaps 0→1 and 1→2 touch a coalesced event: 2 of each record's 19 are left out.
    assert s.steps[1].itl_coalesced == 10
    assert s.steps[1].itl_ms.count == N * 19 - 10
    assert s.steps[1].itl_ms.max == 500.0  # the rest of those records' gaps still count


def test_timing_gates_on_an_untrusted_run_read_untrusted_and_exit_4() -> None:
    gates = ("ttft_ms.p99 < 1000", "error_ratio <= 0.01", "itl_ms.p50 > 1000")
    s = run(step(uncertain=5), gates)
    assert [v.status for v in s.gates] == ["untrusted", "pass", "fail"]
    assert "step 1" in s.gates[0].detail
    assert exit_code(s) == ExitCode.SLO_MISSED  # a missed gate still says so first
    s = run(step(uncertain=5), gates[:2])
    assert exit_code(s) == ExitCode.RUN_FAILED
    assert exit_code(run(step(), gates[:2])) == ExitCode.OK
    assert RunSummary.from_json(s.to_json()) == s  # round trip through summary.json


def test_a_step_without_a_successful_request_is_not_judged() -> None:
    s = run([replace(r, ok=False, status=503, error_kind="http_status") for r in step()])
    assert s.steps[1].untrusted is None
    assert s.untrusted is False
