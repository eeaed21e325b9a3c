"""The live watch of a running probe: stop it as soon as it cannot pass.

Read while the probe runs (the master's ``progress.json`` and the records appended to
``requests.jsonl``, complete lines only), two rules end a hopeless probe at once instead of
sitting through its hold:

- **misses** — requests of the measured windows that missed an SLO (or failed), plus the
  arrivals dropped there, exceed ``(1 − goodput_min) ×`` the arrivals the whole hold will
  have: even if every later request met the SLO, the point estimate could not reach the goal
  (and the lower bound, stricter, neither);
- **drops** — more than ``drop_tolerance_pct`` % of the measured arrivals so far found no free
  user (at least ``MIN_ARRIVALS`` of them): the users are all held by a target that no longer
  keeps up.

The queue and lateness trends need whole windows and are judged on the summary afterwards
(``verdict.saturation``); with a few-second window that costs at most the rest of the hold.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ramplab.campaign.search import SearchSpec
from ramplab.load.shapes import Shape
from ramplab.runs.rundir import RunDir

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
        self.requests_path = RunDir(run_dir).requests
        self.progress_path = RunDir(run_dir).progress
        self.shape = shape
        self.spec = spec
        self.expected = sum(st.rate * st.measured_s for st in shape.stages)
        self.run_start: float | None = None
        self.progress: dict[str, Any] = {}
        self.records = 0
        self.measured = 0
        self.misses = 0
        self._pending: list[_Pending] = []
        self._offset = 0
        self._partial = b""

    def poll(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # not written yet, or being replaced
            self.progress = json.loads(self.progress_path.read_text(encoding="utf-8"))
            self.run_start = float(self.progress["run_start"])
        self._read_records()
        if self.run_start is not None:
            pending, self._pending = self._pending, []
            for item in pending:
                self._count(item, self.run_start)

    def _read_records(self) -> None:
        try:
            with self.requests_path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            self.records += 1
            slo_ok = rec.get("slo_ok")
            good = bool(slo_ok) if slo_ok is not None else bool(rec.get("ok"))
            self._pending.append(_Pending(rec.get("step"), float(rec["intended_start"]), good))

    def _count(self, item: _Pending, run_start: float) -> None:
        offset = item.intended - run_start
        stages = self.shape.stages
        stage = (
            stages[item.step]
            if item.step is not None and 0 <= item.step < len(stages)
            else self.shape.stage_at(offset)
        )
        if stage is None or not stage.in_measured(offset):
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

    def reason(self) -> str | None:
        """Why the probe cannot pass, judged on what arrived so far; ``None``: keep going."""
        if not self.spec.early_stop:
            return None
        allowed = (1.0 - self.spec.goal) * self.expected
        missed = self.misses + self.dropped
        if missed > allowed:
            return (f"stopped early: {missed} misses already, more than the "
                    f"{allowed:.0f} that {self.spec.goodput_min:g} % of ~{self.expected:.0f} "
                    "arrivals allows")  # fmt: skip
        arrivals = self.arrivals
        tolerance = self.spec.drop_tolerance_pct / 100.0
        if arrivals >= MIN_ARRIVALS and self.dropped > tolerance * arrivals:
            return (f"stopped early: over-saturated: {self.dropped} of {arrivals} arrivals "
                    "dropped (no free user)")  # fmt: skip
        return None
