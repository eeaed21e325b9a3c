"""The master's progress file: a snapshot of the ramp engine every half second.

Imported by ``locustfiles/llm_ramp.py``. With ``--ramplab-progress-file PATH`` the master (or a
local runner) rewrites ``PATH`` atomically with the plan's start, the users, the live workers and
the per-stage dispatched/dropped counts the workers report — the figures a user watching the run
wants and that ``requests.jsonl`` cannot give (a dropped arrival has no record). Workers ignore
the option. ``progress.py`` reads the file without importing Locust.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.runners import LocalRunner, MasterRunner

from ramplab.plugin.ramp_hooks import master_for

INTERVAL_S = 0.5
log = logging.getLogger("ramplab.stack")


def snapshot(environment: Any) -> dict[str, Any] | None:
    """The engine's state now, or ``None`` before the plan exists."""
    engine = master_for(environment)
    if engine is None or engine.plan is None:
        return None
    stages = len(engine.shape.stages)
    dispatched = [0] * stages
    dropped = [0] * stages
    dispatched_total = dropped_total = 0
    live = set(engine.live_workers())
    for report in engine.progress.values():
        # A worker that reported before it had the plan sends empty lists.
        pairs = zip(report["dispatched"], report["dropped"], strict=False)
        for index, (sent, lost) in enumerate(pairs):
            dispatched[index] += sent
            dropped[index] += lost
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
        "dispatched_total": dispatched_total,
        "dropped_total": dropped_total,
    }


def write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)  # a reader never sees half a file


def _loop(environment: Any, path: Path) -> None:
    while True:
        gevent.sleep(INTERVAL_S)
        try:
            data = snapshot(environment)
            if data is not None:
                write(path, data)
        except Exception:  # progress is a courtesy: it must never break the run
            log.exception("writing %s failed", path)


def _on_parser(parser: Any, **_: Any) -> None:
    parser.add_argument(
        "--ramplab-progress-file",
        dest="ramplab_progress_file",
        default="",
        env_var="RAMPLAB_PROGRESS_FILE",
        help="master: write the ramp's progress (JSON) to this file every 0.5 s",
    )


def _on_init(environment: Any, **_: Any) -> None:
    parsed = environment.parsed_options
    target = getattr(parsed, "ramplab_progress_file", "") if parsed is not None else ""
    if not target or not isinstance(environment.runner, MasterRunner | LocalRunner):
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    environment._ramplab_progress = gevent.spawn(_loop, environment, path)


def _on_quitting(environment: Any, **_: Any) -> None:
    greenlet = getattr(environment, "_ramplab_progress", None)
    if greenlet is None:
        return
    greenlet.kill(block=False)
    data = snapshot(environment)
    target = getattr(environment.parsed_options, "ramplab_progress_file", "")
    if data is not None and target:
        write(Path(target), {**data, "final": True})


_events: Any = events  # Locust's hooks are untyped
_events.init_command_line_parser.add_listener(_on_parser)
_events.init.add_listener(_on_init)
_events.quitting.add_listener(_on_quitting)
