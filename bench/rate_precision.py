"""Rate precision of the open-loop engine against Locust's ``constant_throughput``, 1 → 300 QPS.

Four real runs against one real target (tiny streams: 2 tokens in one event, no prefill, no
ITL, signing off, so the target is not the limit), each a Locust master with one or two worker
processes over the same stepped shape:

- **engine**: ``locustfiles/llm_ramp.py`` with constant arrivals (so the schedule holds exactly
  rate × window arrivals and achieved/target measures the engine, not Poisson noise);
- **baseline**: ``bench/throughput_user.py``, Locust's ``constant_throughput`` with users = rate ÷
  per-user rate (1 request/s per user).

Per step and run: achieved/target = requests *sent* (first attempt) inside the step's measured
window ÷ (rate × window), the same definition for both; arrival-time error = actual send −
intended send, the engine's ``lateness_ms`` (intended = the schedule), and for the baseline each
user's send − (its first send in the window + k / per-user rate), i.e. how far Locust's relative
pacing drifts from the period it was asked for. Generator CPU is the locust processes' user +
system time over the window (``/proc``), in cores; above ~0.9 core a process is saturated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.servers import REPO, target
from ramplab.load.shapes import Shape, parse_shape
from ramplab.records.files import RecordFiles
from ramplab.records.schema import dicts_of
from target_service.embedded_redis import free_port

RATES = (1, 3, 10, 30, 100, 300)
HOLD, WARMUP = "5s", "1s"
SHAPE_TEXT = f"{','.join(str(r) for r in RATES)}@{HOLD}/{WARMUP}"
PER_USER_QPS = 1.0
BASELINE_LEAD_S = 12.0  # processes start, import and connect before the shared start time
STREAM = ["--max-tokens", "2", "--ignore-eos", "--chunk-size", "2"]
TARGET_ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "0",
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": "0",
    "APP_SIGNING__MODE": "off",
    "APP_SCHEDULER__MAX_NUM_SEQS": "256",
    "APP_LOG_LEVEL": "warning",
}
TICKS = os.sysconf("SC_CLK_TCK")


class CpuSampler(threading.Thread):
    """Samples the summed user + system CPU seconds of some processes every 0.25 s."""

    def __init__(self, pids: Sequence[int]) -> None:
        super().__init__(daemon=True)
        self.pids = list(pids)
        self.samples: list[tuple[float, float]] = []
        self._done = threading.Event()

    def cpu_s(self) -> float:
        total = 0
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / TICKS

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.time(), self.cpu_s()))
            self._done.wait(0.25)

    def stop(self) -> None:
        self._done.set()
        self.join()

    def cores(self, start: float, end: float) -> float | None:
        """Mean cores used over [start, end], from the nearest samples inside it."""
        inside = [(t, c) for t, c in self.samples if start <= t <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


@dataclass
class RunResult:
    name: str
    workers: int
    run_start: float
    records: list[dict[str, Any]]
    cpu: CpuSampler
    target_cpu: CpuSampler
    returncode: int
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average at the start and the end
    steps: list[dict[str, Any]] = field(default_factory=list)


def _locust(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "locust", *args],
            cwd=REPO,
            env={**os.environ, **env},
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        handle.close()


def _run(name: str, workers: int, host: str, tmp: Path, target_pid: int) -> RunResult:
    out = tmp / name
    port = free_port()
    env: dict[str, str] = {}
    if name.startswith("engine"):
        locustfile = "locustfiles/llm_ramp.py"
        extra = ["--ramplab-shape", SHAPE_TEXT, "--ramplab-arrivals", "constant"]
    else:
        locustfile = "bench/throughput_user.py"
        extra = []
        env = {
            "BENCH_SHAPE": SHAPE_TEXT,
            "BENCH_START": repr(time.time() + BASELINE_LEAD_S),
            "BENCH_USER_QPS": str(PER_USER_QPS),
        }
    common = ["-f", locustfile, *STREAM, *extra]
    master = _locust(
        [
            *common,
            "--host",
            host,
            "--headless",
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--expect-workers",
            str(workers),
            "--results-dir",
            str(out),
        ],
        env,
        tmp / f"{name}-master.log",
    )
    procs = [
        _locust(
            [*common, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            env,
            tmp / f"{name}-worker{i}.log",
        )
        for i in range(workers)
    ]
    load_before = os.getloadavg()[0]
    sampler = CpuSampler([master.pid, *(p.pid for p in procs)])
    target_sampler = CpuSampler([target_pid])
    sampler.start()
    target_sampler.start()
    try:
        master.wait(180)
        for proc in procs:
            proc.wait(30)
    finally:
        sampler.stop()
        target_sampler.stop()
        for proc in [master, *procs]:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    records = [row for batch in RecordFiles.in_dir(out).batches() for row in dicts_of(batch)]
    if name.startswith("engine"):
        run_start = float(json.loads((out / "summary.json").read_text())["run_start"])
    else:
        run_start = float(env["BENCH_START"])
    load = (load_before, os.getloadavg()[0])
    return RunResult(
        name, workers, run_start, records, sampler, target_sampler, master.returncode, load
    )


def _percentiles(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    p50, p99 = np.percentile(np.asarray(values, dtype=np.float64), [50, 99])
    return float(p50), float(p99)


def _baseline_errors(records: list[dict[str, Any]], start: float, end: float) -> list[float]:
    """Each user's sends in [start, end) against its first one there + k / per-user rate (ms)."""
    by_user: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if start <= r["actual_start"] < end:
            by_user[(r["worker"], r["request_id"].split("-")[0])].append(r["actual_start"])
    errors: list[float] = []
    for sends in by_user.values():
        sends.sort()
        errors.extend(
            (s - (sends[0] + k / PER_USER_QPS)) * 1000.0 for k, s in enumerate(sends[1:], 1)
        )
    return errors


def analyse(run: RunResult, shape: Shape) -> None:
    for stage in shape.stages:
        start = run.run_start + stage.measured_start_s
        end = run.run_start + stage.end_s
        sent = [r for r in run.records if r["attempts"] > 0 and start <= r["actual_start"] < end]
        if run.name.startswith("engine"):
            errors = [r["lateness_ms"] for r in run.records
                      if start <= r["intended_start"] < end and r["attempts"] > 0]  # fmt: skip
        else:
            errors = _baseline_errors(run.records, start, end)
        p50, p99 = _percentiles(errors)
        run.steps.append(
            {
                "rate": stage.rate,
                "ratio": len(sent) / (stage.rate * stage.measured_s),
                "failed": sum(1 for r in sent if not r["ok"]),
                "err_p50": p50,
                "err_p99": p99,
                "cpu": run.cpu.cores(start, end),
                "sent": len(sent),
                "window": stage.measured_s,
                "target_cpu": run.target_cpu.cores(start, end),
            }
        )


def _per_request(cell: dict[str, Any]) -> str:
    """Generator CPU milliseconds per request sent in the window."""
    if cell["cpu"] is None or not cell["sent"]:
        return "—"
    return f"{cell['cpu'] * cell['window'] * 1000.0 / cell['sent']:.1f} ms/req"


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def report(runs: list[RunResult]) -> str:
    names = [f"{r.name} ({r.workers} worker{'s' if r.workers > 1 else ''})" for r in runs]
    head = "| target QPS | " + " | ".join(names) + " |\n|---:|" + "---:|" * len(runs) + "\n"
    ratio_rows, error_rows, cpu_rows = [], [], []
    for i, rate in enumerate(RATES):
        cells = [runs[k].steps[i] for k in range(len(runs))]
        ratio_rows.append(f"| {rate} | " + " | ".join(f"{c['ratio']:.3f}" for c in cells) + " |")
        error_rows.append(
            f"| {rate} | "
            + " | ".join(
                f"{_fmt(c['err_p50'], '.1f')} / {_fmt(c['err_p99'], '.1f')}" for c in cells
            )
            + " |"
        )
        cpu_rows.append(
            f"| {rate} | "
            + " | ".join(
                f"{_fmt(c['cpu'], '.2f')} / {_fmt(c['target_cpu'], '.2f')} ({_per_request(c)})"
                for c in cells
            )
            + " |"
        )
    loads = ", ".join(f"{r.name} × {r.workers}: {r.load[0]:.1f} → {r.load[1]:.1f}" for r in runs)
    failed = ", ".join(
        f"{r.name} × {r.workers}: {sum(c['failed'] for c in r.steps)} (exit {r.returncode})"
        for r in runs
    )
    top = {r.name + str(r.workers): r.steps[-1]["ratio"] for r in runs}
    engine2, base2 = top.get("engine2"), top.get("baseline2")
    versus = (
        f"At {RATES[-1]} QPS with two workers: engine {engine2:.3f} × target, "
        f"`constant_throughput` {base2:.3f} × target."
        if engine2 is not None and base2 is not None
        else ""
    )
    return f"""## Rate precision: open-loop engine vs Locust `constant_throughput`

Shape `{SHAPE_TEXT}` (each rate held {HOLD}, the first {WARMUP} excluded), streams of 2 tokens in
one event against one target process with prefill, ITL and signing off; the engine with
`--ramplab-arrivals constant`, the baseline with {PER_USER_QPS:g} request/s per user and users =
rate ÷ {PER_USER_QPS:g}. Every run is a Locust master with one or two worker processes, all on
this 2-core machine, shared with other engineers' test runs: read ratios and medians, not
absolute times. Failed requests in the measured windows (and the master's exit code; Locust
exits 1 when any request failed): {failed}.

### Achieved ÷ target rate (requests sent in the measured window)

{head}{chr(10).join(ratio_rows)}

{versus}

### Arrival-time error, p50 / p99 ms (actual send − intended)

Engine: the schedule's intended time. Baseline: each user's first send in the window + k × its
period, so its error is the drift that relative pacing accumulates.

{head}{chr(10).join(error_rows)}

### CPU, generator / target (cores over each measured window; generator ms per request)

Generator: all locust processes of the run; target: its one process. On 2 cores with a load
average of L, a busy process gets about 2 / L of a core, so one worker process cannot carry more
than 2 / L ÷ (ms per request) requests per second; the load average (1 min) at the start → end of
each run was: {loads}.

{head}{chr(10).join(cpu_rows)}
"""


def run() -> str:
    shape = parse_shape(SHAPE_TEXT)
    results: list[RunResult] = []
    with target(TARGET_ENV) as port, tempfile.TemporaryDirectory() as tmp:
        host = f"http://127.0.0.1:{port}"
        target_pid = int(httpx.get(host + "/healthz").json()["pid"])
        for name, workers in (("engine", 1), ("baseline", 1), ("engine", 2), ("baseline", 2)):
            print(f"bench: rate_precision {name} × {workers} worker(s)", flush=True)
            result = _run_named(name, workers, host, Path(tmp), target_pid)
            if not result.records:
                raise RuntimeError(f"{name} with {workers} worker(s) recorded no request")
            analyse(result, shape)
            results.append(result)
    return report(results)


def _run_named(kind: str, workers: int, host: str, tmp: Path, target_pid: int) -> RunResult:
    result = _run(f"{kind}{workers}", workers, host, tmp, target_pid)
    result.name = kind
    return result
