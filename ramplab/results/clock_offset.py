"""One worker's clock against the master's: the arithmetic of an NTP exchange (RFC 5905 §8).

The master stamps ``t0`` as it sends a ping, the worker ``t1`` on receipt and ``t2`` as it
answers, the master ``t3`` on the answer. With ``δ = (t3 − t0) − (t2 − t1)`` the round trip
spent on the way and ``θ = ((t1 − t0) + (t2 − t3)) / 2`` the estimate, the true offset lies
within ``θ ± δ/2`` however the delay splits between the two directions — so ``δ/2`` is a bound,
not a guess. Of several samples the one with the smallest round trip is the estimate (NTP's
clock filter): queueing in the network or in either event loop only widens a sample, so the
narrowest is the best. The messages that carry the stamps are the plugin's
(``ramplab/plugin/clock_sync.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ramplab.results.summary import ClockOffset

__all__ = ["ClockSample", "estimate", "surely_off_by"]


@dataclass(frozen=True, slots=True)
class ClockSample:
    """One exchange: ``t0``/``t3`` on the master's clock, ``t1``/``t2`` on the worker's."""

    t0: float
    t1: float
    t2: float
    t3: float

    @property
    def offset_s(self) -> float:
        """The worker's clock minus the master's."""
        return ((self.t1 - self.t0) + (self.t2 - self.t3)) / 2.0

    @property
    def delay_s(self) -> float:
        """The round trip, less the worker's own time between receipt and answer."""
        return (self.t3 - self.t0) - (self.t2 - self.t1)


def estimate(samples: Iterable[ClockSample]) -> ClockOffset | None:
    """The offset of the narrowest sample, its bound (half its round trip) and the count."""
    kept = list(samples)
    if not kept:
        return None
    best = min(kept, key=lambda s: s.delay_s)
    return ClockOffset(
        offset_ms=best.offset_s * 1000.0,
        uncertainty_ms=max(0.0, best.delay_s) * 1000.0 / 2.0,
        samples=len(kept),
    )


def surely_off_by(found: ClockOffset) -> float:
    """How far the clocks are apart at least (ms): 0 when the bound includes agreement."""
    return max(0.0, abs(found.offset_ms) - found.uncertainty_ms)
