"""Start the servers a benchmark compares, as separate processes on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from target_service.embedded_redis import free_port

REPO = Path(__file__).resolve().parents[1]
# The target with its latency model at zero and no signature: what is measured is the serving
# path itself (the default signing mode, `locked`, adds one RSA signature per stream).
UNPACED = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "0",
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": "0",
    "APP_SCHEDULER__MAX_NUM_SEQS": "256",
    "APP_SIGNING__MODE": "off",
    "APP_LOG_LEVEL": "warning",
}


def _wait(url: str, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise TimeoutError(url)


@contextmanager
def server(command: list[str], health_url: str, env: Mapping[str, str]) -> Iterator[None]:
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait(health_url, process)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


@contextmanager
def target(env: Mapping[str, str], workers: int = 1) -> Iterator[int]:
    port = free_port()
    command = [sys.executable, "-m", "target_service", "--port", str(port)]
    command += ["--workers", str(workers)]
    full_env = {"APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"), **env}
    with server(command, f"http://127.0.0.1:{port}/healthz", full_env):
        yield port


@contextmanager
def bare_sse() -> Iterator[int]:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "bench.bare_sse:app", "--port", str(port)]
    command += ["--loop", "uvloop", "--http", "httptools", "--no-access-log"]
    command += ["--log-level", "warning"]
    with server(command, f"http://127.0.0.1:{port}/", {}):
        yield port
