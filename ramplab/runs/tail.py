"""Following a run directory while it runs: the master's progress snapshot and the new records.

The one tailer of the live views (``progress.LiveProgress``, the terminal's table) and of the
search's early stop (``ramplab.search.watch``): each poll re-reads ``progress.json`` and returns
the records appended to ``requests.jsonl`` since the last poll. A line still being written waits
for the next poll; a line that is not JSON is skipped (a live view must not die of one).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import orjson

from ramplab.runs.rundir import RunDir

__all__ = ["RunTail"]


class RunTail:
    """Reads a run directory incrementally; ``progress`` is the last snapshot read."""

    def __init__(self, run_dir: Path) -> None:
        files = RunDir(run_dir)
        self.requests_path = files.requests
        self.progress_path = files.progress
        self.progress: dict[str, Any] = {}
        self.records = 0  # records read so far
        self._offset = 0
        self._partial = b""

    def poll(self) -> list[dict[str, Any]]:
        """Refresh ``progress``; the records written since the last poll, in file order."""
        with contextlib.suppress(OSError, ValueError):  # not written yet, or being replaced
            snapshot = json.loads(self.progress_path.read_text(encoding="utf-8"))
            if isinstance(snapshot, dict):
                self.progress = snapshot
        try:
            with self.requests_path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # an incomplete last line waits for the next poll
        records = []
        for line in lines:
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
        self.records += len(records)
        return records

    @property
    def run_start(self) -> float | None:
        """The plan's start (epoch seconds) once the master has written it."""
        start = self.progress.get("run_start")
        return None if start is None else float(start)
