"""``LocalStack``: the reference target, a Locust master and N workers, started and stopped as one.

Start order and what "healthy" means:

1. the target: ``GET /readyz`` answers 200 (its Redis is reachable); a target given by URL
   must accept TCP connections (``probe.reach``: an unresolvable name fails at once, a refused
   port after 2 s);
2. extra processes (``extras``), each with its own readiness check — before the master, so that
   a Prometheus among them sees the ramp from its first arrival;
3. the master: its worker port accepts connections;
4. the workers: the master's log says ``N workers connected``, and none of them has exited
   (with ``master_bind`` none starts here: the master waits for N workers from elsewhere).

Each step has one deadline; a process that exits early or misses the deadline stops the whole
stack with a ``StackError`` naming the process, what was awaited and the tail of its log.

Stopping goes master first — on SIGINT Locust stops its workers, takes their last records and
writes ``summary.json`` — then the workers, the extras and the target, each group SIGTERM'd and
SIGKILL'd after a grace period, so nothing outlives the CLI.

The reference target can serve HTTPS (``target_tls``); when it makes its own certificate
(``target_ca``) the stack has it write its CA to ``<run>/tls/target-ca.pem``, waits on
``/readyz`` over verified HTTPS, and gives the Locust processes ``--ca-file`` (unless the campaign
set one, or turned verification off). With ``dns_delay_ms`` a slow DNS server
(``ramplab/stack/dns.py``) starts first, the target is addressed as ``dns_name`` and the Locust
processes resolve it through that server (``--resolver``): DNS becomes a real, cacheable phase.

Extension seams: ``worker_extensions`` add arguments per worker index (a per-worker metrics port,
say), ``extras`` add whole processes with their readiness check (a Prometheus scraping them).
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ramplab.errors import StackError
from ramplab.runs.rundir import RunDir
from ramplab.stack.dns import DEFAULT_NAME
from ramplab.stack.probe import reach
from ramplab.stack.process import ManagedProcess, ProcessSpec, free_port
from ramplab.stack.readiness import DnsReady, HttpReady, LogReady, PortReady, Readiness

__all__ = ["LocalStack", "StackConfig", "StackError", "WorkerExtension"]

POLL_S = 0.1
# A headless Locust run with a shape handles SIGINT (KeyboardInterrupt: stop, write results, quit)
# but installs its SIGTERM handler only after the shape ends; SIGTERM is the fallback.
MASTER_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class WorkerExtension(Protocol):
    """Adds command-line arguments to worker ``index`` (0-based), e.g. its own metrics port."""

    def worker_args(self, index: int) -> list[str]: ...


@dataclass(slots=True)
class StackConfig:
    """Everything the stack needs; ``target_url=None`` starts the reference target."""

    locustfile: Path
    run_dir: Path
    locust_args: list[str]  # the same for the master and every worker
    workers: int = 2
    locust_env: dict[str, str] = field(default_factory=dict)
    target_url: str | None = None
    target_port: int | None = None  # of the local target; None: a free one at start
    target_env: dict[str, str] = field(default_factory=dict)
    target_workers: int = 1
    target_tls: bool = False  # the local target serves HTTPS
    target_ca: bool = False  # ... with a certificate it makes, its CA written for the clients
    dns_delay_ms: float | None = None  # a slow DNS server for the target's name; None: none
    dns_name: str = DEFAULT_NAME
    web_ui: bool = False
    health_timeout_s: float = 60.0
    # (host, port): the master serves its workers' port there and no worker starts here — the
    # ``workers`` expected connect from other hosts or containers (``ramplab container``).
    master_bind: tuple[str, int] | None = None
    web_port: int | None = None  # with web_ui: Locust's UI port (None: a free one)
    python: str = sys.executable
    cwd: Path | None = None
    worker_extensions: list[WorkerExtension] = field(default_factory=list)
    extras: list[tuple[ProcessSpec, Readiness]] = field(default_factory=list)

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"

    @property
    def progress_path(self) -> Path:
        return RunDir(self.run_dir).progress

    @property
    def ca_path(self) -> Path:
        """Where a target that makes its own certificate writes the CA clients trust."""
        return self.run_dir / "tls" / "target-ca.pem"


class LocalStack:
    """Start with ``start()``, wait for the master with ``wait()``, always ``stop()``."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.target: ManagedProcess | None = None
        self.dns: ManagedProcess | None = None
        self.dns_port = 0
        self._client_args: list[str] = []  # --ca-file, --resolver: known once the stack starts
        self.master: ManagedProcess | None = None
        self.workers: list[ManagedProcess] = []
        self.extras: list[ManagedProcess] = []
        self.target_url = config.target_url or ""
        self.master_port = 0
        self.web_port: int | None = None

    @property
    def processes(self) -> list[ManagedProcess]:
        """Every process started, in start order."""
        found = [self.dns, self.target, *self.extras, self.master, *self.workers]
        return [p for p in found if p is not None]

    # -- start ------------------------------------------------------------------------------
    def start(self, on_step: Callable[[str], None] = lambda _: None) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.health_timeout_s
        if cfg.target_url is None:
            host = "127.0.0.1"
            if cfg.dns_delay_ms is not None:
                self._start_dns(cfg.dns_delay_ms, deadline)
                host = cfg.dns_name
                self._client_args += ["--resolver", f"127.0.0.1:{self.dns_port}"]
                on_step(f"DNS for {host} on 127.0.0.1:{self.dns_port} ({cfg.dns_delay_ms:g} ms)")
            port = cfg.target_port or free_port()
            scheme = "https" if cfg.target_tls else "http"
            self.target_url = f"{scheme}://{host}:{port}"
            self.target = self._spawn(self._target_spec(port))
            ca = cfg.ca_path if cfg.target_ca else None
            ready = HttpReady(f"{scheme}://127.0.0.1:{port}/readyz", ca)
            self._await(self.target, ready, deadline)
            if ca is not None and not {"--ca-file", "--insecure"} & set(cfg.locust_args):
                self._client_args += ["--ca-file", str(ca)]
            on_step(f"target ready on {self.target_url}")
        else:
            self._await_reachable(cfg.target_url, deadline)
            on_step(f"target {cfg.target_url} reachable")
        for spec, readiness in cfg.extras:
            extra = self._spawn(spec)
            self.extras.append(extra)
            self._await(extra, readiness, deadline)
            on_step(f"{spec.name} ready")
        bind_host, self.master_port = cfg.master_bind or ("127.0.0.1", free_port())
        self.master = self._spawn(self._master_spec(bind_host))
        probe = "127.0.0.1" if bind_host in ("0.0.0.0", "*") else bind_host
        self._await(self.master, PortReady(self.master_port, probe), deadline)
        on_step(f"master listening on {bind_host}:{self.master_port}")
        if cfg.master_bind is not None:
            on_step(f"waiting for {cfg.workers} workers to connect")
        else:
            for index in range(cfg.workers):
                self.workers.append(self._spawn(self._worker_spec(index)))
        connected = LogReady(self.master.log_path, rf"\b{cfg.workers} workers connected")
        self._await_workers(connected, deadline)
        on_step(f"{cfg.workers} workers connected")
        if self.web_port is not None:
            on_step(f"Locust web UI on http://{bind_host}:{self.web_port}")

    def _spawn(self, spec: ProcessSpec) -> ManagedProcess:
        return ManagedProcess(spec, self.config.log_dir).start()

    def _start_dns(self, delay_ms: float, deadline: float) -> None:
        cfg = self.config
        self.dns_port = free_port(socket.SOCK_DGRAM)
        argv = [cfg.python, "-m", "ramplab.stack.dns", "--port", str(self.dns_port),
                "--delay-ms", repr(delay_ms), "--name", cfg.dns_name]  # fmt: skip
        self.dns = self._spawn(ProcessSpec("dns", argv, {}, cfg.cwd))
        self._await(self.dns, DnsReady(self.dns_port, cfg.dns_name), deadline)

    def _target_spec(self, port: int) -> ProcessSpec:
        cfg = self.config
        argv = [cfg.python, "-m", "target_service", "--host", "127.0.0.1", "--port", str(port),
                "--workers", str(cfg.target_workers)]  # fmt: skip
        env = dict(cfg.target_env)
        if cfg.target_ca:
            env["APP_TLS__CA_FILE"] = str(cfg.ca_path)
            if cfg.dns_delay_ms is not None:  # the certificate must name what clients ask for
                names = [cfg.dns_name, "localhost", "127.0.0.1"]
                env.setdefault("APP_TLS__HOSTNAMES", json.dumps(names))
        return ProcessSpec("target", argv, env, cfg.cwd)

    def _locust(self) -> list[str]:
        return [self.config.python, "-m", "locust", "-f", str(self.config.locustfile)]

    def _master_spec(self, bind_host: str) -> ProcessSpec:
        cfg = self.config
        argv = [
            *self._locust(),
            "--host", self.target_url,
            "--master", "--master-bind-host", bind_host,
            "--master-bind-port", str(self.master_port),
            "--expect-workers", str(cfg.workers),
            "--expect-workers-max-wait", str(max(1, round(cfg.health_timeout_s))),
            "--results-dir", str(cfg.run_dir),
            "--ramplab-progress-file", str(cfg.progress_path),
        ]  # fmt: skip
        if cfg.web_ui:
            self.web_port = cfg.web_port or free_port()
            # --autostart runs the shape at once like --headless; --autoquit ends the process
            # a few seconds after the shape finishes, leaving the UI up to look at the end.
            argv += ["--autostart", "--autoquit", "5", "--web-host", bind_host,
                     "--web-port", str(self.web_port)]  # fmt: skip
        else:
            argv.append("--headless")
        argv += [*cfg.locust_args, *self._client_args]
        return ProcessSpec("master", argv, dict(cfg.locust_env), cfg.cwd)

    def _worker_spec(self, index: int) -> ProcessSpec:
        cfg = self.config
        argv = [*self._locust(), "--worker", "--master-host", "127.0.0.1",
                "--master-port", str(self.master_port), *cfg.locust_args,
                *self._client_args]  # fmt: skip
        for extension in cfg.worker_extensions:
            argv += extension.worker_args(index)
        return ProcessSpec(f"worker-{index + 1}", argv, dict(cfg.locust_env), cfg.cwd)

    def _await(self, proc: ManagedProcess, check: Readiness, deadline: float) -> None:
        while not check.ready():
            code = proc.poll()
            if code is not None:
                raise self._error(proc, f"exited with code {code} before {check.describe()}")
            if time.monotonic() > deadline:
                raise self._error(
                    proc, f"not healthy within {self.config.health_timeout_s:g} s: "
                    f"waited for {check.describe()}"
                )  # fmt: skip
            time.sleep(POLL_S)

    def _await_reachable(self, url: str, deadline: float) -> None:
        """A given target must at least accept connections (any server: no health URL known);
        an unresolvable name or a refused port fails within seconds (``probe.reach``)."""
        reach(url, max(1.0, deadline - time.monotonic()))

    def _await_workers(self, check: Readiness, deadline: float) -> None:
        assert self.master is not None
        while not check.ready():
            for proc in [self.master, *self.workers]:
                code = proc.poll()
                if code is not None:
                    raise self._error(proc, f"exited with code {code} before {check.describe()}")
            if time.monotonic() > deadline:
                raise self._error(
                    self.master,
                    f"only some of {self.config.workers} workers connected within "
                    f"{self.config.health_timeout_s:g} s (waited for {check.describe()})",
                )
            time.sleep(POLL_S)

    @staticmethod
    def _error(proc: ManagedProcess, what: str) -> StackError:
        return StackError(
            proc.name, f"{proc.name} {what} (log: {proc.log_path})", proc.poll(), proc.log_tail()
        )

    # -- run --------------------------------------------------------------------------------
    def wait(
        self,
        timeout_s: float,
        tick: Callable[[], None] = lambda: None,
        working: Callable[[], bool] = lambda: False,
    ) -> int | None:
        """Wait for the master to exit, calling ``tick`` every poll; its exit code, or ``None``
        on timeout. Past ``timeout_s`` the wait goes on while ``working()`` says the master is
        still at it (its summary's heartbeat). A target that dies meanwhile raises
        ``StackError``."""
        assert self.master is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline or working():
            code = self.master.poll()
            tick()
            if code is not None:
                return code
            if self.target is not None and self.target.poll() is not None:
                raise self._error(self.target, "died during the run")
            time.sleep(POLL_S * 2.5)
        return None

    def dead_workers(self) -> list[ManagedProcess]:
        """Workers that exited while the master still ran (the engine re-splits around them)."""
        return [w for w in self.workers if w.poll() not in (None, 0)]

    # -- stop -------------------------------------------------------------------------------
    def stop(self, master_grace_s: float = 30.0) -> dict[str, int | None]:
        """Stop everything (master first, target last); exit codes by process name."""
        codes: dict[str, int | None] = {}
        if self.master is not None:
            codes[self.master.name] = self.master.stop(master_grace_s, MASTER_SIGNALS)
        for proc in [*self.workers, *self.extras, self.target, self.dns]:
            if proc is not None:
                codes[proc.name] = proc.stop(15.0 if proc is self.target else 10.0)
        return codes
