"""The measured request bypasses httpx (``MeasuredClient.open``): it must send what httpx would
have sent (but ask for an uncompressed body), read the same bytes, and leave nothing behind for
the cycle collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ramplab.measure.attempt import run_attempt
from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.headers import header_map
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, chunk

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
seen: list[dict[str, str]] = []


def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    seen.append({**headers, ":body-length": str(len(body))})
    return Reply(
        headers={"server-timing": "queue;dur=1.5", "x-twice": "a"},
        body=[ROLE, chunk(" a"), chunk(" b"), DONE],
    )


@pytest.fixture
def server() -> Iterator[TinyServer]:
    seen.clear()
    with TinyServer(handler) as srv:
        yield srv


def test_the_measured_request_sends_the_headers_httpx_would(server: TinyServer) -> None:
    url = server.url + "/v1/chat/completions"
    with make_client(ClientOptions()) as client:
        client.post(url, json=BODY, headers={"x-extra": "1"})  # through httpx, for comparison
        result = run_attempt(client, url, BODY, {"x-extra": "1", "User-Agent": "mine"}, 10.0)
    assert result.ok
    assert result.saw_done
    assert "".join(result.content_parts) == " a b"
    by_httpx, measured = (dict(h) for h in seen)
    assert measured.pop("user-agent") == "mine"  # the caller's header replaces the default
    by_httpx.pop("user-agent")
    # The body is read raw: the measured request asks for it uncompressed.
    assert measured.pop("accept-encoding") == "identity"
    assert "gzip" in by_httpx.pop("accept-encoding")
    # httpx's json= writes a differently spaced body than orjson: only the length may differ.
    assert int(measured.pop(":body-length")) == int(measured.pop("content-length"))
    by_httpx.pop(":body-length"), by_httpx.pop("content-length")
    assert measured == by_httpx
    assert measured["host"] == f"127.0.0.1:{server.port}"
    assert result.server_timing_ms == {"queue": 1.5}


def test_a_finished_attempt_leaves_no_reference_cycle(server: TinyServer) -> None:
    url = server.url + "/v1/chat/completions"
    with make_client(ClientOptions()) as client:
        run_attempt(client, url, BODY, {}, 10.0)  # the connection and its pool exist now
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            result = run_attempt(client, url, BODY, {}, 10.0)
            assert result.ok
            del result
            gc.collect()
            ours = [
                o
                for o in gc.garbage
                if type(o).__module__.split(".")[0] in {"httpx", "httpcore", "h11", "ramplab"}
            ]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    # Through httpx's Client.send every request left ~24 objects in a cycle (Response <->
    # BoundSyncStream) that only a full collection freed: RSS grew with them.
    assert ours == []


def test_repeated_response_headers_are_joined_as_httpx_joins_them() -> None:
    raw = [(b"Retry-After", b"2"), (b"X-Twice", b"a"), (b"x-twice", b"b")]
    assert header_map(raw) == {"retry-after": "2", "x-twice": "a, b"}


def test_a_record_can_be_joined_with_the_server_and_a_capture() -> None:
    first = b'data: {"id":"chatcmpl-7","choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    later = b'data: {"id":"chatcmpl-other","choices":[{"index":0,"delta":{"content":"y"}}]}\n\n'
    with TinyServer(lambda *_: Reply(body=[first, later, DONE])) as srv:
        with make_client(ClientOptions(reuse_connections=False)) as client:
            chain = RequestChain(client, Endpoint(srv.url + "/v1/chat/completions"))
            records = [chain.run(BODY) for _ in range(2)]
        ports = srv.client_ports
    assert [r.completion_id for r in records] == ["chatcmpl-7", "chatcmpl-7"]  # the first id
    # One connection each: the record's port is the one the server saw it come from.
    assert [r.local_port for r in records] == ports
    assert [r.to_dict()["local_port"] for r in records] == ports
    assert len(set(ports)) == 2
