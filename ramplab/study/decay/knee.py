"""The knee of a per-stream tokens/s curve, found by a stated rule, and the lock's capacity.

The rule (a threshold on the plateau, chosen over a piecewise-linear fit on purpose): past the
lock's capacity the curve does not bend into a second straight line, it collapses — the lock's
queue grows for as long as the step lasts — so a two-segment fit would describe a cliff with a
slope that depends on the hold time. What is robust is *where* the curve leaves its plateau:

- **plateau**: the median of the per-step medians of the ``PLATEAU_STEPS`` lowest offered
  rates (the ramp must start well below the knee — 1 QPS in the study);
- **knee step**: the first step whose median falls more than ``DROP`` (20 %) below the plateau
  *and* whose next step is below as well (or it is the last step) — one noisy step that
  recovers is not a knee;
- **interval**: between the last step above the threshold and the knee step (the ramp did not
  measure in between, so the step spacing is the uncertainty); the **estimate** is where the
  straight line between those two steps crosses the threshold.

20 % is far above the step-to-step noise of a median over a step's streams (a few % on this
shared machine) and is what a queue in front of a lock costs near saturation: with Poisson
arrivals and a deterministic critical section of ``S`` ms (M/D/1), the wait is
``ρ S / (2 (1 − ρ))``, which reaches 20 % of a ~0.7 s stream at ρ ≈ 0.85–0.9. The knee therefore
lies just below the capacity ``1 / S``, and ``lock_capacity`` is what it is compared with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

__all__ = ["DROP", "MIN_STREAMS", "PLATEAU_STEPS", "Knee", "find_knee", "lock_capacity"]

DROP = 0.20
PLATEAU_STEPS = 3
MIN_STREAMS = 3  # a step's median over fewer streams is not evidence either way


@dataclass(frozen=True, slots=True)
class Knee:
    """Where a curve leaves its plateau; ``found`` False means no knee within the ramp."""

    found: bool
    plateau: float | None  # tokens/s
    threshold: float | None  # (1 − DROP) × plateau
    qps: float | None = None  # the threshold's crossing between the two steps
    low_qps: float | None = None  # the last step above the threshold
    high_qps: float | None = None  # the knee step
    dips: tuple[float, ...] = ()  # steps below the threshold that recovered (not knees)
    reason: str = ""  # why there is no knee, or why none could be looked for

    def describe(self) -> str:
        if self.found:
            return f"{self.qps:.3g} QPS (between {self.low_qps:g} and {self.high_qps:g} QPS)"
        return self.reason

    def to_json(self) -> dict[str, object]:
        return {
            "found": self.found,
            "qps": self.qps,
            "interval_qps": [self.low_qps, self.high_qps] if self.found else None,
            "plateau_tokens_per_s": self.plateau,
            "threshold_tokens_per_s": self.threshold,
            "dips_qps": list(self.dips),
            "reason": self.reason,
        }


def find_knee(
    offered: Sequence[float],
    rates: Sequence[float | None],
    drop: float = DROP,
    plateau_steps: int = PLATEAU_STEPS,
) -> Knee:
    """The knee of ``rates`` (per-step medians, ``None`` where a step has too few streams)
    against ``offered`` (ascending); see the module docstring for the rule."""
    points = sorted((x, y) for x, y in zip(offered, rates, strict=True) if y is not None)
    if len(points) < plateau_steps + 1:
        return Knee(False, None, None, reason=f"too few measured steps ({len(points)})")
    plateau = median(y for _, y in points[:plateau_steps])
    threshold = (1.0 - drop) * plateau
    below = [y < threshold for _, y in points]
    dips: list[float] = []
    for k in range(1, len(points)):
        if not below[k]:
            continue
        if k + 1 < len(points) and not below[k + 1]:
            dips.append(points[k][0])
            continue
        (x0, y0), (x1, y1) = points[k - 1], points[k]
        # y0 ≥ threshold > y1: the line between the two steps crosses the threshold once.
        crossing = x0 + (x1 - x0) * (y0 - threshold) / (y0 - y1)
        return Knee(True, plateau, threshold, crossing, x0, x1, tuple(dips))
    top = points[-1][0]
    return Knee(
        False,
        plateau,
        threshold,
        dips=tuple(dips),
        reason=f"no knee within the ramp (up to {top:g} QPS every step stayed within "
        f"{drop:.0%} of the plateau, or recovered at the next step)",
    )


def lock_capacity(sign_ms: float) -> float:
    """Requests per second one lock serves when each holds it ``sign_ms``: ``1000 / sign_ms``."""
    return 1000.0 / sign_ms
