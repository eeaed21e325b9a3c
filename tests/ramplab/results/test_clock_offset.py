"""The NTP-style clock estimate on hand-made exchanges whose true offset is known."""

from __future__ import annotations

import pytest

from ramplab.report.markdown import RunMeta
from ramplab.results.clock_offset import ClockSample, estimate, surely_off_by
from ramplab.results.producer import RunFacts, summarize
from ramplab.results.summary import ClockOffset


def exchange(offset_s: float, out_s: float, back_s: float, hold_s: float = 0.0) -> ClockSample:
    """A ping sent at master time 100, ``out_s`` on the way, held ``hold_s`` by the worker
    (whose clock reads ``offset_s`` ahead), ``back_s`` on the way back."""
    t0 = 100.0
    t1 = t0 + out_s + offset_s
    t2 = t1 + hold_s
    t3 = t0 + out_s + hold_s + back_s
    return ClockSample(t0, t1, t2, t3)


def test_symmetric_delays_give_the_exact_offset_and_the_round_trip() -> None:
    sample = exchange(offset_s=0.250, out_s=0.010, back_s=0.010, hold_s=0.003)
    assert sample.offset_s == pytest.approx(0.250)
    assert sample.delay_s == pytest.approx(0.020)  # the worker's hold is not network delay


@pytest.mark.parametrize(("out_s", "back_s"), [(0.030, 0.0), (0.0, 0.030), (0.021, 0.002)])
def test_the_true_offset_lies_within_half_the_round_trip_however_the_delay_splits(
    out_s: float, back_s: float
) -> None:
    sample = exchange(offset_s=-0.5, out_s=out_s, back_s=back_s)
    assert abs(sample.offset_s - -0.5) <= sample.delay_s / 2 + 1e-12
    # All on the way out: the estimate is off by exactly half the round trip.
    if back_s == 0.0:
        assert sample.offset_s - -0.5 == pytest.approx(sample.delay_s / 2)


def test_the_estimate_is_the_narrowest_sample() -> None:
    samples = [
        exchange(offset_s=0.1, out_s=0.040, back_s=0.001),  # queued on the way out
        exchange(offset_s=0.1, out_s=0.002, back_s=0.003),  # the narrowest
        exchange(offset_s=0.1, out_s=0.001, back_s=0.030),
    ]
    found = estimate(samples)
    assert found is not None
    assert found.offset_ms == pytest.approx(100.0 - 0.5)  # (2 − 3) ms / 2 from the truth
    assert found.uncertainty_ms == pytest.approx(2.5)
    assert found.samples == 3
    assert abs(found.offset_ms - 100.0) <= found.uncertainty_ms


def test_no_sample_no_estimate() -> None:
    assert estimate([]) is None


@pytest.mark.parametrize(
    ("offset_ms", "uncertainty_ms", "apart_ms"),
    [(0.2, 0.5, 0.0), (-0.4, 21.5, 0.0), (12.0, 2.0, 10.0), (-30.0, 5.0, 25.0)],
)
def test_clocks_are_surely_apart_only_beyond_the_bound(
    offset_ms: float, uncertainty_ms: float, apart_ms: float
) -> None:
    found = ClockOffset(offset_ms=offset_ms, uncertainty_ms=uncertainty_ms, samples=3)
    assert surely_off_by(found) == pytest.approx(apart_ms)


def test_the_report_states_each_workers_clock_and_nothing_without_workers() -> None:
    clocks = {
        "vm_b": ClockOffset(offset_ms=-0.36, uncertainty_ms=21.53, samples=11),
        "vm_a": ClockOffset(offset_ms=0.18, uncertainty_ms=0.49, samples=11),
    }
    facts = dict(RunMeta().facts(summarize([], RunFacts(clocks=clocks))))
    assert facts["worker clocks vs the master's"] == "vm_a +0.2 ± 0.5 ms; vm_b -0.4 ± 21.5 ms"
    assert "worker clocks vs the master's" not in dict(RunMeta().facts(summarize([], RunFacts())))
