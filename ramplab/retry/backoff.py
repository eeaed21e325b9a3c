"""Back-off schedules: how long to wait after failed attempt ``n``, before attempt ``n + 1``.

The exponential family follows AWS's "Exponential Backoff and Jitter" formulas, with the
exponent counted from the first *failed* attempt (``n = 1`` waits about ``base``):

- exponential            ``min(cap, base · m^(n−1))``
- full jitter            ``U(0, min(cap, base · m^(n−1)))``
- equal jitter           ``v/2 + U(0, v/2)`` with ``v = min(cap, base · m^(n−1))``
- decorrelated jitter    ``min(cap, U(base, 3 · prev))``, ``prev`` starting at ``base``

A schedule is a pure function of the attempt number, the previous delay and a random source
passed in; the only per-request state (the previous delay, for decorrelated jitter) is kept by
the caller (``Retrier``), so one schedule object can serve every user of a worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


class Rng(Protocol):
    """Anything with ``random() -> float`` in [0, 1): numpy's ``Generator``, ``random.Random``."""

    def random(self) -> float: ...


class Backoff(Protocol):
    @property
    def name(self) -> str: ...

    def delay(self, attempt: int, prev_s: float | None, rng: Rng) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based); ``prev_s``: last delay."""
        ...


def _uniform(rng: Rng, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(rng.random())


def _check(**values: float) -> None:
    for name, v in values.items():
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be finite and ≥ 0, got {v}")


@dataclass(frozen=True, slots=True)
class Fixed:
    """The same delay every time."""

    delay_s: float
    name: str = "fixed"

    def __post_init__(self) -> None:
        _check(delay_s=self.delay_s)

    def delay(self, attempt: int, prev_s: float | None, rng: Rng) -> float:
        return self.delay_s


@dataclass(frozen=True, slots=True)
class Exponential:
    """``min(cap, base · multiplier^(n−1))``, no jitter (synchronised retry waves: a baseline)."""

    base_s: float
    cap_s: float
    multiplier: float = 2.0
    name: str = "exponential"

    def __post_init__(self) -> None:
        _check(base_s=self.base_s, cap_s=self.cap_s)
        if not self.multiplier >= 1:
            raise ValueError(f"multiplier must be ≥ 1, got {self.multiplier}")

    def ceiling(self, attempt: int) -> float:
        # Exponent clamped so a large attempt number cannot overflow before the cap applies.
        exponent = min(max(attempt - 1, 0), 1024)
        try:
            raw = self.base_s * self.multiplier**exponent
        except OverflowError:
            raw = math.inf
        return min(self.cap_s, raw)

    def delay(self, attempt: int, prev_s: float | None, rng: Rng) -> float:
        return self.ceiling(attempt)


@dataclass(frozen=True, slots=True)
class FullJitter:
    """AWS full jitter: ``U(0, min(cap, base · m^(n−1)))``."""

    base_s: float
    cap_s: float
    multiplier: float = 2.0
    name: str = "full_jitter"

    def __post_init__(self) -> None:
        Exponential(self.base_s, self.cap_s, self.multiplier)  # same validation

    def delay(self, attempt: int, prev_s: float | None, rng: Rng) -> float:
        v = Exponential(self.base_s, self.cap_s, self.multiplier).ceiling(attempt)
        return _uniform(rng, 0.0, v)


@dataclass(frozen=True, slots=True)
class EqualJitter:
    """AWS equal jitter: ``v/2 + U(0, v/2)``, ``v = min(cap, base · m^(n−1))``."""

    base_s: float
    cap_s: float
    multiplier: float = 2.0
    name: str = "equal_jitter"

    def __post_init__(self) -> None:
        Exponential(self.base_s, self.cap_s, self.multiplier)  # same validation

    def delay(self, attempt: int, prev_s: float | None, rng: Rng) -> float:
        v = Exponential(self.base_s, self.cap_s, self.multiplier).ceiling(attempt)
        return v / 2 + _uniform(rng, 0.0, v / 2)


@dataclass(frozen=True, slots=True)
class DecorrelatedJitter:
    """AWS decorrelated jitter: ``min(cap, U(base, 3 · prev))``, ``prev`` = base at first."""

    base_s: float
    cap_s: float
    name: str = "decorrelated_jitter"

    def __post_init__(self) -> None:
        _check(base_s=self.base_s, cap_s=self.cap_s)

    def delay(self, attempt: int, prev_s: float | None, rng: Rng) -> float:
        prev = self.base_s if prev_s is None or attempt <= 1 else prev_s
        return min(self.cap_s, _uniform(rng, self.base_s, 3 * prev))
