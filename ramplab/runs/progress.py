"""The run's progress while it runs: the master's snapshot plus the records written so far.

``progress.json`` (written by the master, see ``reporter.py``) gives what only the engine knows:
the plan's start, users, live workers, dispatched and dropped arrivals per stage (measured
windows). The records' journal gives the rest as it grows: sent requests and errors per stage. The
file is read incrementally, complete lines only, so a poll costs only what was appended.

The figures are live and approximate (records arrive up to a second late, after the stream ends
and the worker's next batch); the per-step table printed at the end, from ``summary.json``, is
the measurement.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from ramplab.load.shapes import Shape
from ramplab.results.failures import kinds_text
from ramplab.runs.tail import RunTail

__all__ = ["LiveProgress", "StepTally"]


@dataclass(slots=True)
class StepTally:
    """Records of one stage whose intended start is in its measured window."""

    sent: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # by error kind
    statuses: Counter[str] = field(default_factory=Counter)  # failed records' HTTP statuses


# The master rewrites its heartbeat every 0.5 s while it summarises; this long without one, it
# is taken for hung (a paused VM, a deadlock) and ``ramplab run`` stops waiting for it.
HEARTBEAT_STALE_S = 30.0


class LiveProgress:
    """Polls a run directory; ``table()`` renders the current state."""

    def __init__(self, run_dir: Path, shape: Shape, workers: int) -> None:
        self.tail = RunTail(run_dir)
        self.shape = shape
        self.expected_workers = workers
        self.tally = [StepTally() for _ in shape.stages]

    @property
    def master(self) -> dict[str, Any]:
        """The master's last progress snapshot."""
        return self.tail.progress

    @property
    def records(self) -> int:
        return self.tail.records

    def poll(self) -> None:
        for record in self.tail.poll():
            self._add(record)

    def _add(self, record: dict[str, Any]) -> None:
        start = self.master.get("run_start")
        step = record.get("step")
        if start is None or step is None or not 0 <= int(step) < len(self.tally):
            return
        stage = self.shape.stages[int(step)]
        if not stage.in_measured(float(record["intended_start"]) - float(start)):
            return
        tally = self.tally[int(step)]
        if int(record.get("attempts") or 0) > 0:
            tally.sent += 1
        if record.get("ok"):
            tally.ok += 1
        else:
            tally.errors[str(record.get("error_kind") or "unknown")] += 1
            if record.get("status") is not None:
                tally.statuses[str(record["status"])] += 1

    def summarizing(self, now: float | None = None) -> bool:
        """The master has ended the run and is summarising, and its heartbeat is fresh (at most
        ``HEARTBEAT_STALE_S`` old): it is working, however long that takes."""
        if self.master.get("phase") != "summarizing":
            return False
        beat = float(self.master.get("time") or 0.0)
        return (now or time.time()) - beat <= HEARTBEAT_STALE_S

    def elapsed(self, now: float | None = None) -> float | None:
        start = self.master.get("run_start")
        return None if start is None else (now or time.time()) - float(start)

    def title(self) -> str:
        elapsed = self.elapsed()
        if elapsed is None:
            return "waiting for the plan"
        if self.master.get("phase") == "summarizing":
            records = int(self.master.get("records") or 0)
            late = max(0.0, elapsed - self.shape.duration_s)
            return f"summarising {_count(records)} records… ({late:.0f} s after the load)"
        shown = max(0.0, min(elapsed, self.shape.duration_s))
        return (
            f"{shown:.0f}/{self.shape.duration_s:.0f} s · users {self.master.get('users', 0)} · "
            f"workers {self.master.get('workers', 0)}/{self.expected_workers} · "
            f"records {self.records} · dropped {self.master.get('dropped_total', 0)}"
        )

    def table(self) -> Table:
        """One row per stage: target vs achieved so far, dropped, errors."""
        table = Table(title=self.title(), title_justify="left")
        columns = ("step", "target QPS", "achieved QPS", "sent", "dropped", "TTFT p50/p99 ms",
                   "ITL p50/p99 ms", "errors", "state")  # fmt: skip
        for name in columns:
            table.add_column(name, justify="left" if name in ("errors", "state") else "right")
        live = self.master.get("live") or {}
        elapsed = self.elapsed()
        dropped = self.master.get("dropped") or [0] * len(self.tally)
        for stage, tally in zip(self.shape.stages, self.tally, strict=True):
            measured = (
                0.0 if elapsed is None else min(elapsed, stage.end_s) - stage.measured_start_s
            )
            if elapsed is None or elapsed < stage.start_s:
                state = "pending"
            elif elapsed < stage.measured_start_s:
                state = "warm-up"
            elif elapsed < stage.end_s:
                state = "running"
            else:
                state = "done"
            achieved = f"{tally.sent / measured:.2f}" if measured >= 1.0 else "-"
            errors = kinds_text(tally.errors, tally.statuses) if tally.errors else "-"
            figures = live.get(str(stage.index)) or {}
            table.add_row(
                str(stage.index), f"{stage.rate:g}", achieved, str(tally.sent),
                str(dropped[stage.index]) if stage.index < len(dropped) else "-",
                _pair(figures.get("ttft_ms")), _pair(figures.get("itl_ms"), digits=1), errors,
                state,
            )  # fmt: skip
        return table

    def line(self) -> str:
        """A one-line status for logs and pipes (no terminal to redraw)."""
        elapsed = self.elapsed()
        if elapsed is None:
            return "waiting for the plan"
        if self.master.get("phase") == "summarizing":
            return self.title()
        stage = self.shape.stage_at(max(0.0, elapsed))
        where = f"step {stage.index} @ {stage.rate:g} QPS" if stage else "draining"
        return f"{where} · {self.title()}"


def _pair(figure: dict[str, Any] | None, digits: int = 0) -> str:
    """A live p50 / p99 (``~``: within 1 %, from the workers' sketches)."""
    if not figure or figure.get("p50") is None or figure.get("p99") is None:
        return "-"
    return f"~{float(figure['p50']):.{digits}f} / {float(figure['p99']):.{digits}f}"


def _count(n: int) -> str:
    """3.6 M, 120 k, 950."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} M"
    if n >= 10_000:
        return f"{n / 1e3:.0f} k"
    return str(n)
