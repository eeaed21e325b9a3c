"""OpenTelemetry traces from the target: one span per request with phase events, exported over
OTLP/HTTP when configured, nothing when not. Real servers on loopback throughout."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest
import uvicorn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette

from target_service.app import create_app
from target_service.embedded_redis import EmbeddedRedis, free_port
from target_service.errors import SettingsError
from target_service.settings import load_settings
from tests.support.processes import REPO, TargetProcess
from tests.support.scrape import wait_for

FAST = {
    "latency": {"prefill_overhead_ms": 5, "itl_ms": 2, "itl_jitter_ms": 0},
}
BODY = {
    "model": "ramplab-sim-1",
    "messages": [{"role": "user", "content": "hello"}],
    "max_tokens": 8,
    "ignore_eos": True,
    "chunk_size": 2,
}
STREAM_PHASES = ["queue", "prefill", "first_token", "sign", "decode_end"]


class ThreadServer:
    """uvicorn serving ``app`` on a free loopback port from a thread."""

    def __init__(self, app: Starlette) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        wait_for(lambda: self.server.started, timeout_s=30, what="uvicorn to start")
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def traced(redis_server: EmbeddedRedis) -> Iterator[tuple[ThreadServer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    settings = load_settings(redis_url=redis_server.url, **FAST)
    with ThreadServer(create_app(settings, span_exporter=exporter)) as server:
        yield server, exporter


def chat_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == "POST /v1/chat/completions"]


def test_one_span_per_request_with_the_phases_as_events(
    traced: tuple[ThreadServer, InMemorySpanExporter],
) -> None:
    server, exporter = traced
    events_sent = 0
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for _ in range(3):
            with client.stream("POST", "/v1/chat/completions", json={**BODY, "stream": True}) as r:
                assert r.status_code == 200
                events_sent += sum(1 for line in r.iter_lines() if line.startswith("data:"))
        assert client.post("/v1/chat/completions", json=BODY).status_code == 200
        assert client.get("/v1/models").status_code == 200
    wait_for(lambda: len(exporter.get_finished_spans()) >= 5, timeout_s=10, what="5 spans")

    spans = exporter.get_finished_spans()
    assert events_sent >= 3 * 6  # role, 4 content events, finish, usage, [DONE] per stream
    assert len(spans) == 5  # one per request, not one per SSE event
    chats = chat_spans(exporter)
    assert len(chats) == 4
    streamed, plain = chats[:3], chats[3]
    for span in streamed:
        assert [e.name for e in span.events] == STREAM_PHASES
        stamps = [e.timestamp for e in span.events]
        assert stamps == sorted(stamps)
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.start_time <= stamps[0]
        assert stamps[-1] <= span.end_time
        attributes = dict(span.attributes or {})
        assert attributes["http.route"] == "/v1/chat/completions"
        assert attributes["http.response.status_code"] == 200
        decode = next(e for e in span.events if e.name == "decode_end")
        assert dict(decode.attributes or {})["output_tokens"] == 8
        sign = next(e for e in span.events if e.name == "sign")
        assert {"sign_ms", "lock_wait_ms", "sign_queue_ms"} <= set(sign.attributes or {})
    assert [e.name for e in plain.events] == ["queue", "prefill", "decode_end", "sign"]
    (models,) = [s for s in spans if s.name == "GET /v1/models"]
    assert models.events == ()
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 5


def test_refused_requests_and_incoming_trace_context(
    traced: tuple[ThreadServer, InMemorySpanExporter],
) -> None:
    server, exporter = traced
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent = f"00-{trace_id}-00f067aa0ba902b7-01"
    response = httpx.post(
        server.url + "/v1/chat/completions",
        json={**BODY, "model": "no-such-model"},
        headers={"traceparent": parent},
        timeout=30,
    )
    assert response.status_code == 404
    wait_for(lambda: len(chat_spans(exporter)) == 1, timeout_s=10, what="the 404's span")
    (span,) = chat_spans(exporter)
    assert dict(span.attributes or {})["http.response.status_code"] == 404
    assert span.events == ()  # refused before it queued
    assert span.context is not None
    assert format(span.context.trace_id, "032x") == trace_id
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == "00f067aa0ba902b7"


def test_no_tracing_unless_configured(redis_server: EmbeddedRedis) -> None:
    app = create_app(load_settings(redis_url=redis_server.url))
    names = [m.cls.__name__ for m in app.user_middleware]  # type: ignore[attr-defined]
    assert "TracingMiddleware" not in names
    traced = create_app(
        load_settings(redis_url=redis_server.url), span_exporter=InMemorySpanExporter()
    )
    assert next(m.cls.__name__ for m in traced.user_middleware) == "TracingMiddleware"  # type: ignore[attr-defined]


def test_an_empty_endpoint_is_off_and_a_bad_one_is_named() -> None:
    assert load_settings(tracing={"otlp_endpoint": ""}).tracing.otlp_endpoint is None
    # Named as the nested field with its variable, like every other settings error (it was
    # "tracing={...whole section...} (env APP_TRACING)").
    named = re.escape("tracing.otlp_endpoint='ftp://collector' (env APP_TRACING__OTLP_ENDPOINT)")
    with pytest.raises(SettingsError, match=named):
        load_settings(tracing={"otlp_endpoint": "ftp://collector"})
    done = subprocess.run(
        [sys.executable, "-m", "target_service", "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        env={**TargetProcess().env, "APP_TRACING__OTLP_ENDPOINT": "collector:4318"},
    )  # fmt: skip
    assert done.returncode == 2
    assert "tracing.otlp_endpoint='collector:4318' (env APP_TRACING__OTLP_ENDPOINT)" in done.stderr
    assert "Traceback" not in done.stderr


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.mark.slow
def test_spans_reach_an_otlp_http_collector(redis_server: EmbeddedRedis) -> None:
    """A real target process exports to a real HTTP receiver on loopback, as it would to Jaeger."""
    _Collector.received = []
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    env = {
        "APP_REDIS_URL": redis_server.url,
        "APP_TRACING__OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
        "APP_TRACING__SERVICE_NAME": "target-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # the SDK's batch interval, ms
        "APP_LATENCY__ITL_MS": "2",
    }
    try:
        with TargetProcess(env) as target:
            with httpx.stream(
                "POST", target.url + "/v1/chat/completions", json={**BODY, "stream": True},
                timeout=30,
            ) as response:  # fmt: skip
                assert response.status_code == 200
                response.read()
            wait_for(lambda: bool(_Collector.received), timeout_s=20, what="an OTLP export")
    finally:
        collector.shutdown()
        collector.server_close()
    spans = []
    for path, content_type, body in _Collector.received:
        assert path == "/v1/traces"
        assert content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert attributes["service.name"] == "target-under-test"
            spans += [s for scope in resource_spans.scope_spans for s in scope.spans]
    (chat,) = [s for s in spans if s.name == "POST /v1/chat/completions"]
    assert [e.name for e in chat.events] == STREAM_PHASES
