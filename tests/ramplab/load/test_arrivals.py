from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ramplab.errors import UsageError
from ramplab.load.arrivals import (
    ConstantArrivals,
    GammaArrivals,
    PoissonArrivals,
    build_schedule,
    make_process,
)
from ramplab.load.shapes import parse_shape

# Per-check false-failure probability; seeds are fixed, so this documents how tight the bound
# is rather than introducing flakiness.
ALPHA = 1e-9


def poisson_bounds(mean: float) -> tuple[int, int]:
    lo, hi = stats.poisson.ppf([ALPHA / 2, 1 - ALPHA / 2], mean)
    return int(lo), int(hi)


def test_constant_spacing_is_exact() -> None:
    got = ConstantArrivals().offsets(200, 10, np.random.default_rng(0))
    assert len(got) == 2000
    np.testing.assert_allclose(np.diff(got), 1 / 200, rtol=0, atol=1e-12)
    assert got[0] == 0
    assert got[-1] < 10


@pytest.mark.parametrize(
    ("rate", "duration", "count"), [(3, 1, 3), (2.5, 1, 3), (1, 0.5, 1), (0.1, 30, 3)]
)
def test_constant_count_is_ceil_of_rate_times_duration(
    rate: float, duration: float, count: int
) -> None:
    assert len(ConstantArrivals().offsets(rate, duration, np.random.default_rng(0))) == count


@pytest.mark.parametrize("process", [PoissonArrivals(), GammaArrivals(0.25), GammaArrivals(4)])
def test_offsets_are_sorted_inside_the_stage(process: PoissonArrivals | GammaArrivals) -> None:
    got = process.offsets(50, 20, np.random.default_rng(3))
    assert np.all(np.diff(got) >= 0)
    assert got.min() >= 0
    assert got.max() < 20


def test_zero_rate_or_duration_gives_no_arrivals() -> None:
    for p in (ConstantArrivals(), PoissonArrivals(), GammaArrivals(0.5)):
        assert len(p.offsets(0, 10, np.random.default_rng(0))) == 0
        assert len(p.offsets(10, 0, np.random.default_rng(0))) == 0


def test_poisson_counts_per_stage_within_exact_poisson_bounds() -> None:
    shape = parse_shape("1,2,5,10,20,50,100,300@30s")
    for seed in range(20):
        counts = build_schedule(shape, PoissonArrivals(), seed).counts_per_stage(len(shape.stages))
        for st, n in zip(shape.stages, counts, strict=True):
            lo, hi = poisson_bounds(st.rate * st.duration_s)
            assert lo <= n <= hi, (seed, st, n)


def test_poisson_counts_are_actually_dispersed_like_poisson() -> None:
    # Guards against a "Poisson" that is secretly constant: the variance of counts over many
    # independent stages must match the mean (dispersion index ≈ 1, chi-square bounds).
    rng = np.random.default_rng(11)
    counts = np.array([len(PoissonArrivals().offsets(20, 5, rng)) for _ in range(400)])
    dispersion = counts.var(ddof=1) * (len(counts) - 1) / counts.mean()
    lo, hi = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], len(counts) - 1)
    assert lo <= dispersion <= hi


def test_poisson_gaps_are_exponential() -> None:
    gaps = np.diff(PoissonArrivals().offsets(100, 200, np.random.default_rng(5)))
    result = stats.kstest(gaps, stats.expon(scale=1 / 100).cdf)
    assert result.pvalue > ALPHA


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 1.0, 2.0, 8.0])
def test_gamma_burstiness_sets_the_coefficient_of_variation(burstiness: float) -> None:
    process = GammaArrivals(burstiness)
    gaps = np.diff(process.offsets(100, 500, np.random.default_rng(7)))
    assert gaps.mean() == pytest.approx(1 / 100, rel=0.05)
    cv = gaps.std() / gaps.mean()
    assert cv == pytest.approx(1 / np.sqrt(burstiness), rel=0.05)
    assert process.cv == pytest.approx(1 / np.sqrt(burstiness))


def test_lower_burstiness_is_burstier() -> None:
    cvs = []
    for b in (0.25, 1.0, 4.0):
        gaps = np.diff(GammaArrivals(b).offsets(100, 300, np.random.default_rng(1)))
        cvs.append(gaps.std() / gaps.mean())
    assert cvs[0] > cvs[1] > cvs[2]


def test_gamma_one_is_poisson_in_distribution() -> None:
    a = np.diff(GammaArrivals(1.0).offsets(100, 100, np.random.default_rng(1)))
    b = np.diff(PoissonArrivals().offsets(100, 100, np.random.default_rng(2)))
    assert stats.ks_2samp(a, b).pvalue > ALPHA


def test_gamma_rejects_non_positive_burstiness() -> None:
    with pytest.raises(ValueError, match="burstiness"):
        GammaArrivals(0)


def test_schedule_is_reproducible_from_the_seed_and_stages_are_independent() -> None:
    shape = parse_shape("10,20@5s")
    a = build_schedule(shape, PoissonArrivals(), 42)
    b = build_schedule(shape, PoissonArrivals(), 42)
    c = build_schedule(shape, PoissonArrivals(), 43)
    np.testing.assert_array_equal(a.offsets, b.offsets)
    assert not np.array_equal(a.offsets, c.offsets)
    # Changing the second stage leaves the first one's arrivals untouched.
    d = build_schedule(parse_shape("10,99@5s"), PoissonArrivals(), 42)
    first = a.stages == 0
    np.testing.assert_array_equal(a.offsets[first], d.offsets[d.stages == 0])


def test_schedule_offsets_are_run_times_sorted_with_stage_labels() -> None:
    shape = parse_shape("custom:4@1s,0@2s,2@1s")
    sched = build_schedule(shape, ConstantArrivals(), 0)
    np.testing.assert_allclose(sched.offsets, [0, 0.25, 0.5, 0.75, 3, 3.5])
    assert sched.stages.tolist() == [0, 0, 0, 0, 2, 2]
    assert sched.counts_per_stage(3).tolist() == [4, 0, 2]
    np.testing.assert_array_equal(shape.stage_indices(sched.offsets), sched.stages)


def test_long_constant_stage_has_no_drift() -> None:
    # 1 hour at 300 QPS: the last offset is exactly where the schedule says, not accumulated.
    got = ConstantArrivals().offsets(300, 3600, np.random.default_rng(0))
    assert len(got) == 300 * 3600
    assert got[-1] == pytest.approx(3600 - 1 / 300, abs=1e-9)


def test_make_process() -> None:
    assert isinstance(make_process("constant"), ConstantArrivals)
    assert isinstance(make_process("Poisson"), PoissonArrivals)
    g = make_process("gamma:0.5")
    assert isinstance(g, GammaArrivals)
    assert g.burstiness == 0.5
    for bad in ("gamma:x", "gamma:-1", "uniform", "poisson:2"):
        with pytest.raises(UsageError) as info:
            make_process(bad)
        assert info.value.field == "arrivals"
