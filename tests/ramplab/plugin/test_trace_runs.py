"""Trace replay in real Locust processes (a master and two workers) against the real target.

A 40-request trace spanning 7.8 s is replayed twice as fast. Every request must go out as its
row says: at the row's time (scaled) from the run start, with the row's input length as the
prompt the target counts and the row's output length as the answer it streams. The arrival
times are checked twice: the schedule's own (exact: the record carries the trace's offset), and
the send the pacer actually achieved (the engine's pacing error, bounded below).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ramplab.load.trace import load_trace, replay
from tests.support.ramp_runs import RampRun, run_ramp
from tests.support.targets import SharedTarget

# One worker for the module: its tests share one run (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("trace-runs")]

SPEED = 2.0
ROWS = 40


def write_trace(path: Path) -> Path:
    rng = np.random.default_rng(11)
    at = np.cumsum(rng.exponential(0.2, ROWS))
    rows = [
        {"timestamp": round(1000 * t), "input_length": int(i), "output_length": int(o)}
        for t, i, o in zip(at, rng.integers(10, 200, ROWS), rng.integers(2, 12, ROWS), strict=True)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(shared_target: SharedTarget, tmp_path_factory: pytest.TempPathFactory) -> RampRun:
    target = shared_target.reset()
    tmp = tmp_path_factory.mktemp("trace")
    trace = write_trace(tmp / "trace.jsonl")
    args = ["--ramplab-trace", str(trace), "--ramplab-trace-speed", str(SPEED)]
    done = run_ramp(tmp, target.url, args, workers=2)
    assert done.returncode == 0, done.tail()
    return done


def test_every_row_is_sent_once_with_its_lengths(run: RampRun) -> None:
    trace = load_trace(Path(run.summary["arrivals"].split(":", 4)[4]))
    records = run.records
    assert sorted(r["arrival"] for r in records) == list(range(ROWS))
    assert {r["worker"] for r in records} == set(run.summary["workers"][0][1])  # both workers
    for r in records:
        assert r["ok"], r
        assert r["prompt_tokens"] == trace.input_tokens[r["arrival"]]
        assert r["requested_prompt_tokens"] == trace.input_tokens[r["arrival"]]
        assert r["output_tokens"] == trace.output_tokens[r["arrival"]]
    (step,) = run.summary["steps"]
    assert (step["scheduled"], step["dropped"], step["lost"]) == (ROWS, 0, 0)


def test_arrival_times_are_the_trace_scaled(run: RampRun) -> None:
    trace = replay(load_trace(Path(run.summary["arrivals"].split(":", 4)[4])), SPEED)
    start = run.summary["run_start"]
    intended = {r["arrival"]: r["intended_start"] - start for r in run.records}
    for index, offset in intended.items():
        assert offset == pytest.approx(trace.offsets[index], abs=1e-6)
    # The send the pacer achieved: late by the timer's wake-up and the hand-over to a user.
    # Measured on this 2-core machine shared with other test runs (2026-12-03): see
    # docs/workloads.md; bounded here with a wide margin over what was seen.
    late = np.array([r["lateness_ms"] for r in run.records])
    assert late.min() >= 0.0
    assert np.median(late) <= 20.0, late
    assert np.percentile(late, 90) <= 100.0, late
