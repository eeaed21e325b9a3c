"""User sizing: Erlang B on top of Little's law, and the warm-start prior."""

from __future__ import annotations

import numpy as np
import pytest

from ramplab.load.sizing import (
    DEFAULT_MAX_LOSS,
    UserSizer,
    erlang_b,
    erlang_b_servers,
    prior_duration_s,
    size_users,
    worker_cap,
)


def test_erlang_b_known_values() -> None:
    # Textbook values: B(1, A) = A / (1 + A); B(2, 1) = 0.2; B(10, 5) ≈ 0.01838.
    assert erlang_b(1, 3.0) == pytest.approx(0.75)
    assert erlang_b(2, 1.0) == pytest.approx(0.2)
    assert erlang_b(10, 5.0) == pytest.approx(0.018385, abs=1e-6)
    assert erlang_b(0, 2.0) == 1.0
    c = erlang_b_servers(5.0, 0.01)
    assert erlang_b(c, 5.0) <= 0.01 < erlang_b(c - 1, 5.0)


def test_erlang_b_matches_a_loss_system_simulation() -> None:
    # M/G/c/c with deterministic service (insensitivity: only the mean matters).
    rng = np.random.default_rng(7)
    load, servers, n = 3.4, 6, 200_000
    arrivals = np.cumsum(rng.exponential(1.0, n))
    free_at = np.zeros(servers)
    lost = 0
    for t in arrivals:
        k = int(np.argmin(free_at))
        if free_at[k] > t:
            lost += 1
        else:
            free_at[k] = t + load
    assert lost / n == pytest.approx(erlang_b(servers, load), abs=0.005)


def test_warm_start_drops_small_load_regression() -> None:
    """The hand run's 7 of 29 dropped arrivals at 10 QPS: 6 users for L = 10 × 0.34 s = 3.4.

    A multiplicative headroom alone (ceil(3.4 × 1.5) = 6) loses ~8 % of Poisson arrivals at
    that load; Erlang B sizes for ≤ 0.1 %.
    """
    old = size_users(10, 0.34, headroom=1.5, max_users=1000)
    assert old == 6
    assert erlang_b(old, 3.4) > 0.05
    new = size_users(10, 0.34, headroom=1.5, max_users=1000, max_loss=DEFAULT_MAX_LOSS)
    assert erlang_b(new, 3.4) <= DEFAULT_MAX_LOSS
    # Large loads: the headroom term dominates, Erlang B adds nothing.
    assert size_users(100, 2.0, headroom=1.5, max_users=1000, max_loss=1e-3) == 300


def test_sizing_is_per_worker() -> None:
    # Two workers each pace half the rate with their own users: 2 × Erlang(L/2) > Erlang(L).
    per_worker = erlang_b_servers(1.7, 1e-3)
    two = size_users(10, 0.34, headroom=1.0, max_users=1000, workers=2, max_loss=1e-3)
    assert two == 2 * per_worker
    assert two >= size_users(10, 0.34, headroom=1.0, max_users=1000, max_loss=1e-3)
    with pytest.raises(ValueError, match="workers"):
        size_users(1, 1, max_users=10, workers=0)


def test_prior_before_any_observation() -> None:
    assert prior_duration_s(16) == pytest.approx(1.0 + 16 * 0.05)
    sizer = UserSizer(max_users=1000, default_duration_s=prior_duration_s(16), max_loss=1e-3)
    assert sizer.observed == 0
    assert sizer.duration_s() == pytest.approx(1.8)
    # 10 QPS × 1.8 s: Erlang B for L = 18 at 0.1 %, above 18 × 1.5 = 27.
    assert sizer.users(10) == max(27, erlang_b_servers(18.0, 1e-3))
    sizer.observe_many([0.3, 0.4])
    assert sizer.observed == 2
    assert sizer.duration_s() == pytest.approx(0.35)


def test_stall_reserve_floor() -> None:
    # 300 QPS of 5 ms streams: Little's law asks for 2 users, a 0.25 s stall needs 75.
    assert size_users(300, 0.005, max_users=1000, max_loss=1e-3) < 10
    assert size_users(300, 0.005, max_users=1000, max_loss=1e-3, stall_s=0.25) == 75
    assert size_users(300, 0.005, max_users=1000, workers=2, stall_s=0.25) == 76  # 2 × 38


@pytest.mark.parametrize(
    ("max_users", "workers", "share"), [(200, 1, 200), (8, 3, 2), (2, 2, 1), (1, 4, 1), (5, 0, 5)]
)
def test_worker_cap_is_a_floor_share_of_at_least_one(
    max_users: int, workers: int, share: int
) -> None:
    assert worker_cap(max_users, workers) == share
