"""The contract between the streaming user (which makes attempts) and a retry policy.

The user asks ``admit()`` before every attempt (client-side throttling may refuse it), reports
every attempt's outcome to ``record()``, and after a failure asks ``next_delay()``: a number of
seconds to wait before the next attempt, or ``None`` to give up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    attempt: int  # 1-based number of the attempt that just ended
    ok: bool
    status: int | None  # HTTP status; None when no response (connect error, timeout, drop)
    error_kind: str | None
    retry_after_s: float | None  # from retry-after-ms / Retry-After, when the server sent one


class RetryPolicy(Protocol):
    def admit(self) -> bool:
        """May an attempt be sent now? (False: rejected locally, counted as an error.)"""
        ...

    def record(self, outcome: AttemptOutcome) -> None:
        """Every attempt's outcome, successes included (budgets and throttles learn from it)."""
        ...

    def next_delay(self, outcome: AttemptOutcome) -> float | None:
        """Seconds to wait before retrying after a failed attempt; ``None`` to stop."""
        ...


class NoRetry:
    """The default: every request gets exactly one attempt."""

    def admit(self) -> bool:
        return True

    def record(self, outcome: AttemptOutcome) -> None:
        return None

    def next_delay(self, outcome: AttemptOutcome) -> float | None:
        return None
