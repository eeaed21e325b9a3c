"""One child process of the stack, in its own process group, logging to its own file.

Each child gets a new session so the terminal's Ctrl-C reaches only the CLI, which then stops
the children in a deliberate order (the master first, so it can write the summary). Stopping
signals the whole group: the target's embedded Redis and uvicorn workers go with it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["ManagedProcess", "ProcessSpec", "free_port"]


# free_port draws from [PRIVATE_LOW, the ephemeral range's start). The target has the same rule
# (target_service/embedded_redis.py): the two are separate programs and neither imports the other.
PRIVATE_LOW = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    """A free TCP (or, given ``SOCK_DGRAM``, UDP) port on 127.0.0.1 now, for a child to bind a
    moment later; drawn below the kernel's ephemeral range, because a port the kernel hands out
    (bind to 0) is also what any outgoing connection may take as its local port in that moment
    (a master's /metrics port was taken so in a CI run: "Address already in use")."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(64):
        port = rng.randrange(PRIVATE_LOW, low)
        with socket.socket(socket.AF_INET, kind) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux), else IANA's 49152."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152
    return low if low > PRIVATE_LOW + 1024 else 49152


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """What to run: ``name`` also names the log file (``logs/<name>.log``)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the CLI's own environment
    cwd: Path | None = None


class ManagedProcess:
    """A started ``ProcessSpec``; stdout and stderr go to ``log_path``."""

    def __init__(self, spec: ProcessSpec, log_dir: Path) -> None:
        self.spec = spec
        self.log_path = log_dir / f"{spec.name}.log"
        self._log: IO[bytes] | None = None
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            self.spec.argv,
            cwd=self.spec.cwd,
            env={**os.environ, **self.spec.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def poll(self) -> int | None:
        """The exit code, or ``None`` while it runs."""
        return None if self.popen is None else self.popen.poll()

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def send_signal(self, signum: int) -> None:
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signum)

    def wait(self, timeout_s: float) -> int | None:
        """The exit code, or ``None`` if it is still running after ``timeout_s``."""
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(
        self, timeout_s: float = 15.0, signals: Sequence[int] = (signal.SIGTERM,)
    ) -> int | None:
        """Each of ``signals`` to the group in turn, waiting up to ``timeout_s`` after each, then
        SIGKILL; returns the exit code."""
        if self.popen is None:
            return None
        for signum in signals:
            if not self.running:
                break
            self.send_signal(signum)
            self.wait(timeout_s)
        if self.running:
            self.send_signal(signal.SIGKILL)
            self.popen.wait()
        self._reap_group()
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.popen.returncode

    def _reap_group(self) -> None:
        # Grandchildren (uvicorn workers, the embedded Redis) may outlive their parent briefly.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            try:
                os.killpg(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the log, for error messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
