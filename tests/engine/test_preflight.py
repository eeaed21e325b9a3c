"""What stops vLLM from starting is said before it starts: a port in use, too little memory."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from bench.engine import server
from bench.engine.errors import EngineError
from tests.support.processes import REPO


def test_a_port_in_use_is_refused_by_name() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineError, match=f"port {port} on 127.0.0.1 is in use"):
            server.preflight(server.Settings(), port)


def test_a_kv_cache_larger_than_the_memory_is_refused() -> None:
    settings = server.Settings(kv_cache_bytes=1 << 50)  # a PiB
    with pytest.raises(EngineError, match=r"not enough memory: vLLM needs about .* available"):
        server.preflight(settings)


def test_the_cli_says_why_in_one_line_and_exits_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "bench.engine", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=False,
            timeout=60,
        )
    assert done.returncode == 1
    assert (
        done.stderr == f"engine: port {port} on 127.0.0.1 is in use: choose another, or 0 for any\n"
    )
