"""Real ``locust -f locustfiles/llm_ramp.py`` runs: one process, or a master and N workers."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ramplab.load.arrivals.schedule import Schedule, build_schedule, make_process
from ramplab.load.shapes import parse_shape
from target_service.embedded_redis import free_port
from tests.support.processes import Process, python, stop_all
from tests.support.records import run_records

LOCUST = python("-m", "locust", "-f", "locustfiles/llm_ramp.py")
# Tiny streams so that the target is never the limit on a shared 2-core machine.
STREAM = ["--max-tokens", "8", "--ignore-eos", "--chunk-size", "2"]
TARGET_ENV = {
    "APP_LATENCY__ITL_MS": "10",
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "5",
}


@dataclass
class RampRun:
    """The outcome of one run: exit code, records, summary and the processes' logs."""

    out: Path
    returncode: int
    logs: dict[str, str] = field(default_factory=dict)

    @property
    def records(self) -> list[dict[str, Any]]:
        return run_records(self.out)

    @property
    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.out / "summary.json").read_text())
        return data

    def schedule(self) -> Schedule:
        """The run's global schedule, rebuilt from what the summary says it was."""
        s = self.summary
        return build_schedule(parse_shape(s["shape"]), make_process(s["arrivals"]), s["seed"])

    def offsets(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return self.schedule().offsets

    def tail(self) -> str:
        return "\n".join(f"--- {name}\n{text[-3000:]}" for name, text in self.logs.items())


def run_ramp(
    tmp: Path,
    host: str,
    args: Sequence[str],
    *,
    workers: int = 0,
    timeout_s: float = 55.0,
    during: Callable[[list[Process], Path], None] | None = None,
    with_master: Callable[[Process, Path], None] | None = None,
) -> RampRun:
    """Run a ramp headless; ``workers=0`` is a single local process, else master + N workers.

    ``during(workers, out)`` runs while the processes run (e.g. to kill one), then
    ``with_master(master, out)`` (e.g. to interrupt it); the master must
    end by itself within ``timeout_s``, everything left is stopped afterwards.
    """
    out = tmp / "run"
    common = [*STREAM, *args]  # later flags win: a test may override the stream
    if workers == 0:
        master = Process([*LOCUST, "--host", host, "--headless", "--results-dir", str(out),
                          *common], tmp / "master.log")  # fmt: skip
    else:
        port = free_port()
        master = Process([*LOCUST, "--host", host, "--headless", "--master",
                          "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                          "--expect-workers", str(workers), "--results-dir", str(out),
                          *common], tmp / "master.log")  # fmt: skip
    procs = {"master": master}
    for i in range(workers):
        worker = [*LOCUST, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
        procs[f"worker{i}"] = Process([*worker, *common], tmp / f"worker{i}.log")
    try:
        for proc in procs.values():
            proc.start()
        if during is not None:
            during([p for name, p in procs.items() if name != "master"], out)
        if with_master is not None:
            with_master(master, out)
        try:
            master.wait(timeout_s)
        except TimeoutError:
            raise AssertionError(f"the master did not finish within {timeout_s} s") from None
        for proc in procs.values():
            with contextlib.suppress(TimeoutError):  # whatever is left is stopped below
                proc.wait(15)
    finally:
        stop_all(procs.values(), grace_s=5)
    code = master.returncode
    assert code is not None
    return RampRun(out, code, {name: proc.log() for name, proc in procs.items()})


def wait_for_records(out: Path, predicate: Callable[[list[dict[str, Any]]], bool],
                     timeout_s: float = 30.0) -> list[dict[str, Any]]:  # fmt: skip
    """Poll the run's records until ``predicate(records)`` holds (whole batches only)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        records = run_records(out)
        if records and predicate(records):
            return records
        time.sleep(0.1)
    raise AssertionError(f"records never satisfied the condition within {timeout_s} s")


def poisson_bound(expected: float, sigmas: float = 4.0) -> float:
    """A two-sided band for a Poisson count: ``sigmas`` standard deviations, at least 2."""
    return max(2.0, sigmas * float(np.sqrt(expected)))


def check_law(run: RampRun, incomplete: Sequence[str] = ()) -> dict[str, Any]:
    """The summary, after checking the conservation law in it, step by step
    (``docs/summary.md``); the run is complete unless it says why not (``incomplete``: a word
    of each reason, in order)."""
    summary = run.summary
    for step in summary["steps"]:
        assert step["dispatched"] == step["completed"] + step["failed"] + step["unfinished"], step
        assert step["requests"] == step["dispatched"], step
        assert step["unaccounted"] == 0, step
        if step["scheduled"] is not None:
            assert step["scheduled"] == step["dispatched"] + step["dropped"] + step["lost"], step
    reasons = summary["incomplete"]
    assert len(reasons) == len(incomplete), (reasons, summary.get("stopped_at_s"), run.tail())
    for reason, word in zip(reasons, incomplete, strict=True):
        assert word in reason, reasons
    kinds = [r["error_kind"] for r in run.records]
    assert summary["unfinished"] == kinds.count("unfinished")
    return summary
