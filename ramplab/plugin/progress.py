"""The master's progress file: a snapshot of the ramp engine every half second.

With ``--ramplab-progress-file PATH`` the master (or a local runner) rewrites ``PATH`` atomically
with the plan's start, the users, the live workers and the per-stage dispatched/dropped counts the
workers report — the figures a user watching the run wants and that the records cannot give
(a dropped arrival has no record). Workers ignore the option. ``ramplab.runs.progress`` reads the
file without importing Locust.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import gevent

from ramplab.errors import StorageError
from ramplab.plugin.master import MasterEngine

INTERVAL_S = 0.5
OPTION = "--ramplab-progress-file"
log = logging.getLogger("ramplab.stack")


def register_option(parser: Any) -> None:
    """``--ramplab-progress-file`` on Locust's parser (ramp runs only)."""
    parser.add_argument(
        OPTION,
        dest="ramplab_progress_file",
        default="",
        env_var="RAMPLAB_PROGRESS_FILE",
        help="master: write the ramp's progress (JSON) to this file every 0.5 s",
    )


def progress_path(parsed: Any) -> Path | None:
    target = str(getattr(parsed, "ramplab_progress_file", "") or "")
    return Path(target) if target else None


def snapshot(engine: MasterEngine) -> dict[str, Any] | None:
    """The engine's state now, or ``None`` before the plan exists."""
    if engine.plan is None:
        return None
    stages = len(engine.shape.stages)
    dispatched = [0] * stages
    dropped = [0] * stages
    peak_users = [0] * stages
    dispatched_total = dropped_total = 0
    live = set(engine.live_workers())
    for report in engine.progress.values():
        # A worker that reported before it had the plan sends empty lists.
        pairs = zip(report["dispatched"], report["dropped"], strict=False)
        for index, (sent, lost) in enumerate(pairs):
            dispatched[index] += sent
            dropped[index] += lost
        for index, peak in enumerate(list(report.get("peak_users") or ())[:stages]):
            peak_users[index] += int(peak)
        dispatched_total += int(report.get("dispatched_total", 0))
        dropped_total += int(report.get("dropped_total", 0))
    return {
        "time": time.time(),
        "run_start": engine.plan.start_epoch,
        "duration_s": engine.shape.duration_s,
        "users": engine.users,
        "workers": len(live),
        "dispatched": dispatched,
        "dropped": dropped,
        # Per stage, Σ the workers' peak users (measured windows), and the cap on them.
        "peak_users": peak_users,
        "max_users": engine.options.max_users,
        "dispatched_total": dispatched_total,
        "dropped_total": dropped_total,
        # Per step, the live latency figures (within 1 %: ``metrics/live.py``).
        "live": engine.live.snapshot(),
        # Each worker's self-check rows, so a rebuilt summary keeps ``generator_bound``.
        "health": {w: r["health"] for w, r in sorted(engine.progress.items()) if r.get("health")},
    }


def write(path: Path, data: dict[str, Any]) -> None:
    """``data`` into ``path`` atomically; a failed write leaves the last snapshot (and no
    temporary file) and raises ``StorageError``."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)  # a reader never sees half a file
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError.of(exc, path) from None


class ProgressWriter:
    """Rewrites the progress file every ``INTERVAL_S`` until :meth:`finish` writes the last one."""

    def __init__(self, engine: MasterEngine, path: Path) -> None:
        self.engine = engine
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.failure: StorageError | None = None  # the first failed write, logged once
        self._greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            gevent.sleep(INTERVAL_S)
            try:
                data = snapshot(self.engine)
                if data is not None:
                    self._write(data)
            except Exception:  # progress is a courtesy: it must never break the run
                log.exception("writing %s failed", self.path)

    def _write(self, data: dict[str, Any]) -> None:
        try:
            write(self.path, data)
        except StorageError as exc:  # a full disk: said once, the records writer stops the run
            if self.failure is None:
                self.failure = exc
                log.error("progress: %s", exc)

    def summarizing(self, records: int) -> None:
        """The run has ended and the master summarises ``records`` records: the final snapshot,
        ``"phase": "summarizing"``, rewritten every ``INTERVAL_S`` with a fresh ``time`` — the
        heartbeat by which ``ramplab run`` tells a master that works from one that hangs,
        however long the summary takes."""
        self._greenlet.kill(block=False)
        final = snapshot(self.engine)
        if final is None:
            return
        beat = {**final, "final": True, "phase": "summarizing", "records": records}
        self._greenlet = gevent.spawn(self._beat, beat)

    def _beat(self, data: dict[str, Any]) -> None:
        while True:
            self._write({**data, "time": time.time()})
            gevent.sleep(INTERVAL_S)

    def finish(self) -> None:
        """Stop the loop and write the final snapshot, marked ``"final": true``."""
        self._greenlet.kill(block=False)
        data = snapshot(self.engine)
        if data is not None:
            self._write({**data, "final": True, "phase": "done"})
