"""Start real processes (the target, anything with a health URL) and wait for them properly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from target_service.embedded_redis import free_port

REPO = Path(__file__).resolve().parents[2]


def stop_groups(processes: Sequence[subprocess.Popen[Any]], grace_s: float = 15.0) -> None:
    """SIGTERM the process group of each live process, then SIGKILL any group still up after
    ``grace_s``. Each process must lead its own group (``start_new_session=True``).

    All are signalled before any is waited for, so they shut down side by side.
    """
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_http_ok(
    url: str, timeout_s: float = 20.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 200 within {timeout_s} s (last: {last!r})")


class TargetProcess:
    """``python -m target_service`` as a subprocess; settings through ``APP_*`` variables."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        workers: int = 1,
        port: int | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.workers = workers
        self.env = {
            **os.environ,
            "APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"),
            **(env or {}),
        }
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._log = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> TargetProcess:
        out = subprocess.DEVNULL
        if self.log_path is not None:
            self._log = self.log_path.open("wb")
            out = self._log  # type: ignore[assignment]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "target_service", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(self.workers)],
            cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_http_ok(self.url + "/healthz", timeout_s, self.process)
        except BaseException:
            self.stop()  # __exit__ does not run when __enter__ raises: no orphaned target
            raise
        return self

    def stop(self) -> int | None:
        if self.process is None:
            return None
        stop_groups([self.process])
        if self._log is not None:
            self._log.close()
        code = self.process.returncode
        self.process = None
        return code

    def __enter__(self) -> TargetProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
