"""A retry budget in Finagle's style: retries may add at most ``ratio`` extra load, plus a floor.

Over any sliding window of ``ttl_s`` seconds, a retry is allowed only while::

    retries_in_window < min_per_s · ttl_s + ratio · requests_in_window

(Finagle's ``RetryBudget(ttl = 10 s, minRetriesPerSec = 10, percentCanRetry = 0.2)``). The floor
keeps a low-traffic client able to retry at all; the ratio caps the amplification under an
outage, when every request fails and a per-request policy would multiply the load by
``max_attempts``. Consequence (tested): over a run of ``T`` seconds with ``N`` requests, retries
≤ ``ratio · N + min_per_s · (T + ttl_s)``.

One budget is shared by all the users of a worker; "requests" are first attempts only.
"""

from __future__ import annotations

from ramplab.retry.window import Clock, SlidingCounter


class RetryBudget:
    """Windowed budget: ``deposit()`` per request, ``try_withdraw()`` before each retry."""

    def __init__(self, ratio: float, min_per_s: float, clock: Clock, ttl_s: float = 10.0) -> None:
        if not 0 <= ratio <= 1000:
            raise ValueError(f"ratio must be in [0, 1000], got {ratio}")
        if not min_per_s >= 0:
            raise ValueError(f"min_per_s must be ≥ 0, got {min_per_s}")
        self.ratio = ratio
        self.min_per_s = min_per_s
        self.ttl_s = ttl_s
        self._requests = SlidingCounter(ttl_s, clock)
        self._retries = SlidingCounter(ttl_s, clock)
        self.granted = 0
        self.refused = 0

    def deposit(self) -> None:
        """A new request (first attempt) was made."""
        self._requests.add()

    def balance(self) -> float:
        """Retries still allowed in the current window (may be fractional)."""
        reserve = self.min_per_s * self.ttl_s
        return reserve + self.ratio * self._requests.count() - self._retries.count()

    def try_withdraw(self) -> bool:
        """Take one retry from the budget if it can afford it."""
        if self.balance() >= 1:
            self._retries.add()
            self.granted += 1
            return True
        self.refused += 1
        return False
