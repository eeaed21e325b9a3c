"""What the Prometheus exporter costs a Locust worker: exporter on vs off, same run.

One real ``locust --headless`` process (``llm_stream.py``, closed loop) streams from a real
target whose model is unpaced, so each request is mostly the client's own work (64 one-token
SSE events to parse, time and record). With the exporter on, ``/metrics`` is also scraped every
second, as a Prometheus with a 1 s interval would.

The figure of merit is requests per CPU-second of the Locust process, over a steady window
(``SETTLE_S`` after its first finished request, for ``WINDOW_S``): start-up and shutdown are
left out, and on a shared two-core machine the CPU each request costs the worker varies much
less than the wall-clock rate. Runs go off/on, on/off, off/on (ABBA), so a drift in the
machine's load does not favour one side. Goal: the exporter costs ≤ 5 % (ratio ≥ 0.95).
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from bench.servers import REPO, UNPACED, target
from ramplab.records.files import RecordFiles
from ramplab.records.journal import JournalTail
from target_service.embedded_redis import free_port

USERS = 16
TOKENS = 64
SETTLE_S = 3.0
WINDOW_S = 10.0
ORDER = ((False, True), (True, False), (False, True))  # ABBA: three runs each
SCRAPE_S = 1.0


@dataclass(frozen=True)
class Result:
    requests: int
    cpu_s: float
    wall_s: float

    @property
    def per_cpu_s(self) -> float:
        return self.requests / self.cpu_s

    @property
    def per_s(self) -> float:
        return self.requests / self.wall_s


class _Written:
    """Records in a run's journal so far, read incrementally (only what it gained)."""

    def __init__(self, journal: Path) -> None:
        self._tail = JournalTail(journal)
        self.count = 0

    def __call__(self) -> int:
        self.count += sum(batch.num_rows for batch in self._tail.poll())
        return self.count


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _scrape(port: int, stop: threading.Event) -> None:
    while not stop.wait(SCRAPE_S):
        with contextlib.suppress(httpx.HTTPError):  # not up yet, or already gone
            httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0)


def one_run(host: str, exporter: bool) -> Result:
    with tempfile.TemporaryDirectory(prefix="ramplab-bench-") as out:
        written = _Written(RecordFiles.in_dir(Path(out)).journal)
        command = [
            sys.executable, "-m", "locust", "-f", "locustfiles/llm_stream.py", "--host", host,
            "--headless", "--only-summary", "-u", str(USERS), "-r", str(USERS),
            "-t", f"{SETTLE_S + WINDOW_S + 30:.0f}s", "--max-tokens", str(TOKENS),
            "--ignore-eos", "--chunk-size", "1", "--results-dir", out, "--loglevel", "WARNING",
        ]  # fmt: skip
        port = free_port()
        if exporter:
            command += ["--metrics-port", str(port)]
        stop = threading.Event()
        scraper = threading.Thread(target=_scrape, args=(port, stop), daemon=True)
        process = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            if exporter:
                scraper.start()
            watched = psutil.Process(process.pid)
            deadline = time.monotonic() + 60
            while written() == 0:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"locust made no request: {command}")
                time.sleep(0.1)
            time.sleep(SETTLE_S)
            cpu0, done0, t0 = _cpu(watched), written(), time.monotonic()
            time.sleep(WINDOW_S)
            cpu1, done1, t1 = _cpu(watched), written(), time.monotonic()
        finally:
            stop.set()
            process.terminate()
            process.wait(30)
            if exporter:
                scraper.join()
    return Result(done1 - done0, cpu1 - cpu0, t1 - t0)


def run() -> str:
    results: dict[bool, list[Result]] = {False: [], True: []}
    with target(UNPACED) as port:
        host = f"http://127.0.0.1:{port}"
        one_run(host, exporter=False)  # warm-up: imports, page cache, the target's first calls
        for pair in ORDER:
            for exporter in pair:
                result = one_run(host, exporter)
                results[exporter].append(result)
                print(
                    f"exporter {'on ' if exporter else 'off'}: {result.requests} requests, "
                    f"{result.cpu_s:.2f} CPU-s, {result.per_cpu_s:.1f} req/CPU-s",
                    flush=True,
                )

    def median(exporter: bool, key: str) -> float:
        return statistics.median(getattr(r, key) for r in results[exporter])

    off_cpu, on_cpu = median(False, "per_cpu_s"), median(True, "per_cpu_s")
    off_wall, on_wall = median(False, "per_s"), median(True, "per_s")
    ratio = on_cpu / off_cpu
    verdict = "met" if ratio >= 0.95 else "NOT met"
    runs = "\n".join(
        f"| {'on' if exporter else 'off'} | {i + 1} | {r.requests:,} | {r.cpu_s:.2f} | "
        f"{r.per_cpu_s:.1f} | {r.per_s:.1f} |"
        for exporter in (False, True)
        for i, r in enumerate(results[exporter])
    )
    return "\n".join(
        [
            "## Exporter overhead on a Locust worker",
            "",
            f"One `locust --headless` process, {USERS} closed-loop users, {TOKENS}-token streams "
            "(one token per SSE event) from an unpaced target; exporter off and on "
            f"(`--metrics-port`, scraped every {SCRAPE_S:.0f} s), {len(ORDER)} runs each in ABBA "
            f"order after one warm-up run; each run measured over {WINDOW_S:.0f} s starting "
            f"{SETTLE_S:.0f} s after its first request. Throughput per CPU-second of the Locust "
            "process (user + system time) is the figure; the machine is shared with other "
            "engineers' tests, so wall-clock rates vary more.",
            "",
            "| exporter | median requests / CPU-s | median requests / s |",
            "|---|---:|---:|",
            f"| off | {off_cpu:.1f} | {off_wall:.1f} |",
            f"| on | {on_cpu:.1f} | {on_wall:.1f} |",
            f"| **on / off** | **{ratio:.3f}** | {on_wall / off_wall:.3f} |",
            "",
            f"Goal: on / off ≥ 0.95 (≤ 5 % cost) per CPU-second — {verdict} in this run.",
            "",
            "| exporter | run | requests | CPU-s | requests / CPU-s | requests / s |",
            "|---|---:|---:|---:|---:|---:|",
            runs,
            "",
        ]
    )


if __name__ == "__main__":
    print(run())
