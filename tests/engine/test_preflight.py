"""What stops vLLM from starting is said before it starts: a port in use, too little memory."""

from __future__ import annotations

import socket

import pytest

from bench.engine import server
from bench.engine.errors import EngineError


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
