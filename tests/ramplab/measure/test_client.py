"""The client's network layer: receive stamps, and an idle-connection check that never yields.

Receive stamps are the kernel's arrival time of the bytes, not the moment a busy reader got to them.

A purpose-built server sends the role event, then a content event 20 ms later; the reader takes
the first, then stays busy for 200 ms (as a greenlet does while others parse) before reading the
second. The second read's stamp must lie ~180 ms before the read — when the packet came in.
"""

from __future__ import annotations

import socket
import sys
import time

import gevent
import pytest

from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.sockets import TimedBackend, TimedStream
from tests.support.processes import run_under_gevent
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, chunk

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


def idle_check() -> None:
    """Run under gevent's monkey-patching, as in a Locust process (see the test below), with the
    OS poll the Locust plugin passes to every client it makes."""
    from ramplab.plugin.plugin import os_poll

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        backend = TimedBackend(cache=None, poll=os_poll())
        stream = backend.connect_tcp("127.0.0.1", port, timeout=5)
        peer, _ = listener.accept()
        try:
            ran: list[bool] = []
            gevent.spawn(ran.append, True)  # runs only if the caller yields to the hub
            assert stream.get_extra_info("is_readable") is False  # idle and open
            assert ran == [], "the idle check yielded to the gevent hub"
            gevent.sleep(0)
            assert ran == [True]
            peer.close()  # the server drops the idle connection: readable (EOF) at once
            deadline = time.monotonic() + 5
            while not stream.get_extra_info("is_readable"):
                assert time.monotonic() < deadline, "a closed peer never showed as readable"
                time.sleep(0.01)
        finally:
            stream.close()
            peer.close()


def test_idle_connection_check_does_not_yield_to_the_gevent_hub() -> None:
    """Regression: httpcore's keep-alive check polled with gevent's patched ``select``, a hub
    switch that waited for any other user's next event (~6 ms before each request at 10 users).
    In a subprocess, monkey-patched first like a Locust process, whatever this session did."""
    done = run_under_gevent(
        "from tests.ramplab.measure.test_client import idle_check; idle_check()"
    )
    assert done.returncode == 0, done.stderr[-2000:]
