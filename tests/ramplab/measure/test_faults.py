"""The fault suite: one hostile server behaviour per case, each classified by name, on time.

Timeout cases are bounded by the configured limits (the request ends within 0.5 s after its
timeout, never before it), not by how fast this machine is. The cases that already worked are
here too, so they keep working.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.record import RequestRecord
from ramplab.retry.policy import Retrier, RetryAfter
from tests.support.hostile import HostileServer, hostile_server
from tests.support.processes import run_under_gevent

REQUEST_S = 1.5  # the request timeout of the timeout cases
READ_S = 5.0  # longer: the request's deadline is what must fire
SLACK_S = 0.5
BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "max_tokens": 16,
}


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with hostile_server() as srv:
        yield srv


def run(
    url: str,
    total_s: float | None = REQUEST_S,
    read_s: float = READ_S,
    body: dict[str, Any] | None = None,
    retry: Retrier | None = None,
) -> tuple[RequestRecord, float]:
    """The record of one request, and how long it took from the caller's side."""
    with make_client(ClientOptions(read_timeout_s=read_s, connect_timeout_s=1.0)) as client:
        chain = RequestChain(client, Endpoint(url, total_s), retry=retry)
        started = time.perf_counter()
        record = chain.run(body or BODY)
        return record, time.perf_counter() - started


def assert_ends_at(elapsed: float, limit: float) -> None:
    assert limit <= elapsed + 0.01, f"ended at {elapsed:.3f} s, before its {limit} s limit"
    assert elapsed <= limit + SLACK_S, f"ended at {elapsed:.3f} s, {limit} s was the limit"


@pytest.mark.parametrize(
    ("path", "doing"),
    [
        ("/silent", "waiting for the response head"),
        ("/slow-headers", "waiting for the response head"),
        ("/trickle", "reading the body"),
    ],
)
def test_the_request_timeout_holds_from_the_send(
    server: HostileServer, path: str, doing: str
) -> None:
    """Regression: the request timeout was checked only as body bytes arrived — a silent server
    was caught by the read timeout, slow headers held a 5 s request 22.8 s."""
    record, elapsed = run(server.url + path)
    assert record.error_kind == "timeout", record.error_detail
    assert_ends_at(elapsed, REQUEST_S)
    assert f"request timeout ({REQUEST_S:g} s) passed while {doing}" in (record.error_detail or "")
    assert record.attempt_log[0].duration_ms / 1000 <= REQUEST_S + SLACK_S
    if path == "/trickle":
        assert record.ttfb_ms is not None  # what arrived before the deadline is kept


def test_the_read_timeout_stays_a_limit_per_read(server: HostileServer) -> None:
    record, elapsed = run(server.url + "/silent", total_s=10.0, read_s=0.5)
    assert record.error_kind == "timeout"
    assert_ends_at(elapsed, 0.5)
    assert "read timeout (0.5 s) passed while waiting for the response head" in (
        record.error_detail or ""
    )


def timeouts_under_gevent(url: str) -> None:
    """The timeout cases in a gevent-patched process, as a Locust worker runs them; prints what
    each did as JSON."""
    out = {}
    for path in ("/silent", "/slow-headers"):
        record, elapsed = run(url + path)
        out[path] = {"kind": record.error_kind, "detail": record.error_detail, "s": elapsed}
    print(json.dumps(out))


def test_the_request_timeout_holds_under_gevent(server: HostileServer) -> None:
    done = run_under_gevent(
        "from tests.ramplab.measure.test_faults import timeouts_under_gevent\n"
        f"timeouts_under_gevent({server.url!r})"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for path, result in results.items():
        assert result["kind"] == "timeout", (path, result)
        assert_ends_at(result["s"], REQUEST_S)
        assert "request timeout" in result["detail"], (path, result)


def test_the_request_timeout_holds_over_http2() -> None:
    """httpcore takes h2's timeouts once per request: they are cut to the time the request has
    left, so a server that never answers still ends it at its timeout."""
    with socket.socket() as listener:  # connections complete in the kernel and are never read
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        options = ClientOptions(read_timeout_s=READ_S, connect_timeout_s=1.0, http2=True)
        with make_client(options) as client:
            chain = RequestChain(client, Endpoint(f"http://127.0.0.1:{port}/v1", REQUEST_S))
            started = time.perf_counter()
            record = chain.run(BODY)
            elapsed = time.perf_counter() - started
    assert record.error_kind == "timeout", record.error_detail
    assert_ends_at(elapsed, REQUEST_S)


def test_an_html_page_is_an_unexpected_content_type(server: HostileServer) -> None:
    record, _ = run(server.url + "/html")
    assert record.error_kind == "unexpected_content_type", record.error_detail
    assert record.status == 200
    detail = record.error_detail or ""
    assert "text/html" in detail
    assert "<!doctype html><html><head><title>Sign in" in detail  # the body's first bytes


def test_a_compressed_stream_is_an_unsupported_encoding(server: HostileServer) -> None:
    record, _ = run(server.url + "/gzip")
    assert record.error_kind == "unsupported_encoding", record.error_detail
    assert "gzip" in (record.error_detail or "")
    sent = [ex for ex in server.requests if ex.path == "/gzip"][-1]
    assert sent.headers["accept-encoding"] == "identity"


def test_a_redirect_is_an_http_status_naming_its_location(server: HostileServer) -> None:
    record, _ = run(server.url + "/redirect")
    assert record.error_kind == "http_status", record.error_detail
    assert record.status == 307
    assert f"{server.url}/v2/chat/completions" in (record.error_detail or "")
    assert record.attempts == 1  # not followed


def test_a_bad_chunk_size_is_a_protocol_error(server: HostileServer) -> None:
    record, elapsed = run(server.url + "/bad-chunk")
    assert record.error_kind == "protocol_error", record.error_detail
    assert "bad chunk size line" in (record.error_detail or "")
    assert elapsed < REQUEST_S  # at once, not when a timeout fires


def test_invalid_utf8_is_counted_not_silent(server: HostileServer) -> None:
    record, _ = run(server.url + "/invalid-utf8")
    assert record.error_kind == "invalid_utf8", record.error_detail
    assert (record.error_detail or "").startswith("1 line(s) of the stream were not valid UTF-8")
    assert record.ttft_ms is not None  # the tokens were still timed


def test_an_empty_stream_is_a_failure_not_goodput(server: HostileServer) -> None:
    """Regression: llama.cpp's server cuts a running stream to ``[DONE]``; 154 of 156 such empty
    streams were counted as successes."""
    record, _ = run(server.url + "/empty")
    assert not record.ok
    assert record.error_kind == "empty_response", record.error_detail
    assert record.status == 200
    assert record.error_detail == (
        "the response completed with no output: no content, no tool call, no usage"
    )


def test_an_empty_stream_is_fine_when_no_output_was_asked_for(server: HostileServer) -> None:
    record, _ = run(server.url + "/empty", body={**BODY, "max_tokens": 0})
    assert record.ok, record.error_detail


def test_an_empty_plain_answer_is_a_failure_too(server: HostileServer) -> None:
    record, _ = run(server.url + "/empty-json", body={**BODY, "stream": False})
    assert record.error_kind == "empty_response", record.error_detail


def test_a_tool_call_is_output(server: HostileServer) -> None:
    record, _ = run(server.url + "/tool-calls")
    assert record.ok, record.error_detail


def test_retry_after_as_an_http_date_is_waited_for(server: HostileServer) -> None:
    """Regression: an HTTP-date Retry-After was ignored (3 attempts in 96 ms against a server
    that asked for 5 s)."""
    policy = Retrier(None, np.random.default_rng(0), max_attempts=2, retry_after=RetryAfter(10.0))
    record, _ = run(server.url + "/retry-after-date", total_s=10.0, retry=policy)
    assert record.ok, record.error_detail
    assert record.attempts == 2
    first, second = record.attempt_log
    assert first.status == 429
    assert first.retry_after_s is not None
    assert first.retry_after_s > 0.4
    assert server.retry_at is not None
    # The second attempt went out when the server said, not before (nor much after).
    assert server.retry_at - 0.05 <= second.start <= server.retry_at + SLACK_S


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("/http10", " a b"),
        ("/no-space", " a b"),
        ("/crlf", " a b"),
        ("/utf8-split", "日本語"),
        ("/usage-only", " a b"),
    ],
)
def test_odd_but_valid_streams_are_read(server: HostileServer, path: str, text: str) -> None:
    with make_client(ClientOptions(read_timeout_s=READ_S)) as client:
        chain = RequestChain(client, Endpoint(server.url + path, REQUEST_S))
        record = chain.run(BODY)
    assert record.ok, (record.error_kind, record.error_detail)
    assert chain.last_text == text
    assert record.ttft_ms is not None
    if path in ("/http10", "/usage-only"):
        assert record.output_tokens == 2
        assert record.output_tokens_source == "usage"
