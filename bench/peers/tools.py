"""Running each tool at one rate against the tapped target, and the CPU sampler of a process
tree that measures what each spent."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import psutil

from bench.peer_env import AIPERF, GUIDELLM_CLIENT, ensure
from bench.peers.streams import Run, Stream, aiperf_streams, guidellm_streams, ramplab_streams
from bench.peers.workload import HOLD_S, MODEL, TARGET_ENV, TOKENS, WARM_S
from bench.servers import REPO, server
from target_service.embedded_redis import free_port


class TreeCpu(threading.Thread):
    """User + system CPU seconds of a process and all its descendants, every 0.25 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float]] = []
        self._seen: dict[int, float] = {}  # last CPU seen per pid: exited children keep theirs
        self._done = threading.Event()

    @property
    def processes(self) -> int:
        """How many processes the tree held at any sample."""
        return len(self._seen)

    def _cpu(self) -> float:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            self._seen[proc.pid] = times.user + times.system
        return sum(self._seen.values())

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.time(), self._cpu()))
            self._done.wait(0.25)

    def stop(self) -> None:
        self._done.set()
        self.join()

    def cpu_s(self, start: float, end: float) -> float:
        inside = [(t, c) for t, c in self.samples if start <= t <= end]
        if len(inside) < 2:
            return float("nan")
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) * (end - start) / (t1 - t0)


def _window(streams: Iterable[Stream], begin: float, end: float) -> list[Stream]:
    return [s for s in streams if begin <= s.start < end]


def run_ramplab(
    port: int,
    rate: float,
    workdir: Path,
    tokens: int = TOKENS,
    warm_s: float = WARM_S,
    hold_s: float = HOLD_S,
) -> Run:
    """One ``locust`` process at ``rate``; ``rss_mib`` is its peak resident memory."""
    out = workdir / f"ramplab-{rate:g}"
    shape = f"{rate:g}@{warm_s + hold_s:g}s/{warm_s:g}s"
    command = [sys.executable, "-m", "locust", "-f", "locustfiles/llm_ramp.py"]
    command += ["--host", f"http://127.0.0.1:{port}", "--headless", "--only-summary"]
    command += ["--loglevel", "ERROR", "--ramplab-shape", shape, "--ramplab-arrivals", "constant"]
    command += ["--model", MODEL, "--max-tokens", str(tokens), "--ignore-eos", "--chunk-size", "1"]
    command += ["--prompt-tokens", "4", "--extra-body", '{"timing_detail": true}']
    command += ["--results-dir", str(out)]
    log = (workdir / f"ramplab-{rate:g}.log").open("wb")
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    sampler = TreeCpu(process.pid)
    sampler.start()
    rss: list[tuple[float, float]] = []  # (epoch, MiB)
    try:
        while process.poll() is None:
            with contextlib.suppress(psutil.Error):
                rss.append((time.time(), psutil.Process(process.pid).memory_info().rss / 2**20))
            time.sleep(0.25)
    finally:
        sampler.stop()
        log.close()
    streams, errors = ramplab_streams(out)
    first = min(s.start for s in streams)
    begin, end = first + warm_s, first + warm_s + hold_s
    inside = _window(streams, begin, end)
    peak = max(mib for _, mib in rss)
    steady = float(np.median([mib for at, mib in rss if begin <= at <= end]))
    cpu_s = sampler.cpu_s(begin, end)
    return Run(
        "ramplab", rate, inside, (begin, end), cpu_s, errors, peak, sampler.processes,
        rss_window_mib=steady,
    )  # fmt: skip


def _run_sampled(
    command: list[str], log_path: Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> TreeCpu:
    """Run a peer's ``command`` to its end (5 minutes at most), its output in ``log_path``, with
    the CPU of its process tree sampled throughout."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        sampler = TreeCpu(process.pid)
        sampler.start()
        try:
            process.wait(timeout=300)
        finally:
            sampler.stop()
    return sampler


def run_aiperf(port: int, rate: float, workdir: Path, tokenizer: Path) -> Run:
    script = ensure(AIPERF, workdir / "aiperf-install.log")
    out = workdir / f"aiperf-{rate:g}"
    command = [str(script), "profile", "--model", MODEL, "--url", f"http://127.0.0.1:{port}"]
    command += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(tokenizer)]
    command += ["--use-server-token-count", "--request-rate", f"{rate:g}"]
    command += ["--arrival-pattern", "constant", "--benchmark-duration", f"{HOLD_S:g}"]
    command += ["--warmup-duration", f"{WARM_S:g}", "--warmup-request-rate", f"{rate:g}"]
    command += ["--isl", "4", "--isl-stddev", "0", "--osl", str(TOKENS), "--osl-stddev", "0"]
    command += ["--extra-inputs", "timing_detail:true", "--extra-inputs", "ignore_eos:true"]
    command += ["--export-http-trace", "--export-level", "raw", "--ui", "none"]
    command += ["--artifact-dir", str(out)]
    # Not HF_HUB_OFFLINE: with it set, AIPerf takes the tokenizer's directory for a hub name.
    sampler = _run_sampled(command, workdir / f"aiperf-{rate:g}.log")
    streams, errors = aiperf_streams(out / "profile_export_raw.jsonl")
    begin = min(s.start for s in streams)
    end = begin + HOLD_S
    inside = _window(streams, begin, end)
    cpu_s = sampler.cpu_s(begin, end)
    return Run("aiperf", rate, inside, (begin, end), cpu_s, errors, processes=sampler.processes)


@contextlib.contextmanager
def tapped_target(tap: Path) -> Iterator[tuple[int, int]]:
    """The target of ``TARGET_ENV`` under ``bench/timing_tap.py``, writing to ``tap``: its port
    and its process id."""
    port = free_port()
    command = [sys.executable, "-m", "bench.timing_tap", str(tap), "--port", str(port)]
    env = {"APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"), **TARGET_ENV}
    with server(command, f"http://127.0.0.1:{port}/healthz", env):
        [pid] = [
            child.pid
            for child in psutil.Process().children()
            if "bench.timing_tap" in child.cmdline()
        ]
        yield port, pid


def with_target_cpu(target_pid: int, make: Callable[[], Run]) -> Run:
    """``make()``'s run, with the target's CPU (cores) over the run's measured window."""
    sampler = TreeCpu(target_pid)
    sampler.start()
    try:
        result = make()
    finally:
        sampler.stop()
    begin, end = result.window
    result.target_cores = sampler.cpu_s(begin, end) / (end - begin)
    return result


def run_guidellm(port: int, rate: float, workdir: Path, tokenizer: Path, tap: Path) -> Run:
    script = ensure(GUIDELLM_CLIENT, workdir / "guidellm-install.log")
    report = workdir / f"guidellm-{rate:g}.json"
    backend = {
        "kind": "openai_http",
        "target": f"http://127.0.0.1:{port}",
        "model": MODEL,
        "api_routes": {"/health": "healthz"},  # its start-up check; ours is /healthz
        "extras": {"body": {"timing_detail": True}},
    }
    data = {"kind": "synthetic_text", "prompt_tokens": 4, "output_tokens": TOKENS}
    command = [str(script), "run", "--backend", json.dumps(backend)]
    command += ["--profile", json.dumps({"kind": "constant", "rate": [rate]})]
    # One second past the window: the streams still open when it stops are "incomplete".
    duration = {"kind": "max_duration", "seconds": WARM_S + HOLD_S + 1.0}
    command += ["--constraint", json.dumps(duration), "--data", json.dumps(data)]
    command += ["--tokenizer", json.dumps({"kind": "huggingface_auto", "model": str(tokenizer)})]
    command += ["--output", json.dumps({"kind": "json", "path": str(report)})]
    command += ["--disable-console"]
    # Offline: the tokenizer is a local directory and the data synthetic; these make any attempt
    # to reach the Hugging Face hub fail instead of downloading.
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    sampler = _run_sampled(
        command, workdir / f"guidellm-{rate:g}.log", cwd=workdir, env={**os.environ, **offline}
    )
    streams, errors = guidellm_streams(report, tap)
    first = min(s.start for s in streams)
    begin, end = first + WARM_S, first + WARM_S + HOLD_S
    inside = _window(streams, begin, end)
    cpu_s = sampler.cpu_s(begin, end)
    return Run("guidellm", rate, inside, (begin, end), cpu_s, errors, processes=sampler.processes)


def byte_tokenizer(workdir: Path) -> Path:
    """The offline byte-level tokenizer (``bench/byte_tokenizer.py``), written into ``workdir``
    by AIPerf's venv."""
    directory = workdir / "byte-tokenizer"
    python = ensure(AIPERF).parent / "python"
    script = REPO / "bench" / "byte_tokenizer.py"
    subprocess.run([str(python), str(script), str(directory)], check=True, capture_output=True)
    return directory
