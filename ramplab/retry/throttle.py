"""Client-side adaptive throttling (Google SRE book, "Handling Overload").

Each client keeps, over the last ``window_s`` seconds (two minutes in the book), the number of
attempts it *wanted* to make (``requests``, including those it then rejected itself) and the
number the backend accepted (``accepts``), and rejects a new attempt locally with probability::

    p_reject = max(0, (requests − K · accepts) / (requests + 1))

With ``K = 2`` the client sends up to about twice what the backend accepts, so the backend
still sees enough traffic to notice recovery. Counting local rejections in ``requests`` is what
makes the rejection rate rise while the backend keeps refusing.

An attempt counts as *accepted* unless the backend refused it for overload: a status in
``reject_statuses`` (429 and 503 by default) or no response at all (timeout, connection error).
Other failures (e.g. 400) mean the backend did the work, so they count as accepts.
"""

from __future__ import annotations

from collections.abc import Iterable

from ramplab.retry.backoff import Rng
from ramplab.retry.base import AttemptOutcome
from ramplab.retry.window import Clock, SlidingCounter


class AdaptiveThrottle:
    """Shared by every user of a worker; ``admit()`` before each attempt, ``record()`` after."""

    def __init__(
        self,
        clock: Clock,
        rng: Rng,
        k: float = 2.0,
        window_s: float = 120.0,
        reject_statuses: Iterable[int] = (429, 503),
    ) -> None:
        if not k >= 1:
            raise ValueError(f"k must be ≥ 1, got {k}")
        self.k = k
        self._rng = rng
        self._requests = SlidingCounter(window_s, clock)
        self._accepts = SlidingCounter(window_s, clock)
        self.reject_statuses = frozenset(reject_statuses)
        self.rejected = 0

    def p_reject(self) -> float:
        requests = self._requests.count()
        accepts = self._accepts.count()
        return max(0.0, (requests - self.k * accepts) / (requests + 1))

    def admit(self) -> bool:
        p = self.p_reject()
        self._requests.add()
        if p > 0 and float(self._rng.random()) < p:
            self.rejected += 1
            return False
        return True

    def accepted(self, outcome: AttemptOutcome) -> bool:
        if outcome.ok:
            return True
        return outcome.status is not None and outcome.status not in self.reject_statuses

    def record(self, outcome: AttemptOutcome) -> None:
        if self.accepted(outcome):
            self._accepts.add()
