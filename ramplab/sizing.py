"""How many users a worker needs for its share of the rate: Little's law plus headroom.

In steady state the number of requests in flight is ``L = λ · W`` (arrival rate × mean time in
the system). An open-loop pacer needs at least that many free users, or it drops arrivals; the
``headroom`` factor covers the variance of ``W`` and bursts of the arrival process, and
``max_users`` bounds what a worker process can carry (dropped arrivals beyond it are counted,
which is the honest outcome). Before any stream has finished, ``default_duration_s`` (a
warm-start guess, e.g. from the previous step or the campaign) stands in for ``W``.
"""

from __future__ import annotations

import math
from collections import deque


def size_users(
    rate: float,
    duration_s: float,
    *,
    headroom: float = 1.5,
    max_users: int,
    min_users: int = 1,
) -> int:
    """``ceil(rate × duration_s × headroom)`` clamped to ``[min_users, max_users]``."""
    if not (rate >= 0 and duration_s >= 0 and headroom >= 1):
        raise ValueError(
            f"need rate ≥ 0, duration ≥ 0, headroom ≥ 1; got {rate}, {duration_s}, {headroom}"
        )
    if not 1 <= min_users <= max_users:
        raise ValueError(f"need 1 ≤ min_users ≤ max_users, got {min_users}, {max_users}")
    # The epsilon keeps float noise (e.g. 10 × 0.3 × 1.5 = 4.500000000000001) from adding a user.
    need = math.ceil(rate * duration_s * headroom - 1e-9)
    return min(max_users, max(min_users, need))


class UserSizer:
    """Little's-law sizing from the mean of the last ``window`` observed stream durations."""

    def __init__(
        self,
        *,
        max_users: int,
        default_duration_s: float = 2.0,
        headroom: float = 1.5,
        min_users: int = 1,
        window: int = 500,
    ) -> None:
        self.max_users = max_users
        self.min_users = min_users
        self.headroom = headroom
        self.default_duration_s = default_duration_s
        self._durations: deque[float] = deque(maxlen=window)

    def observe(self, duration_s: float) -> None:
        """A finished request's time in the system (intended start → outcome, waits included)."""
        self._durations.append(duration_s)

    def duration_s(self) -> float:
        """The mean observed duration, or the warm-start default before any observation."""
        if not self._durations:
            return self.default_duration_s
        return sum(self._durations) / len(self._durations)

    def users(self, rate: float) -> int:
        return size_users(
            rate,
            self.duration_s(),
            headroom=self.headroom,
            max_users=self.max_users,
            min_users=self.min_users,
        )
