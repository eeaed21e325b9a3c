"""A real distributed ramp: one ``locust --master`` and N ``--worker`` processes with exporters."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from target_service.embedded_redis import free_port
from tests.support.processes import Process, python, stop_all

LOCUST = python("-m", "locust", "-f", "locustfiles/llm_ramp.py")
# Long enough for the test to take its last scrape; the test ends the processes itself.
LINGER_S = 60


class LocustRun:
    """Master (headless, ramp shape) + ``workers`` workers, each worker with its own /metrics."""

    def __init__(
        self,
        host: str,
        out: Path,
        shape: str,
        *,
        workers: int = 2,
        run_id: str = "t1",
        extra: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.out = out
        self.shape = shape
        self.workers = workers
        self.run_id = run_id
        self.extra = list(extra)
        self.master_port = free_port()
        self.master_metrics_port = free_port()
        self.worker_metrics_ports = [free_port() for _ in range(workers)]
        self.processes: list[Process] = []

    @property
    def results(self) -> Path:
        return self.out / "results"

    def _spawn(self, args: list[str], log: str) -> Process:
        process = Process(
            [*LOCUST, *args, "--run-id", self.run_id, "--metrics-linger", str(LINGER_S),
             *self.extra],
            self.out / log, grace_s=20,
        )  # fmt: skip
        self.processes.append(process)
        return process.start()

    def start(self) -> LocustRun:
        try:
            self._spawn(
                ["--host", self.host, "--headless", "--master", "--master-bind-host", "127.0.0.1",
                 "--master-bind-port", str(self.master_port), "--expect-workers",
                 str(self.workers), "--ramplab-shape", self.shape, "--results-dir",
                 str(self.results), "--master-metrics-port", str(self.master_metrics_port)],
                "master.log",
            )  # fmt: skip
            for index, port in enumerate(self.worker_metrics_ports):
                self._spawn(
                    ["--worker", "--master-host", "127.0.0.1", "--master-port",
                     str(self.master_port), "--ramplab-shape", self.shape, "--metrics-port",
                     str(port)],
                    f"worker{index}.log",
                )  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def worker_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/metrics" for port in self.worker_metrics_ports]

    @property
    def master_url(self) -> str:
        return f"http://127.0.0.1:{self.master_metrics_port}/metrics"

    def master_finished(self) -> bool:
        """The master logged its exit code: the final summary and every record are on disk; or
        it is gone without (its log says why), which waiting longer would not change."""
        master = self.processes[0] if self.processes else None
        exited = master is not None and not master.running()
        return "Shutting down (exit code" in self.log() or exited

    def log(self, name: str = "master.log") -> str:
        path = self.out / name
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        stop_all(self.processes)

    def __enter__(self) -> LocustRun:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
