"""Think time: how long a session's user waits between reading an answer and sending the next turn.

One spec text, read the same way from the flag (``--session-think-time``) and the campaign field
(``workload.sessions.think_time``):

- ``0`` or ``2.5`` — a constant, in seconds;
- ``exponential:MEAN`` — exponential with that mean (memoryless, the usual model of a person);
- ``uniform:LOW-HIGH`` — uniform between the two bounds.

Draws take the random generator as an argument (never a global one), so a session's think times
are reproducible from the user's seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from ramplab.errors import UsageError

__all__ = ["ThinkTime", "parse_think_time"]

Distribution = Literal["constant", "exponential", "uniform"]
SPEC_HELP = "SECONDS | exponential:MEAN | uniform:LOW-HIGH"


@dataclass(frozen=True, slots=True)
class ThinkTime:
    """A think-time distribution, in seconds (``low``/``high`` only for ``uniform``)."""

    distribution: Distribution
    mean_s: float
    low_s: float = 0.0
    high_s: float = 0.0

    def draw(self, rng: random.Random) -> float:
        if self.distribution == "exponential":
            return rng.expovariate(1.0 / self.mean_s) if self.mean_s > 0 else 0.0
        if self.distribution == "uniform":
            return rng.uniform(self.low_s, self.high_s)
        return self.mean_s


def _seconds(text: str, field: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise UsageError(field, f"{text!r} is not a number of seconds ({SPEC_HELP})") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(field, f"seconds must be finite and ≥ 0, got {text.strip()!r}")
    return value


def parse_think_time(spec: str | float, field: str = "--session-think-time") -> ThinkTime:
    """The distribution of ``spec``; a ``UsageError`` on ``field`` names what is wrong."""
    text = str(spec).strip().lower()
    name, sep, arg = text.partition(":")
    if not sep:
        return ThinkTime("constant", _seconds(text, field))
    if name == "exponential":
        return ThinkTime("exponential", _seconds(arg, field))
    if name == "uniform":
        low_text, dash, high_text = arg.partition("-")
        if not dash:
            raise UsageError(field, f"uniform needs LOW-HIGH, got {arg!r}")
        low, high = _seconds(low_text, field), _seconds(high_text, field)
        if high < low:
            raise UsageError(field, f"uniform bounds must be LOW-HIGH with LOW ≤ HIGH, got {arg!r}")
        return ThinkTime("uniform", (low + high) / 2, low, high)
    raise UsageError(field, f"unknown think-time distribution {name!r} ({SPEC_HELP})")
