"""Live latency figures per step: sketches a worker fills and the master merges.

Each worker adds its successful records' TTFT, TPOT, TTLT and inter-token gaps (the gaps the
summary pools: ``RequestRecord.measured_itl``) to one ``Sketch`` per step and figure, and sends
what it added since its last report with the report; the master merges the deltas into the
run's sketches. What the master holds and what a report carries is bounded by the number of
steps and buckets, not by the number of requests. Every figure is within ``sketch.ALPHA`` of the
exact one (``docs/metrics.md``); ``summary.json`` gives the exact figures at the end.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ramplab.measure.record import RequestRecord
from ramplab.metrics.sketch import Sketch

__all__ = ["FIGURES", "LiveFigures"]

FIGURES = ("ttft_ms", "tpot_ms", "ttlt_ms", "itl_ms")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


class LiveFigures:
    """``{step: {figure: Sketch}}``."""

    def __init__(self) -> None:
        self.steps: defaultdict[int, dict[str, Sketch]] = defaultdict(
            lambda: {name: Sketch() for name in FIGURES}
        )

    def add(self, record: RequestRecord) -> None:
        assert record.step is not None
        sketches = self.steps[record.step]
        for name in ("ttft_ms", "tpot_ms", "ttlt_ms"):
            value = getattr(record, name)
            if value is not None:
                sketches[name].add(value)
        for gap in record.measured_itl():
            sketches["itl_ms"].add(gap)

    def merge_wire(self, data: dict[str, Any]) -> None:
        """Add a worker's report (``to_wire``); msgpack may have turned the steps into str."""
        for step, figures in data.items():
            mine = self.steps[int(step)]
            for name, wire in figures.items():
                if name in mine:
                    mine[name].merge(Sketch.from_wire(wire))

    def to_wire(self) -> dict[str, Any]:
        return {
            str(step): {name: s.to_wire() for name, s in sketches.items() if s.count}
            for step, sketches in self.steps.items()
        }

    def snapshot(self) -> dict[str, dict[str, dict[str, float | int | None]]]:
        """``{step: {figure: {"p50", "p90", "p99", "count"}}}`` for the progress file."""
        out: dict[str, dict[str, dict[str, float | int | None]]] = {}
        for step, sketches in sorted(self.steps.items()):
            out[str(step)] = {
                name: {
                    **{key: s.quantile(q) for key, q in QUANTILES.items()},
                    "count": s.count,
                }
                for name, s in sketches.items()
                if s.count
            }
        return out
