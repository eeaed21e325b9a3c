"""OpenTelemetry traces of the target: one span per HTTP request, its phases as span events.

Design decisions:

- One SERVER span per request (``middleware/tracing.py``), never one per ``send()``: the ASGI
  instrumentation's default makes a span for every SSE event, thousands per stream, which costs
  more than the work it traces. A completion's phases — ``queue``, ``prefill``, ``first_token``,
  ``decode_end``, ``sign`` — are events on that one span, stamped when they happen.
- The code that marks a phase calls :func:`event`, which finds the request's span through a
  context variable: it imports nothing from OpenTelemetry and costs one ``ContextVar.get`` when
  tracing is off. sse-starlette streams from a child task, which inherits the variable.
- Tracing is on only when ``tracing.otlp_endpoint`` is set (``APP_TRACING__OTLP_ENDPOINT``); spans
  go out over OTLP/HTTP (protobuf) in batches. OpenTelemetry is the optional extra
  ``ramplab[tracing]`` and is imported only then. The provider is passed in, never global.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from target_service.errors import TracingUnavailable
from target_service.settings import TracingSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

#: The instrumentation scope name of every span the target makes.
TRACER_NAME = "target_service"
PHASES = ("queue", "prefill", "first_token", "decode_end", "sign")


class _Span(Protocol):
    def add_event(self, name: str, attributes: Any = None, timestamp: Any = None) -> None: ...


current_span: ContextVar[_Span | None] = ContextVar("target_span", default=None)


def event(name: str, **attributes: float | int | str) -> None:
    """Mark a phase on the current request's span (nothing when tracing is off)."""
    span = current_span.get()
    if span is not None:
        span.add_event(name, attributes)


def require_sdk(settings: TracingSettings) -> None:
    """Check at start-up that tracing, when configured, can run; raises TracingUnavailable."""
    if settings.otlp_endpoint is None:
        return
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise TracingUnavailable(
            f"tracing.otlp_endpoint={settings.otlp_endpoint!r} (env APP_TRACING__OTLP_ENDPOINT) "
            "needs OpenTelemetry: pip install 'ramplab[tracing]'"
        ) from exc


def build_provider(
    settings: TracingSettings, exporter: SpanExporter | None = None
) -> TracerProvider | None:
    """A tracer provider exporting to ``exporter`` (tests) or to the OTLP endpoint; ``None``
    when neither is given, which leaves tracing off."""
    if exporter is None and settings.otlp_endpoint is None:
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError as exc:
        raise TracingUnavailable(
            f"tracing.otlp_endpoint={settings.otlp_endpoint!r} needs OpenTelemetry: "
            "pip install 'ramplab[tracing]'"
        ) from exc
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": settings.service_name, "process.pid": os.getpid()}
        ),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
    )
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        assert settings.otlp_endpoint is not None
        endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider
