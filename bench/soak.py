"""Soak: 30 minutes at 50 QPS against the reference target; does any process's memory grow?

One real target process (default settings, its embedded Redis) and one Locust master with one
worker (``locustfiles/llm_ramp.py``, constant arrivals, 32-token streams) run one stage of
``SOAK_S`` after a ``WARMUP_S`` warm-up. A sampler reads each process's resident set size
(``VmRSS`` in ``/proc/PID/status``) every ``SAMPLE_EVERY_S``. Growth = median RSS of the last
``WINDOW_S`` of the stage ÷ median RSS of the first ``WINDOW_S`` after the warm-up − 1: medians
over minutes, so one garbage-collection peak does not decide it. Goal: < 5 % for the target and
the worker, 0 failed requests (``summary.json``).

``SOAK_S`` (``BENCH_SOAK_S``) can be shortened to try the benchmark out; the recorded figure is
from the full 30 minutes.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from target_service.embedded_redis import free_port

REPO = Path(__file__).resolve().parents[1]
QPS = 50
SOAK_S = float(os.environ.get("BENCH_SOAK_S", "1800"))
WARMUP_S = min(60.0, SOAK_S / 4)
WINDOW_S = min(300.0, SOAK_S / 4)
SAMPLE_EVERY_S = 5.0
GOAL_GROWTH = 0.05
STREAM = ["--max-tokens", "32", "--ignore-eos", "--prompt-tokens", "64"]
TARGET_ENV = {"APP_LOG_LEVEL": "warning", "APP_CONFIG_FILE": str(REPO / "configs" / "app.toml")}


def rss_bytes(pid: int) -> int | None:
    """The process's resident set size, or ``None`` once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


class RssSampler(threading.Thread):
    """RSS of named processes every ``SAMPLE_EVERY_S``: ``{name: [(epoch s, bytes), ...]}``."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.samples: dict[str, list[tuple[float, int]]] = {name: [] for name in pids}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            now = time.time()
            for name, pid in self.pids.items():
                value = rss_bytes(pid)
                if value is not None:
                    self.samples[name].append((now, value))
            self.done.wait(SAMPLE_EVERY_S)

    def stop(self) -> None:
        self.done.set()
        self.join()

    def median(self, name: str, start: float, end: float) -> float | None:
        inside = [v for t, v in self.samples[name] if start <= t < end]
        return float(statistics.median(inside)) if inside else None


def growth(first: float | None, last: float | None) -> float | None:
    """Relative growth from ``first`` to ``last``; ``None`` without both."""
    if first is None or last is None or first <= 0:
        return None
    return last / first - 1.0


def _popen(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:
        return subprocess.Popen(
            command,
            cwd=REPO,
            env={**os.environ, **env},
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"target exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(url)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _mib(value: float | None) -> str:
    return "—" if value is None else f"{value / 2**20:.1f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.2f} %"


def run() -> str:
    # Thirty minutes on a machine shared with other engineers' tests: every process of the soak
    # (they inherit it) yields the CPU to them; the soak asks for memory and errors, not speed.
    os.nice(10)
    tmp = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    port, master_port = free_port(), free_port()
    host = f"http://127.0.0.1:{port}"
    target = _popen(
        [sys.executable, "-m", "target_service", "--port", str(port)], TARGET_ENV, tmp / "t.log"
    )
    try:
        _wait_ready(host + "/readyz", target)
        shape = f"{QPS}@{int(SOAK_S + WARMUP_S)}s/{int(WARMUP_S)}s"
        common = ["-f", "locustfiles/llm_ramp.py", *STREAM, "--ramplab-shape", shape]
        common += ["--ramplab-arrivals", "constant"]
        master = _popen(
            [
                *(sys.executable, "-m", "locust", *common, "--host", host, "--headless"),
                *("--master", "--master-bind-host", "127.0.0.1"),
                *("--master-bind-port", str(master_port), "--expect-workers", "1"),
                *("--results-dir", str(tmp / "run")),
            ],
            {},
            tmp / "master.log",
        )
        worker = _popen(
            [
                *(sys.executable, "-m", "locust", *common, "--worker"),
                *("--master-host", "127.0.0.1", "--master-port", str(master_port)),
            ],
            {},
            tmp / "worker.log",
        )
        sampler = RssSampler({"target": target.pid, "worker": worker.pid, "master": master.pid})
        load_before = os.getloadavg()
        try:
            sampler.start()
            master.wait(SOAK_S + WARMUP_S + 300)
            worker.wait(60)
        finally:
            sampler.stop()
            _stop(master)
            _stop(worker)
        load_after = os.getloadavg()
    finally:
        _stop(target)
    summary = json.loads((tmp / "run" / "summary.json").read_text())
    return report(summary, sampler, master.returncode, (load_before[2], load_after[2]), tmp)


def report(
    summary: dict[str, Any],
    sampler: RssSampler,
    returncode: int | None,
    load: tuple[float, float],
    tmp: Path,
) -> str:
    run_start = float(summary["run_start"])
    measured = run_start + WARMUP_S
    end = measured + SOAK_S
    first = (measured, measured + WINDOW_S)
    last = (end - WINDOW_S, end)
    rows = []
    verdicts = []
    for name in sampler.pids:
        a, b = sampler.median(name, *first), sampler.median(name, *last)
        g = growth(a, b)
        peak = max((v for _, v in sampler.samples[name]), default=None)
        rows.append(f"| {name} | {_mib(a)} | {_mib(b)} | {_pct(g)} | {_mib(peak)} |")
        if name != "master":
            verdicts.append(g is not None and g < GOAL_GROWTH)
    requests = summary["requests"]
    ok = summary["ok"]
    failed = int(requests) - int(ok)
    met = all(verdicts) and failed == 0
    minutes = SOAK_S / 60
    return (
        f"## Soak: {minutes:g} minutes at {QPS} QPS\n\n"
        f"One target process (default settings: latency model, locked RSA signing, embedded "
        f"Redis) and one Locust master + one worker (`locustfiles/llm_ramp.py`, constant "
        f"arrivals, 32-token streams, 64-token prompts), one stage of {minutes:g} min after a "
        f"{WARMUP_S:g} s warm-up. RSS (`VmRSS`) sampled every {SAMPLE_EVERY_S:g} s; growth = "
        f"median of the last {WINDOW_S / 60:g} min ÷ median of the first {WINDOW_S / 60:g} min "
        f"after the warm-up − 1. Processes ran under `nice`; 15-minute load average "
        f"{load[0]:.1f} → {load[1]:.1f} (a shared 2-core machine).\n\n"
        "| process | RSS first window MiB | RSS last window MiB | growth | peak MiB |\n"
        "|---|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n"
        f"Requests in the measured window: {requests:,} (achieved "
        f"{float(summary['achieved_qps'] or 0):.2f} QPS), failed: {failed} (errors: "
        f"{json.dumps(summary['errors'])}); master exit code {returncode}.\n\n"
        f"Goal: target and worker growth < {GOAL_GROWTH:.0%}, 0 failed — "
        f"{'met' if met else 'NOT met'} in this run. Raw logs were in `{tmp}`.\n"
    )
