"""Receive stamps: the kernel's arrival time of the bytes, not the moment a busy reader got to them.

A purpose-built server sends the role event, then a content event 20 ms later; the reader takes
the first, then stays busy for 200 ms (as a greenlet does while others parse) before reading the
second. The second read's stamp must lie ~180 ms before the read — when the packet came in.
"""

from __future__ import annotations

import sys
import time

import pytest

from ramplab.client import ClientOptions, TimedStream, make_client
from tests.ramplab.tiny_server import DONE, ROLE, Reply, TinyServer, chunk

BUSY_S = 0.2
LATER_S = 0.02


def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    return Reply(body=[ROLE, ("sleep", LATER_S), chunk(" a"), ("sleep", 0.05), DONE])


def read_late(server: TinyServer) -> tuple[float, float, float]:
    """(read time of the role event, stamp of the content event, read time of the content)."""
    with (
        make_client(ClientOptions()) as client,
        client.stream("POST", server.url + "/v1/chat/completions", content=b"{}") as response,
    ):
        stream = response.extensions["network_stream"]
        assert isinstance(stream, TimedStream)
        chunks = response.iter_raw()
        seen = b""
        while b"assistant" not in seen:
            seen += next(chunks)
        first_read = time.perf_counter()
        assert stream.arrived_at is not None
        assert stream.arrived_at <= first_read
        time.sleep(BUSY_S)  # the reader is busy; the content event arrives meanwhile
        while b'" a"' not in seen:
            seen += next(chunks)
        read_at = time.perf_counter()
        assert stream.arrived_at is not None
        return first_read, stream.arrived_at, read_at


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps are Linux only")
def test_stamp_is_the_kernels_arrival_not_the_read() -> None:
    with TinyServer(handler) as srv:
        first_read, stamped, read_at = read_late(srv)
    assert stamped <= read_at
    # Sent LATER_S after the role event, read BUSY_S after it: the stamp is the arrival.
    assert read_at - stamped > (BUSY_S - LATER_S) / 2
    assert stamped > first_read  # and it is this packet's stamp, not the previous one's
