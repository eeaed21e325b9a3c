"""Every failure kind, produced for real by a purpose-built server, classified by name.

Each case also checks the partial timings are kept, and an ``ok`` control case against the same
server shows the classification is not "everything fails".
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.record import RequestRecord
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, chunk, usage

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    tokens = [chunk(" a"), ("sleep", 0.01), chunk(" b")]
    match path:
        case "/ok":
            return Reply(body=[ROLE, *tokens, usage(2), b": comment\n\n", DONE])
        case "/status500":
            return Reply(
                500, {"content-type": "application/json"}, [b'{"error":{"message":"boom"}}']
            )
        case "/status429":
            return Reply(429, {"retry-after-ms": "1500", "retry-after": "2"}, [b"{}"])
        case "/unauthorized":
            return Reply(401, {}, [b'{"error":{"message":"no"}}'])
        case "/nodone":
            return Reply(body=[ROLE, *tokens], chunked=False)
        case "/error_event":
            err = json.dumps({"error": {"message": "engine died", "type": "server_error"}}).encode()
            return Reply(body=[ROLE, chunk(" a"), b"event: error\ndata: " + err + b"\n\n"])
        case "/malformed":
            return Reply(body=[ROLE, chunk(" a"), b"data: {not json\n\n", DONE])
        case "/drop":
            return Reply(body=[ROLE, *tokens, "drop"])
        case "/stall":
            return Reply(body=[ROLE, chunk(" a"), "stall"])
        case "/slow_total":
            return Reply(
                body=[ROLE]
                + [b for _ in range(30) for b in (chunk(" a"), ("sleep", 0.05))]
                + [DONE]
            )
    return Reply(404, {}, [b"{}"])


@pytest.fixture(scope="module")
def server() -> Iterator[TinyServer]:
    with TinyServer(handler) as srv:
        yield srv


def run(url: str, total_timeout_s: float | None = 5.0) -> RequestRecord:
    with make_client(ClientOptions(read_timeout_s=0.5, connect_timeout_s=1.0)) as client:
        return RequestChain(client, Endpoint(url, total_timeout_s)).run(BODY)


def test_ok_control(server: TinyServer) -> None:
    record = run(server.url + "/ok")
    assert record.ok, record.error_detail
    assert record.error_kind is None
    assert record.output_tokens == 2
    assert record.output_tokens_source == "usage"
    assert record.ttft_ms is not None
    assert record.ttlt_ms is not None
    assert record.ttlt_ms >= record.ttft_ms
    assert len(record.itl_ms) == 1


@pytest.mark.parametrize(
    ("path", "kind", "status"),
    [
        ("/status500", "http_status", 500),
        ("/status429", "http_status", 429),
        ("/unauthorized", "auth_error", 401),
        ("/nodone", "no_done", 200),
        ("/error_event", "stream_error", 200),
        ("/malformed", "malformed_json", 200),
        ("/drop", "connection_dropped", 200),
        ("/stall", "timeout", 200),
    ],
)
def test_failure_kinds(server: TinyServer, path: str, kind: str, status: int) -> None:
    record = run(server.url + path)
    assert not record.ok
    assert record.error_kind == kind, record.error_detail
    assert record.status == status
    assert record.error_detail
    assert record.ttfb_ms is not None  # partial timings are kept
    if path in ("/nodone", "/error_event", "/malformed", "/drop", "/stall"):
        assert record.ttft_ms is not None  # the tokens that did arrive were timed


def test_retry_after_is_read(server: TinyServer) -> None:
    record = run(server.url + "/status429")
    assert record.attempt_log[0].retry_after_s == pytest.approx(1.5)


def test_total_timeout_mid_stream(server: TinyServer) -> None:
    record = run(server.url + "/slow_total", total_timeout_s=0.3)
    assert record.error_kind == "timeout"
    assert record.ttft_ms is not None


def test_connect_error_on_a_closed_port() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # the port was free a moment ago and nothing listens on it now
    record = run(f"http://127.0.0.1:{port}/v1/chat/completions")
    assert record.error_kind == "connect_error"
    assert record.status is None
    assert not record.ok
