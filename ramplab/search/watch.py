"""The live watch of a running probe: stop it as soon as it cannot pass.

Read while the probe runs (the master's ``progress.json`` and the records appended to
the journal, whole batches only), two rules end a hopeless probe at once instead of
sitting through its hold:

- **misses** — requests of the measured windows that missed an SLO (or failed), plus the
  arrivals dropped there, exceed what the whole hold may miss and still pass: its expected
  arrivals less the good ones the verdict needs of them (``criterion: test``: the binomial
  test's ``k(n)``; otherwise ``goodput_min`` % of them, which the lower bound needs too);
- **drops** — more than ``drop_tolerance_pct`` % of the measured arrivals so far found no free
  user (at least ``MIN_ARRIVALS`` of them): the users are all held by a target that no longer
  keeps up.

The queue and lateness trends need whole windows and are judged on the summary afterwards
(``verdict.saturation``); with a few-second window that costs at most the rest of the hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ramplab.campaign.search import SearchSpec
from ramplab.load.shapes import Shape
from ramplab.results.acceptance import threshold
from ramplab.results.steps import EPOCH_SLACK_S
from ramplab.runs.tail import RunTail

__all__ = ["ProbeWatch"]

MIN_ARRIVALS = 20


@dataclass(slots=True)
class _Pending:
    step: int | None
    intended: float
    good: bool


class ProbeWatch:
    """Polls one probe's run directory; ``reason()`` says why to stop it now, if it should."""

    def __init__(self, run_dir: Path, shape: Shape, spec: SearchSpec) -> None:
        self.tail = RunTail(run_dir)
        self.shape = shape
        self.spec = spec
        self.expected = sum(st.rate * st.measured_s for st in shape.stages)
        self.measured = 0
        self.misses = 0
        self._pending: list[_Pending] = []

    @property
    def progress(self) -> dict[str, Any]:
        return self.tail.progress

    @property
    def run_start(self) -> float | None:
        return self.tail.run_start

    @property
    def records(self) -> int:
        return self.tail.records

    def poll(self) -> None:
        for rec in self.tail.poll():
            slo_ok = rec.get("slo_ok")
            good = bool(slo_ok) if slo_ok is not None else bool(rec.get("ok"))
            self._pending.append(_Pending(rec.get("step"), float(rec["intended_start"]), good))
        run_start = self.run_start
        if run_start is not None:
            pending, self._pending = self._pending, []
            for item in pending:
                self._count(item, run_start)

    def _count(self, item: _Pending, run_start: float) -> None:
        offset = item.intended - run_start
        stages = self.shape.stages
        stage = (
            stages[item.step]
            if item.step is not None and 0 <= item.step < len(stages)
            else self.shape.stage_at(offset)
        )
        slack = EPOCH_SLACK_S if item.step is not None else 0.0  # as results/steps.py counts
        if stage is None or not stage.measured_start_s - slack <= offset < stage.end_s + slack:
            return
        self.measured += 1
        if not item.good:
            self.misses += 1

    @property
    def dropped(self) -> int:
        return int(sum(self.progress.get("dropped", []) or [0]))

    @property
    def arrivals(self) -> int:
        """Measured arrivals the engine reported so far (dispatched + dropped)."""
        return int(sum(self.progress.get("dispatched", []) or [0])) + self.dropped

    def allowed_misses(self) -> float:
        """The misses the whole hold may have and still pass."""
        if self.spec.criterion == "test":
            n = round(self.expected)
            return float(n - threshold(n, self.spec.floor, self.spec.confidence))
        return (1.0 - self.spec.goal) * self.expected

    def reason(self) -> str | None:
        """Why the probe cannot pass, judged on what arrived so far; ``None``: keep going."""
        if not self.spec.early_stop:
            return None
        allowed = self.allowed_misses()
        missed = self.misses + self.dropped
        if missed > allowed:
            return (f"stopped early: {missed} misses already, more than the {allowed:.0f} that "
                    f"~{self.expected:.0f} arrivals may miss and pass")  # fmt: skip
        arrivals = self.arrivals
        tolerance = self.spec.drop_tolerance_pct / 100.0
        if arrivals >= MIN_ARRIVALS and self.dropped > tolerance * arrivals:
            return (f"stopped early: over-saturated: {self.dropped} of {arrivals} arrivals "
                    "dropped (no free user)")  # fmt: skip
        return None
