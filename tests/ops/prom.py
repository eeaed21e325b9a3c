"""A real Prometheus server on 127.0.0.1 with an empty TSDB in a temporary directory."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from types import TracebackType

import httpx

from target_service.embedded_redis import free_port
from tests.support.processes import Process

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


class PrometheusProcess:
    """``prometheus --config.file=CONFIG`` on a free loopback port, stopped on exit."""

    def __init__(self, config: Path, log_path: Path | None = None) -> None:
        assert PROMETHEUS is not None, "the prometheus binary is missing"
        self.config = config
        self.log_path = log_path
        self.port = 0
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._process: Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> PrometheusProcess:
        assert PROMETHEUS is not None
        self._dir = tempfile.TemporaryDirectory(prefix="ramplab-prom-")
        self.port = free_port()
        self._process = Process(
            [PROMETHEUS, f"--config.file={self.config}",
             f"--storage.tsdb.path={self._dir.name}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            self.log_path, ready_url=self.url + "/-/ready",
        )  # fmt: skip
        try:
            self._process.start(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def query(self, expr: str) -> httpx.Response:
        """``GET /api/v1/query`` for ``expr`` (instant query, now)."""
        return httpx.get(self.url + "/api/v1/query", params={"query": expr}, timeout=10.0)

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> PrometheusProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
