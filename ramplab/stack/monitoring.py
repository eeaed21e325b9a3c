"""``Monitoring``: the local stack's Prometheus side — exporter ports and, by option, Prometheus.

``ramplab run --metrics`` gives each local worker its own ``/metrics`` port and the master its
run gauges, all labelled ``run=<run directory name>`` and ``scenario=<campaign name>``;
``--prometheus`` adds a real Prometheus (the system's ``prometheus`` binary) as an extra process
of the stack, scraping the target, the master and every worker with ``promconfig``'s generated
configuration and the shipped rules, its TSDB in the run directory.

Every port is chosen before the first process starts, so Prometheus can be up before the master
and see the ramp from its first arrival. Workers get ``--metrics-linger``: when the master exits
they keep serving until the stack stops them (SIGTERM ends the linger), so one last scrape after
the ramp — :meth:`Monitoring.settle` waits for it — stores every request of the run.
"""

from __future__ import annotations

import ipaddress
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from ramplab.errors import UsageError
from ramplab.metrics.promconfig import shipped_rule_files, write_local_config
from ramplab.stack.process import ProcessSpec, free_port
from ramplab.stack.readiness import HttpReady, Readiness

__all__ = ["Monitoring", "find_prometheus", "loopback_address"]

SCRAPE_INTERVAL_S = 2.0
# Workers outlive the master by at most this much beyond --linger; the stack's SIGTERM comes first.
WORKER_LINGER_MARGIN_S = 120.0
INSTALL_HINT = (
    "the `prometheus` binary is not on PATH; install it (Debian/Ubuntu: "
    "`apt-get install prometheus`, or https://prometheus.io/download/) or drop --prometheus"
)


def find_prometheus() -> str:
    """The path of the ``prometheus`` binary; a ``UsageError`` naming ``--prometheus`` if none."""
    found = shutil.which("prometheus")
    if found is None:
        raise UsageError("--prometheus", INSTALL_HINT)
    return found


def loopback_address(url: str) -> str | None:
    """``host:port`` of a plain-HTTP loopback ``url`` (what the local Prometheus scrapes), or
    None."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        return None
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    port = parts.port or 80
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(slots=True)
class Monitoring:
    """Ports and arguments for the exporters, and the optional Prometheus process."""

    run_id: str
    scenario: str
    workers: int
    linger_s: float = 0.0
    prometheus_bin: str | None = None
    master_port: int = field(default_factory=free_port)
    worker_ports: list[int] = field(default_factory=list)
    prometheus_port: int = 0

    def __post_init__(self) -> None:
        if not self.worker_ports:
            self.worker_ports = [free_port() for _ in range(self.workers)]
        if self.prometheus_bin is not None and not self.prometheus_port:
            self.prometheus_port = free_port()

    @property
    def prometheus_url(self) -> str | None:
        if self.prometheus_bin is None:
            return None
        return f"http://127.0.0.1:{self.prometheus_port}"

    def locust_args(self) -> list[str]:
        """For the master and every worker: the labels and the master's gauges port."""
        return ["--run-id", self.run_id, "--scenario", self.scenario,
                "--master-metrics-port", str(self.master_port)]  # fmt: skip

    def worker_args(self, index: int) -> list[str]:
        """Worker ``index``'s own ``/metrics`` port (the ``WorkerExtension`` seam)."""
        linger = self.linger_s + WORKER_LINGER_MARGIN_S
        return ["--metrics-port", str(self.worker_ports[index]), "--metrics-linger", f"{linger:g}"]

    def endpoints(self, target_url: str | None) -> dict[str, str]:
        """Each scraped process's ``/metrics`` URL by stack process name."""
        found: dict[str, str] = {}
        if target_url is not None:
            found["target"] = target_url.rstrip("/") + "/metrics"
        found["master"] = f"http://127.0.0.1:{self.master_port}/metrics"
        for index, port in enumerate(self.worker_ports):
            found[f"worker-{index + 1}"] = f"http://127.0.0.1:{port}/metrics"
        return found

    def prometheus_extra(
        self, run_dir: Path, target_address: str | None
    ) -> tuple[ProcessSpec, Readiness]:
        """Write ``run_dir/prometheus.yml`` and return the Prometheus process and its check.

        ``target_address`` (``127.0.0.1:PORT``) is scraped as job ``target`` when given.
        """
        assert self.prometheus_bin is not None
        targets = [("master", f"127.0.0.1:{self.master_port}")]
        targets += [("worker", f"127.0.0.1:{port}") for port in self.worker_ports]
        if target_address is not None:
            targets.insert(0, ("target", target_address))
        config = write_local_config(
            run_dir / "prometheus.yml",
            targets,
            rule_files=shipped_rule_files(),
            scrape_interval_s=SCRAPE_INTERVAL_S,
        )
        argv = [self.prometheus_bin, f"--config.file={config}",
                f"--storage.tsdb.path={run_dir / 'prometheus'}",
                f"--web.listen-address=127.0.0.1:{self.prometheus_port}"]  # fmt: skip
        return ProcessSpec("prometheus", argv), HttpReady(f"{self.prometheus_url}/-/ready")

    def settle(self, since: float, timeout_s: float = 5 * SCRAPE_INTERVAL_S + 10) -> bool:
        """Wait until Prometheus has scraped every target after ``since`` (epoch seconds), so
        the stored series end with the run's final counts; ``False`` if that did not happen."""
        if self.prometheus_url is None:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            oldest = _query_number(self.prometheus_url, "min(timestamp(up))")
            if oldest is not None and oldest > since:
                return True
            time.sleep(0.25)
        return False

    def meta(self, run_dir: Path, target_url: str | None) -> dict[str, Any]:
        """What ``run.json`` records: labels, every ``/metrics`` URL, and Prometheus."""
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "scenario": self.scenario,
            "endpoints": self.endpoints(target_url),
        }
        if self.prometheus_url is not None:
            out["prometheus"] = {
                "url": self.prometheus_url,
                "config": str(run_dir / "prometheus.yml"),
                "storage": str(run_dir / "prometheus"),
            }
        return out


def _query_number(base_url: str, expr: str) -> float | None:
    try:
        body = httpx.get(base_url + "/api/v1/query", params={"query": expr}, timeout=2.0).json()
    except (httpx.HTTPError, ValueError):
        return None
    result = body.get("data", {}).get("result", []) if body.get("status") == "success" else []
    return float(result[0]["value"][1]) if result else None
