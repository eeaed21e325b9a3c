"""The master's scrape of the server's ``/metrics`` (``plugin/engine_scrape.py``) when its disk
fills and when the master is killed: the run goes on, and ``engine_metrics.jsonl`` holds whole
lines only.

Real runs against the reference target (``engine_metrics: auto`` finds its names). The full disk
is a tmpfs of its own (root only) under ``engine_metrics.jsonl`` alone — a symbolic link in the
results directory — so that the records, on a disk with room, show what the scraper's failure
does to the run: nothing (a full disk under the records is the writer's, which stops the run on
purpose: ``tests/ramplab/results``).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from ramplab.results.engine import read_samples
from ramplab.runs.rundir import RunDir
from tests.support.processes import Process, TargetProcess
from tests.support.ramp_runs import TARGET_ENV, check_law, run_ramp
from tests.support.scrape import wait_for
from tests.support.tmpfs import fill, tmpfs

pytestmark = pytest.mark.slow

ARGS = ["--ramplab-shape", "4@6s", "--ramplab-drain", "5"]
ROOM = 8192  # two pages of the tmpfs: a few scrapes of the target, not the run's


def whole_lines(path: Path) -> list[str]:
    """The file's lines, after checking that each is a whole JSON object ending in a newline."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), text[-200:]
    lines = text.splitlines()
    for line in lines:
        json.loads(line)
    return lines


def test_a_full_disk_stops_the_scrape_once_and_never_the_run(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", 1) as disk, TargetProcess(TARGET_ENV) as target:
        filler = fill(disk)
        os.truncate(filler, filler.stat().st_size - ROOM)
        out = tmp_path / "run"
        out.mkdir()
        RunDir(out).engine_metrics.symlink_to(disk / "engine_metrics.jsonl")
        run = run_ramp(tmp_path, target.url, ARGS)
        lines = whole_lines(disk / "engine_metrics.jsonl")
        samples = read_samples(out / "engine_metrics.jsonl")
    assert run.returncode == 0, run.tail()
    summary = check_law(run)
    assert summary["completed"] == len(run.records) >= 20
    log = run.logs["master"]
    assert log.count("engine metrics stopped:") == 1, log[-3000:]
    assert "No space left on device" in log
    assert 1 <= len(lines) < 10  # some scrapes fitted, the run's dozen did not
    assert len(samples) == len(lines)


def test_a_master_killed_mid_scrape_leaves_whole_lines(tmp_path: Path) -> None:
    path = RunDir(tmp_path / "run").engine_metrics

    def kill(master: Process, out: Path) -> None:
        wait_for(lambda: path.exists() and path.read_bytes().count(b"\n") >= 3, timeout_s=30)
        master.signal(signal.SIGKILL)

    with TargetProcess(TARGET_ENV) as target:
        run = run_ramp(tmp_path, target.url, ARGS, with_master=kill)
    assert run.returncode == -signal.SIGKILL
    lines = whole_lines(path)
    assert len(lines) >= 3
    samples = read_samples(path)
    assert len(samples) == len(lines)
    assert {s.engine for s in samples} == {"ramplab-target"}
    assert [s.t for s in samples] == sorted(s.t for s in samples)
