"""Users on demand in real Locust processes: a TTLT that jumps far past the sizer's estimate.

The target streams 8 tokens 10 ms apart until the first records are in; then it is slowed to
150 ms a token (TTLT ~1.2 s, twelve times what the sizer has seen, and the duration prior is
50 ms). The Little's-law sizer lags such a jump by seconds; the workers must not.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.processes import Process
from tests.support.ramp_runs import RampRun, check_law, run_ramp, wait_for_records
from tests.support.targets import SharedTarget

pytestmark = pytest.mark.slow

SLOW_ITL_MS = 150.0
# 10 then 20 QPS; the sizer starts from a 50 ms prior, so it pre-warms a handful of users.
ARGS = ["--ramplab-shape", "10,20@4s/1s", "--ramplab-duration-prior", "0.05"]


def slow_down(shared: SharedTarget) -> Any:
    def during(_: list[Process], out: Path) -> None:
        wait_for_records(out, lambda records: len(records) >= 3)
        shared.configure({"latency": {"itl_ms": SLOW_ITL_MS}})

    return during


def spans(run: RampRun) -> list[tuple[float, float]]:
    """Each request's send → end, epoch seconds."""
    return [
        (float(r["actual_start"]), float(r["intended_start"]) + float(r["total_ms"]) / 1000.0)
        for r in run.records
    ]


def peak_in_flight(run: RampRun) -> int:
    events = sorted([(s, 1) for s, _ in spans(run)] + [(e, -1) for _, e in spans(run)])
    return int(np.max(np.cumsum([d for _, d in events])))


def test_ttlt_jump_drops_nothing_under_a_generous_cap(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    target = shared_target.reset()
    run = run_ramp(
        tmp_path,
        target.url,
        [*ARGS, "--ramplab-max-users", "200", "--csv", str(tmp_path / "locust")],
        workers=1,
        during=slow_down(shared_target),
    )
    assert run.returncode == 0, run.tail()
    summary = check_law(run)
    for step in summary["steps"]:
        assert step["dropped"] == 0, step
        assert step["scheduled"] == step["dispatched"] == step["requests"], step
    slow = [r for r in run.records if r["ttlt_ms"] is not None and r["ttlt_ms"] > 1000]
    assert len(slow) > 20  # the jump happened, and held through the second step
    # 20 QPS × ~1.2 s: some 24 streams in flight, where the sizer had pre-warmed a handful.
    needed = peak_in_flight(run)
    assert needed > 15, needed
    # Locust counted the users started on demand: the master's user count (the workers'
    # reports, in its stats history) reached the streams in flight.
    with (tmp_path / "locust_stats_history.csv").open() as handle:
        counts = [int(row["User Count"]) for row in csv.DictReader(handle)]
    assert max(counts) >= needed, (max(counts), needed)
    # The summary's users: the second step ran at least the streams it had in flight, far
    # below the cap.
    last = summary["steps"][-1]
    assert needed <= last["peak_users"] < last["max_users"] == 200, last


def test_ttlt_jump_with_a_small_cap_drops_what_exceeds_it(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    target = shared_target.reset()
    cap = 8
    run = run_ramp(
        tmp_path,
        target.url,
        [*ARGS, "--ramplab-max-users", str(cap)],
        during=slow_down(shared_target),
    )
    assert run.returncode == 0, run.tail()
    summary = check_law(run)
    assert sum(step["dropped"] for step in summary["steps"]) > 20
    for step in summary["steps"]:
        assert step["lost"] == 0
        assert step["scheduled"] == step["dispatched"] + step["dropped"], step
        if step["dropped"]:  # the summary says why: the worker ran every user of the cap
            (worker,) = step["by_worker"].values()
            assert worker["peak_users"] == worker["max_users"] == step["max_users"] == cap
    # Never more than the cap in flight, and an arrival was dropped only when the cap was: at
    # each dropped arrival's due time all `cap` users were busy (50 ms either side for a
    # user's own bookkeeping around its request on a loaded machine).
    assert peak_in_flight(run) <= cap
    sent = {r["arrival"] for r in run.records}
    start = float(summary["run_start"])
    busy = spans(run)
    dropped = [start + float(o) for i, o in enumerate(run.offsets()) if i not in sent]
    assert len(dropped) >= sum(step["dropped"] for step in summary["steps"])  # + warm-ups
    for due in dropped:
        in_flight = sum(1 for s, e in busy if s <= due + 0.05 and e >= due - 0.05)
        assert in_flight >= cap, (due - start, in_flight)
