"""``Retrier``: the one ``RetryPolicy`` implementation, composed from interchangeable parts.

A retry decision has independent concerns — how many attempts, which failures are worth
retrying, how long to wait (a ``Backoff``, or the server's ``Retry-After``), and whether the
client as a whole can afford it (a shared ``RetryBudget``) or should not even send (a shared
``AdaptiveThrottle``). Composing them, rather than one class per combination, lets a campaign
compare e.g. "decorrelated jitter + budget" with "Retry-After + throttle" by configuration.

Ownership: a ``Retrier`` belongs to one user (one request chain at a time) because it keeps
the previous delay of the current chain; the budget and the throttle are shared across the
users of a worker (``RetrySetup.policy()`` in ``config.py`` wires that up). A locally rejected
attempt (``admit()`` false) ends the request; the caller does not call ``record()`` for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ramplab.retry.backoff import Backoff, Rng
from ramplab.retry.base import AttemptOutcome
from ramplab.retry.budget import RetryBudget
from ramplab.retry.throttle import AdaptiveThrottle

DEFAULT_RETRY_STATUSES = frozenset({429, 502, 503, 504})
DEFAULT_RETRY_KINDS = frozenset({"timeout", "connect_error", "connection_dropped"})


@dataclass(frozen=True, slots=True)
class RetryOn:
    """Which failed attempts are retryable: by HTTP status, or by error kind when no status."""

    statuses: frozenset[int] = DEFAULT_RETRY_STATUSES
    kinds: frozenset[str] = DEFAULT_RETRY_KINDS

    @classmethod
    def of(cls, items: Iterable[int | str]) -> RetryOn:
        statuses = frozenset(i for i in items if isinstance(i, int))
        kinds = frozenset(i for i in items if isinstance(i, str))
        return cls(statuses, kinds)

    def __call__(self, outcome: AttemptOutcome) -> bool:
        if outcome.ok:
            return False
        if outcome.status is not None and outcome.status in self.statuses:
            return True
        return outcome.error_kind is not None and outcome.error_kind in self.kinds


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Honour the server's delay on ``statuses``, clamped to ``cap_s``.

    Clamping (rather than giving up when the server asks for longer than the cap) keeps the
    load generator's own worst case bounded; campaigns comparing policies set the cap above
    the target's largest ``Retry-After``.
    """

    cap_s: float = 60.0
    statuses: frozenset[int] = frozenset({429, 503})

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cap_s) and self.cap_s >= 0):
            raise ValueError(f"cap_s must be finite and ≥ 0, got {self.cap_s}")

    def delay(self, outcome: AttemptOutcome) -> float | None:
        """The server's delay if it applies, else None (fall back to the back-off)."""
        ra = outcome.retry_after_s
        if outcome.status not in self.statuses or ra is None or not math.isfinite(ra):
            return None
        return min(max(ra, 0.0), self.cap_s)


@dataclass(slots=True)
class Retrier:
    """A ``RetryPolicy`` for one user; see the module docstring for who owns what."""

    backoff: Backoff | None
    rng: Rng
    max_attempts: int = 1
    retry_on: RetryOn = field(default_factory=RetryOn)
    retry_after: RetryAfter | None = None
    budget: RetryBudget | None = None
    throttle: AdaptiveThrottle | None = None
    _prev_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be ≥ 1, got {self.max_attempts}")

    def admit(self) -> bool:
        return self.throttle.admit() if self.throttle is not None else True

    def record(self, outcome: AttemptOutcome) -> None:
        if outcome.attempt == 1:
            self._prev_s = None  # a new chain: decorrelated jitter restarts from base
            if self.budget is not None:
                self.budget.deposit()
        if self.throttle is not None:
            self.throttle.record(outcome)

    def next_delay(self, outcome: AttemptOutcome) -> float | None:
        if outcome.attempt >= self.max_attempts or not self.retry_on(outcome):
            return None
        server = self.retry_after.delay(outcome) if self.retry_after is not None else None
        if server is not None:
            delay = server
        elif self.backoff is not None:
            prev = None if outcome.attempt <= 1 else self._prev_s
            delay = self.backoff.delay(outcome.attempt, prev, self.rng)
        else:
            delay = 0.0
        # The budget is asked last, so a retry the policy would refuse anyway costs nothing.
        if self.budget is not None and not self.budget.try_withdraw():
            return None
        self._prev_s = delay
        return delay
