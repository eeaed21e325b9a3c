"""The embedded Redis never outlives the target, however the target is stopped.

Regression: a target stopped with SIGTERM to its own pid (not its process group, as a user's
``kill PID`` or a supervisor does) left its embedded ``redis-server`` running — uvicorn re-raises
SIGTERM after its graceful shutdown, and the default handler killed the process before the clean-up
ran.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.support.processes import TargetProcess

pytestmark = pytest.mark.slow


def _embedded_port(log: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        match = re.search(r"embedded Redis on redis://127\.0\.0\.1:(\d+)/0", log.read_text())
        if match:
            return int(match.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no embedded Redis announced in {log.read_text()!r}")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_closed(port: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _accepts(port):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_embedded_redis_stops_when_the_target_pid_is_signalled(
    tmp_path: Path, signum: signal.Signals
) -> None:
    log = tmp_path / "target.log"
    target = TargetProcess(log_path=log)
    target.env.pop("APP_REDIS_URL", None)  # unset: the target embeds its own Redis
    with target:
        port = _embedded_port(log)
        assert _accepts(port)
        # Held here: `target.process` is None as soon as the process has died, which after a
        # SIGKILL can be before the next line runs (failed one CI run).
        process = target.process
        assert process is not None
        os.kill(process.pid, signum)  # the pid only, never the group
        process.wait(timeout=20)
        assert _wait_closed(port), f"redis-server on {port} outlived the target ({signum.name})"
