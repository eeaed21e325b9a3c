from __future__ import annotations

import time
from collections.abc import Callable

import gevent
import gevent.pool
import numpy as np
import pytest
from numpy.typing import NDArray

from ramplab.load.arrivals import (
    ConstantArrivals,
    Epoch,
    PoissonArrivals,
    build_schedule,
    schedule_chunks,
    share_chunks,
    worker_share,
)
from ramplab.load.pacer import Arrival, Pacer
from ramplab.load.shapes import parse_shape
from ramplab.load.sizing import UserSizer, size_users


class FakeClock:
    """A clock whose sleep advances it, optionally oversleeping like a real timer."""

    def __init__(self, rng: np.random.Generator | None = None, overshoot_s: float = 0.0) -> None:
        self.t = 500.0
        self.rng = rng
        self.overshoot_s = overshoot_s
        self.sleeps = 0

    def __call__(self) -> float:
        return self.t

    def sleep(self, d: float) -> None:
        self.sleeps += 1
        extra = self.rng.uniform(0, self.overshoot_s) if self.rng is not None else 0.0
        self.t += d + extra


class Slots:
    """A pool of ``n`` users, each busy for ``service_s`` after taking an arrival."""

    def __init__(self, clock: FakeClock, n: int, service_s: float) -> None:
        self.clock = clock
        self.busy_until = [-np.inf] * n
        self.service_s = service_s
        self.taken: list[Arrival] = []

    def __call__(self, arrival: Arrival) -> bool:
        now = self.clock()
        for i, until in enumerate(self.busy_until):
            if until <= now:
                self.busy_until[i] = now + self.service_s
                self.taken.append(arrival)
                return True
        return False


def test_every_arrival_dispatched_at_its_due_time_with_enough_users() -> None:
    clock = FakeClock()
    offsets = np.arange(1000) / 200
    slots = Slots(clock, 10, 0.04)
    pacer = Pacer(
        [(np.arange(1000), offsets)],
        start=clock.t,
        clock=clock,
        sleep=clock.sleep,
        try_dispatch=slots,
    )
    stats = pacer.run()
    assert stats.dispatched == 1000
    assert stats.dropped == 0
    assert [a.index for a in slots.taken] == list(range(1000))
    np.testing.assert_allclose(stats.lateness(), 0, atol=1e-9)
    np.testing.assert_allclose(
        [a.intended for a in slots.taken], clock.t - 4.995 + offsets, atol=1e-9
    )


def test_no_drift_when_every_sleep_overshoots() -> None:
    # Each wake-up is up to 2 ms late; with absolute due times the error never accumulates.
    clock = FakeClock(np.random.default_rng(0), overshoot_s=0.002)
    n = 20_000
    offsets = np.arange(n) / 200
    slots = Slots(clock, 50, 0.01)
    stats = Pacer(
        [(np.arange(n), offsets)], start=clock.t, clock=clock, sleep=clock.sleep, try_dispatch=slots
    ).run()
    lateness = stats.lateness()
    assert stats.dispatched == n
    assert lateness.min() >= 0
    assert lateness.max() <= 0.002 + 1e-9
    # the last tenth is no later than the first tenth: no trend over 100 s
    assert lateness[-n // 10 :].mean() == pytest.approx(lateness[: n // 10].mean(), abs=2e-4)


def test_after_a_stall_the_pacer_catches_up_without_losing_arrivals() -> None:
    clock = FakeClock()
    offsets = np.arange(100) / 100
    slots = Slots(clock, 100, 0.0)
    stalled = False

    def sleep(d: float) -> None:
        nonlocal stalled
        clock.sleep(d)
        if not stalled and clock.t - 500 > 0.3:
            stalled = True
            clock.t += 0.25  # a GC pause

    stats = Pacer(
        [(np.arange(100), offsets)], start=clock.t, clock=clock, sleep=sleep, try_dispatch=slots
    ).run()
    assert stats.dispatched == 100
    assert stats.lateness().max() == pytest.approx(0.25, abs=0.011)
    assert np.count_nonzero(stats.lateness() > 1e-9) <= 26


def test_arrivals_without_a_free_user_are_dropped_and_counted() -> None:
    clock = FakeClock()
    # 100/s for 1 s, each user busy 0.1 s: 5 users serve every other arrival.
    offsets = np.arange(100) / 100
    slots = Slots(clock, 5, 0.1 - 1e-9)
    stats = Pacer(
        [(np.arange(100) + 7, offsets)],
        start=clock.t,
        clock=clock,
        sleep=clock.sleep,
        try_dispatch=slots,
    ).run()
    assert stats.dispatched + stats.dropped == 100
    assert stats.dispatched == 50
    assert stats.dropped_indices == [7 + i for i in range(100) if i % 10 >= 5]


def test_queue_mode_records_lateness_instead_of_dropping() -> None:
    clock = FakeClock()
    offsets = np.arange(20) / 100  # 20 arrivals in 0.2 s, one user busy 0.05 s each
    slots = Slots(clock, 1, 0.05)
    stats = Pacer(
        [(np.arange(20), offsets)],
        start=clock.t,
        clock=clock,
        sleep=clock.sleep,
        try_dispatch=slots,
        overflow="queue",
        poll_s=0.001,
    ).run()
    assert stats.dispatched == 20
    assert stats.dropped == 0
    assert [a.index for a in slots.taken] == list(range(20))  # FIFO
    # Arrival k goes out when the user frees, ≈ k·0.05, but was due at k·0.01: lateness ≈ 0.04·k,
    # plus up to one poll interval (1 ms) per service because the free slot is found by polling.
    k = np.arange(20)
    late = stats.lateness()
    assert np.all(late >= 0.04 * k - 1e-9)
    assert np.all(late <= 0.041 * k + 1e-6)
    assert stats.max_queue > 10


def test_bounded_queue_drops_the_overflow() -> None:
    clock = FakeClock()
    slots = Slots(clock, 1, 10.0)
    stats = Pacer(
        [(np.arange(10), np.zeros(10))],
        start=clock.t,
        clock=clock,
        sleep=clock.sleep,
        try_dispatch=slots,
        overflow="queue",
        max_queue=3,
    )
    for _ in range(3):
        stats.step()
    assert stats.stats.dispatched == 1
    assert stats.queued == 3
    assert stats.stats.dropped == 6
    stats.stop()
    assert stats.run().dispatched == 1


@pytest.mark.parametrize("chunk", [None, 1, 16])
def test_resplit_mid_run_keeps_the_global_partition(chunk: int | None) -> None:
    shape = parse_shape("50@4s")
    sched = build_schedule(shape, PoissonArrivals(), 3)
    before = [Epoch(0, ["a", "b"])]
    after = [Epoch(0, ["a", "b"]), Epoch(2.0, ["a", "b", "c"])]
    taken: dict[str, list[int]] = {"a": [], "b": [], "c": []}

    def share(epochs: list[Epoch], w: str) -> list[tuple[NDArray[np.intp], NDArray[np.float64]]]:
        """The share whole (``chunk=None``), or streamed in chunks of ``chunk`` arrivals."""
        if chunk is None:
            idx = worker_share(sched.offsets, epochs, w)
            return [(idx, sched.offsets[idx])]
        chunks = schedule_chunks(shape, PoissonArrivals(), 3, chunk)
        return list(share_chunks(chunks, epochs, w))

    def taker(w: str) -> Callable[[Arrival], bool]:
        def take(arrival: Arrival) -> bool:
            taken[w].append(arrival.index)
            return True

        return take

    clock = FakeClock()
    start = clock.t
    pacers: dict[str, Pacer] = {}
    for w in ("a", "b"):
        pacers[w] = Pacer(
            share(before, w),
            start=start,
            clock=clock,
            sleep=clock.sleep,
            try_dispatch=taker(w),
        )
    # run every worker up to t = 1.5 s, then the master announces the change at 2.0 s
    while clock.t < start + 1.5:
        for p in pacers.values():
            p.step()
        clock.t += 0.001
    for w in ("a", "b", "c"):
        if w in pacers:
            pacers[w].resplit(share(after, w), change_s=2.0)
        else:
            pacers[w] = Pacer(
                share(after, w),
                start=start,
                clock=clock,
                sleep=clock.sleep,
                try_dispatch=taker("c"),
            )
    while any(p.pending for p in pacers.values()):
        for p in pacers.values():
            p.step()
        clock.t += 0.001
    everything = sorted(taken["a"] + taken["b"] + taken["c"])
    assert everything == list(range(len(sched)))
    assert min(sched.offsets[taken["c"]]) >= 2.0
    assert max(sched.offsets[taken["a"]]) > 3.5  # the old workers carry on after the change


@pytest.mark.timing  # asserts on measured time: run alone, after the rest
def test_real_gevent_pacer_2000_arrivals_at_200_per_s() -> None:
    n, rate = 2000, 200.0
    offsets = ConstantArrivals().offsets(rate, n / rate, np.random.default_rng(0))
    assert len(offsets) == n
    pool = gevent.pool.Pool(40)
    sent: list[tuple[int, float]] = []

    def user(arrival: Arrival) -> None:
        sent.append((arrival.index, time.monotonic() - arrival.intended))
        gevent.sleep(0.02)  # a short "stream": 200/s × 20 ms needs ~4 users

    def try_dispatch(arrival: Arrival) -> bool:
        if pool.full():
            return False
        pool.spawn(user, arrival)
        return True

    start = time.monotonic() + 0.05
    pacer = Pacer(
        [(np.arange(n), offsets)],
        start=start,
        clock=time.monotonic,
        sleep=gevent.sleep,
        try_dispatch=try_dispatch,
    )
    stats = gevent.spawn(pacer.run).get(timeout=60)
    pool.join(timeout=5)
    # Exact counts: every arrival dispatched once, none dropped with 10× the users needed.
    assert stats.dispatched == n
    assert stats.dropped == 0
    assert sorted(i for i, _ in sent) == list(range(n))
    lateness = stats.lateness()
    assert lateness.min() >= 0  # never early
    # Generous bound, justified: gevent's timer has ~1 ms resolution, so a healthy run is late
    # by ~1 ms; a relative-sleep pacer would be late by n × (wake-up overhead), i.e. seconds
    # by the end. 50 ms of median lateness only fails on a machine too starved to measure.
    assert float(np.median(lateness)) < 0.05


def test_little_law_sizing() -> None:
    assert size_users(100, 2.0, headroom=1.5, max_users=1000) == 300
    assert size_users(10, 0.3, headroom=1.5, max_users=1000) == 5  # ceil(4.5)
    assert size_users(100, 2.0, headroom=1.5, max_users=200) == 200  # clamped
    assert size_users(0, 2.0, max_users=10) == 1  # a floor of one user
    assert size_users(0.1, 0.1, max_users=10, min_users=3) == 3
    with pytest.raises(ValueError, match="headroom"):
        size_users(1, 1, headroom=0.5, max_users=10)
    with pytest.raises(ValueError, match="max_users"):
        size_users(1, 1, max_users=0)


def test_user_sizer_warm_start_then_observed_mean() -> None:
    sizer = UserSizer(max_users=500, default_duration_s=4.0, headroom=1.25, window=3)
    assert sizer.users(20) == 100  # 20 × 4 × 1.25 before any observation
    for d in (1.0, 2.0, 3.0):
        sizer.observe(d)
    assert sizer.duration_s() == pytest.approx(2.0)
    assert sizer.users(20) == 50
    sizer.observe(10.0)  # window of 3: (2 + 3 + 10) / 3 = 5
    assert sizer.duration_s() == pytest.approx(5.0)
    assert sizer.users(100) == 500  # capped


def test_resplit_keeps_pending_before_the_change_and_replaces_after() -> None:
    clock = FakeClock()
    got: list[int] = []

    def take(arrival: Arrival) -> bool:
        got.append(arrival.index)
        return True

    pacer = Pacer(
        [([0, 1, 2], [0.0, 1.0, 2.0]), ([3, 4, 5, 6], [3.0, 4.0, 5.0, 6.0])],
        start=clock.t,
        clock=clock,
        sleep=clock.sleep,
        try_dispatch=take,
    )
    pacer.step()  # dispatches index 0 (due at 0); only the first chunk has been read
    assert pacer.pending == 2
    # The new share is the old one before the change: 3 and 4 come from it, not from the old.
    new_share = [([0, 1, 2], [0.0, 1.0, 2.0]), ([3, 4, 50, 60], [3.0, 4.0, 5.5, 6.5])]
    pacer.resplit(new_share, change_s=5.0)
    assert pacer.pending == 2
    pacer.run()
    assert got == [0, 1, 2, 3, 4, 50, 60]


def test_resplit_replaces_what_was_read_ahead_past_the_change() -> None:
    clock = FakeClock()
    got: list[int] = []

    def take(arrival: Arrival) -> bool:
        got.append(arrival.index)
        return True

    pacer = Pacer(
        [(np.arange(10), np.arange(10.0))],
        start=clock.t,
        clock=clock,
        sleep=clock.sleep,
        try_dispatch=take,
    )
    pacer.step()
    pacer.resplit([([0, 1, 2, 3, 4, 101, 102], [0.0, 1, 2, 3, 4, 7, 8])], change_s=5.0)
    pacer.run()
    assert got == [0, 1, 2, 3, 4, 101, 102]


def test_a_share_read_in_chunks_is_paced_as_one() -> None:
    offsets = np.sort(np.random.default_rng(5).uniform(0, 3, 500))
    chunks = [(np.arange(k, min(k + 7, 500)), offsets[k : k + 7]) for k in range(0, 500, 7)]
    runs: list[list[int]] = []
    for share in ([(np.arange(500), offsets)], chunks):
        clock = FakeClock()
        got: list[int] = []

        def take(arrival: Arrival, got: list[int] = got) -> bool:
            got.append(arrival.index)
            return True

        Pacer(share, start=clock.t, clock=clock, sleep=clock.sleep, try_dispatch=take).run()
        runs.append(got)
    assert runs[0] == runs[1] == list(range(500))


def test_a_chunk_out_of_order_is_refused() -> None:
    clock = FakeClock()
    pacer = Pacer(
        [([0, 1], [0.0, 2.0]), ([2], [1.0])],
        start=clock.t,
        clock=clock,
        sleep=clock.sleep,
        try_dispatch=lambda a: True,
    )
    with pytest.raises(ValueError, match="sorted"):
        pacer.run()
