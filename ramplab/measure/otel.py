"""One OpenTelemetry CLIENT span per HTTP attempt, carried to the target as W3C ``traceparent``.

This module imports OpenTelemetry at the top on purpose: it is itself imported only when
``--otlp-endpoint`` is set (``context.py``), so a run without tracing never loads the SDK and
its hot path pays one ``is None`` test per attempt (``chain.py``; measured in
docs/observability.md). The target continues the trace (``target_service/middleware/
tracing.py``): its SERVER span is the child of ours, in the same trace.

The tracer provider is this object's own, not OpenTelemetry's global one: nothing else in the
process (Locust's own ``--otel``, a user's instrumentation) is changed by it. Spans are batched
and exported by the SDK's background thread (a greenlet under Locust's monkey-patching), and
flushed when the process ends (``close``).
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["AttemptTracer"]

_PROPAGATOR = TraceContextTextMapPropagator()


class AttemptTracer:
    """Starts, propagates and ends the span of each attempt."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("ramplab")

    @classmethod
    def create(
        cls,
        endpoint: str,
        service_name: str,
        sample_ratio: float,
        worker: str,
        exporter: SpanExporter | None = None,
    ) -> AttemptTracer:
        """Export to ``endpoint`` (a base URL: ``/v1/traces`` is added) or to ``exporter``."""
        provider = TracerProvider(
            resource=Resource.create({"service.name": service_name, "service.instance.id": worker}),
            sampler=ParentBased(TraceIdRatioBased(sample_ratio)),
        )
        sink = exporter or OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(sink))
        return cls(provider)

    def start(self, url: str, attempt: int) -> tuple[Span, dict[str, str]]:
        """The attempt's span, started now, and the headers that carry it."""
        span = self.tracer.start_span(
            "POST",
            kind=SpanKind.CLIENT,
            attributes={"http.request.method": "POST", "url.full": url, "ramplab.attempt": attempt},
        )
        headers: dict[str, str] = {}
        _PROPAGATOR.inject(headers, context=trace.set_span_in_context(span))
        return span, headers

    def end(self, span: Span, status: int | None, error_kind: str | None) -> None:
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if error_kind is not None:
            span.set_attribute("error.type", error_kind)
            span.set_status(Status(StatusCode.ERROR, error_kind))
        span.end()

    def close(self, timeout_ms: int = 5000) -> None:
        """Export what is still batched, then stop (the end of the process)."""
        self.provider.force_flush(timeout_ms)
        self.provider.shutdown()
