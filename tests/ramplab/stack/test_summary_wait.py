"""``ramplab run`` waits for a master that is summarising past its deadline, and only for one
whose heartbeat is fresh (issue: no deadline tied to the number of records).

The master here is a real process speaking the progress file's protocol the way
``ProgressWriter.summarizing`` does: ``"phase": "summarizing"`` with a ``time`` rewritten every
0.5 s. One keeps beating until it exits 0 well past the deadline; one stops beating (a hung
master) and must not be waited for.
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from ramplab.load.shapes import parse_shape
from ramplab.runs import progress as live
from ramplab.runs.progress import LiveProgress
from ramplab.stack.local import LocalStack, StackConfig
from ramplab.stack.process import ManagedProcess, ProcessSpec
from ramplab.stack.run import DEFAULT_LOCUSTFILE

MASTER = textwrap.dedent("""
    import json, os, sys, time
    path, beat_s, live_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    start = time.time()
    def write(data):
        with open(path + ".tmp", "w") as f:
            json.dump(data, f)
        os.replace(path + ".tmp", path)
    while time.time() - start < live_s:
        if time.time() - start < beat_s:
            write({"time": time.time(), "run_start": start - 10, "final": True,
                   "phase": "summarizing", "records": 3_600_000})
        time.sleep(0.5)
    write({"time": time.time(), "run_start": start - 10, "final": True, "phase": "done"})
""")


def stack_with(tmp_path: Path, beat_s: float, live_s: float) -> tuple[LocalStack, LiveProgress]:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stack = LocalStack(StackConfig(locustfile=DEFAULT_LOCUSTFILE, run_dir=run_dir, locust_args=[]))
    spec = ProcessSpec("master", [sys.executable, "-c", MASTER, str(run_dir / "progress.json"),
                                  str(beat_s), str(live_s)])  # fmt: skip
    stack.master = ManagedProcess(spec, run_dir / "logs").start()
    return stack, LiveProgress(run_dir, parse_shape("1@5s/0s"), 1)


def test_a_summarising_master_is_waited_for_past_the_deadline(tmp_path: Path) -> None:
    stack, progress = stack_with(tmp_path, beat_s=6.0, live_s=6.0)
    started = time.monotonic()
    lines: list[str] = []

    def tick() -> None:
        progress.poll()
        lines.append(progress.line())

    try:
        code = stack.wait(1.0, tick, progress.summarizing)
    finally:
        assert stack.master is not None
        stack.master.stop(5.0)
    assert code == 0  # not None: it was not given up on at 1 s
    assert time.monotonic() - started >= 5.0
    assert any(line.startswith("summarising 3.6 M records…") for line in lines)


def test_a_master_whose_heartbeat_stops_is_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "HEARTBEAT_STALE_S", 2.0)
    stack, progress = stack_with(tmp_path, beat_s=2.0, live_s=60.0)
    started = time.monotonic()
    try:
        code = stack.wait(1.0, progress.poll, progress.summarizing)
        assert code is None
        waited = time.monotonic() - started
        assert 3.0 <= waited < 30.0  # the heartbeat's last beat plus its staleness, not 60 s
    finally:
        assert stack.master is not None
        stack.master.stop(5.0)
