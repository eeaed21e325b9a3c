"""Following a run directory while it runs: the master's progress snapshot and the new records.

The one tailer of the live views (``progress.LiveProgress``, the terminal's table) and of the
search's early stop (``ramplab.search.watch``): each poll re-reads ``progress.json`` and returns
the records appended to the run's journal since the last poll (``records.journal.JournalTail``).
A batch still being written waits for the next poll.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from ramplab.records.journal import JournalTail
from ramplab.records.schema import dicts_of
from ramplab.runs.rundir import RunDir

__all__ = ["RunTail"]


class RunTail:
    """Reads a run directory incrementally; ``progress`` is the last snapshot read."""

    def __init__(self, run_dir: Path) -> None:
        files = RunDir(run_dir)
        self.progress_path = files.progress
        self.progress: dict[str, Any] = {}
        self.records = 0  # records read so far
        self._journal = JournalTail(files.records.journal)

    def poll(self) -> list[dict[str, Any]]:
        """Refresh ``progress``; the records written since the last poll, in file order."""
        with contextlib.suppress(OSError, ValueError):  # not written yet, or being replaced
            snapshot = json.loads(self.progress_path.read_text(encoding="utf-8"))
            if isinstance(snapshot, dict):
                self.progress = snapshot
        records = [row for batch in self._journal.poll() for row in dicts_of(batch)]
        self.records += len(records)
        return records

    @property
    def run_start(self) -> float | None:
        """The plan's start (epoch seconds) once the master has written it."""
        start = self.progress.get("run_start")
        return None if start is None else float(start)
