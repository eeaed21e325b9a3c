from __future__ import annotations

import numpy as np
import pytest

from ramplab.load.arrivals import (
    Epoch,
    PoissonArrivals,
    build_schedule,
    every_nth,
    split_schedule,
    worker_share,
)
from ramplab.load.shapes import parse_shape


@pytest.fixture(scope="module")
def offsets() -> np.ndarray:
    return build_schedule(parse_shape("1,5,20,50@10s"), PoissonArrivals(), 9).offsets


def check_partition(shares: dict[str, np.ndarray], n: int) -> None:
    everything = np.concatenate(list(shares.values()))
    assert len(everything) == n
    np.testing.assert_array_equal(np.sort(everything), np.arange(n))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_static_split_sums_exactly_and_shares_are_exact(offsets: np.ndarray, n: int) -> None:
    ids = [f"w{i}" for i in range(n)]
    shares = split_schedule(offsets, [Epoch(0, ids)])
    check_partition(shares, len(offsets))
    sizes = sorted(len(s) for s in shares.values())
    assert sizes[-1] - sizes[0] <= 1
    assert sum(sizes) == len(offsets)
    for i, w in enumerate(ids):
        np.testing.assert_array_equal(shares[w], every_nth(len(offsets), i, n))


def test_worker_shares_are_interleaved_in_time(offsets: np.ndarray) -> None:
    # Each worker sees the whole run at 1/n of the rate, not a contiguous slice of it.
    shares = split_schedule(offsets, [Epoch(0, ["a", "b", "c"])])
    for lo in (0, 10, 20, 30):
        in_stage = (offsets >= lo) & (offsets < lo + 10)
        per = [int(in_stage[s].sum()) for s in shares.values()]
        assert max(per) - min(per) <= 1
        assert sum(per) == in_stage.sum()


def test_resplit_when_a_worker_joins_then_one_leaves(offsets: np.ndarray) -> None:
    epochs = [Epoch(0, ["a", "b"]), Epoch(12.5, ["c", "a", "b"]), Epoch(27.25, ["a", "c"])]
    shares = split_schedule(offsets, epochs)
    check_partition(shares, len(offsets))
    # Each epoch is dealt exactly, floor/ceil of its arrivals per worker.
    bounds = [(0, 12.5), (12.5, 27.25), (27.25, np.inf)]
    for epoch, (lo, hi) in zip(epochs, bounds, strict=True):
        in_epoch = (offsets >= lo) & (offsets < hi)
        m = int(in_epoch.sum())
        per = [int(in_epoch[shares[w]].sum()) for w in epoch.workers]
        assert sum(per) == m
        assert max(per) - min(per) <= 1
        for w in set(shares) - set(epoch.workers):
            assert not in_epoch[shares[w]].any()
    # b left at 27.25: nothing of b's after that.
    assert offsets[shares["b"]].max() < 27.25
    # c joined at 12.5: nothing of c's before that.
    assert offsets[shares["c"]].min() >= 12.5


def test_resplit_leaves_arrivals_before_the_change_untouched(offsets: np.ndarray) -> None:
    before = split_schedule(offsets, [Epoch(0, ["a", "b", "c"])])
    after = split_schedule(offsets, [Epoch(0, ["a", "b", "c"]), Epoch(20, ["a", "b"])])
    early = offsets < 20
    for w in ("a", "b", "c"):
        np.testing.assert_array_equal(before[w][early[before[w]]], after[w][early[after[w]]])


def test_worker_order_does_not_matter(offsets: np.ndarray) -> None:
    a = worker_share(offsets, [Epoch(0, ["x", "y", "z"])], "y")
    b = worker_share(offsets, [Epoch(0, ["z", "y", "x"])], "y")
    np.testing.assert_array_equal(a, b)


def test_a_worker_not_in_any_epoch_gets_nothing(offsets: np.ndarray) -> None:
    assert len(worker_share(offsets, [Epoch(0, ["a"])], "ghost")) == 0


def test_arrivals_on_the_change_time_go_to_the_new_epoch() -> None:
    t = np.array([0.0, 1.0, 2.0, 2.0, 3.0])
    shares = split_schedule(t, [Epoch(0, ["a"]), Epoch(2.0, ["b"])])
    assert shares["a"].tolist() == [0, 1]
    assert shares["b"].tolist() == [2, 3, 4]


def test_invalid_epochs() -> None:
    t = np.array([0.0, 1.0])
    with pytest.raises(ValueError, match="increase"):
        split_schedule(t, [Epoch(0, ["a"]), Epoch(0, ["b"])])
    with pytest.raises(ValueError, match="precedes"):
        split_schedule(t, [Epoch(0.5, ["a"])])
    with pytest.raises(ValueError, match="duplicate"):
        Epoch(0, ["a", "a"])
    with pytest.raises(ValueError, match="at least one"):
        Epoch(0, [])
    with pytest.raises(ValueError, match="outside"):
        every_nth(10, 3, 3)


def test_many_random_membership_histories_always_partition() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        t = np.sort(rng.uniform(0, 100, rng.integers(0, 300)))
        cuts = np.sort(rng.choice(np.arange(1, 100), rng.integers(0, 5), replace=False))
        epochs = [Epoch(0, ["w0"])]
        for c in cuts:
            k = int(rng.integers(1, 5))
            epochs.append(Epoch(float(c), [f"w{j}" for j in rng.choice(8, k, replace=False)]))
        check_partition(split_schedule(t, epochs), len(t))
