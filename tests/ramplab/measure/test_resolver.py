"""The client's own resolver against the stack's slow DNS server on loopback: the server's delay
is what the request's ``dns`` phase measures, and the DNS cache takes it away.

Margins: ``time.sleep(delay)`` never returns early, so a lookup through the server takes at least
the delay — asserted as a lower bound only (a loaded machine makes it longer, never shorter). A
cached lookup does no I/O; "≈ 0" is asserted as under a tenth of the delay.
"""

from __future__ import annotations

import socket

import httpx
import pytest

from ramplab.errors import ResolveError, UsageError
from ramplab.measure.client import ClientOptions, PhaseTrace, make_client
from ramplab.measure.resolver import DnsResolver
from ramplab.options.kinds import parse_address
from ramplab.stack.dns import SlowDns
from ramplab.stack.process import free_port
from tests.support.tiny_server import Reply, TinyServer

DELAY_MS = 30.0
NAME = "target.ramplab.test"


def _ok(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    return Reply(200, {"content-type": "text/plain"}, [b"ok"])


def _dns_phases(options: ClientOptions, url: str, count: int) -> list[float]:
    out = []
    with make_client(options) as client:
        for _ in range(count):
            trace = PhaseTrace()
            response = client.get(url, extensions={"trace": trace})
            assert response.status_code == 200
            out.append(trace.phases_ms()["dns"])
    return out


@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache"])
def test_the_dns_phase_measures_the_servers_delay_and_the_cache_removes_it(cache: bool) -> None:
    with SlowDns([NAME], DELAY_MS) as dns, TinyServer(_ok) as srv:
        port = srv.url.rsplit(":", 1)[1]
        options = ClientOptions(
            dns_cache=cache, reuse_connections=False, resolver=("127.0.0.1", dns.port)
        )
        phases = _dns_phases(options, f"http://{NAME}:{port}/", 3)
    assert phases[0] >= DELAY_MS, phases
    if cache:
        assert all(p < DELAY_MS / 10 for p in phases[1:]), phases
    else:
        assert all(p >= DELAY_MS for p in phases[1:]), phases


def test_an_unknown_name_fails_the_request_as_a_connect_error() -> None:
    with SlowDns([NAME], 0.0) as dns:
        options = ClientOptions(resolver=("127.0.0.1", dns.port))
        with make_client(options) as client, pytest.raises(httpx.ConnectError, match="NXDOMAIN"):
            client.get("http://nowhere.ramplab.test:1/")


def test_a_silent_server_times_out_and_address_literals_skip_the_query() -> None:
    silent = ("127.0.0.1", free_port(socket.SOCK_DGRAM))  # nothing listens there
    with pytest.raises(ResolveError, match=r"no answer|refused"):
        DnsResolver(silent).resolve(NAME, timeout_s=0.3)
    assert DnsResolver(silent).resolve("127.0.0.1") == "127.0.0.1"


@pytest.mark.parametrize("text", ["127.0.0.1", ":53", "host:0", "host:port", "h:70000"])
def test_a_bad_resolver_address_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="HOST:PORT"):
        parse_address(text, "--resolver")
