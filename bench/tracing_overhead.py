"""What a CLIENT span per request costs the generator: tracing off vs on, same run.

One process drives ``RequestChain.run`` — the code every Locust user runs per request — in a
loop against a real, unpaced target (64 one-token SSE events per stream, so the client's own
work dominates). Off is the default (``tracer=None``: OpenTelemetry is not even imported); on
is an ``AttemptTracer`` with the SDK's batch processor, its exporter discarding the batches, so
what is measured is the generator's side (span start, ``traceparent`` injection, span end,
batching, the batch thread included), not the encoding, the network export or a collector.

The figure of merit is this process's CPU time per request (``time.process_time``; the target
is another process), off/on/on/off three times (ABBA). The off path's own cost, one ``is None``
test per attempt, is also timed alone.
"""

from __future__ import annotations

import statistics
import time
import timeit
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from bench.servers import UNPACED, target
from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.otel import AttemptTracer
from ramplab.options.settings import UserSettings
from ramplab.plugin.context import UserContext

REQUESTS = 200
TOKENS = 64
ORDER = ((False, True), (True, False), (False, True))


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def one_run(context: UserContext, tracer: AttemptTracer | None) -> float:
    """CPU seconds per request over ``REQUESTS`` requests."""
    chain = RequestChain(context.new_client(), Endpoint(context.url, 60.0), tracer=tracer)
    body = {
        "model": context.model(),
        "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": TOKENS,
        "ignore_eos": True,
        "chunk_size": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chain.run(body)  # a connection, before the clock starts
    started = time.process_time()
    for _ in range(REQUESTS):
        record = chain.run(body)
        assert record.ok, record.error_detail
    cpu = time.process_time() - started
    chain.client.close()
    return cpu / REQUESTS


def run() -> str:
    off: list[float] = []
    on: list[float] = []
    with target(UNPACED) as port:
        context = UserContext.create(UserSettings(), f"http://127.0.0.1:{port}", "bench")
        tracer = AttemptTracer.create("http://unused", "ramplab", 1.0, "bench", Discard())
        for pair in ORDER:
            for traced in pair:
                (on if traced else off).append(one_run(context, tracer if traced else None))
        tracer.close()
    check = timeit.Timer("tracer is not None", globals={"tracer": None})
    loops, total = check.autorange()
    off_check_ns = total / loops * 1e9
    off_us, on_us = statistics.median(off) * 1e6, statistics.median(on) * 1e6
    return (
        "## Tracing overhead (generator side)\n\n"
        f"`RequestChain.run` against an unpaced target, {TOKENS} one-token SSE events per "
        f"stream, {REQUESTS} requests per run, runs off/on ABBA (3 each); CPU time of the "
        "generator's process per request, median of the runs. On: a CLIENT span per attempt, "
        "`traceparent` injected, batched by the SDK's thread (counted: process time covers "
        "every thread), exporter discarding (protobuf encoding and the HTTP export are not "
        "counted).\n\n"
        "| tracing | CPU µs / request | runs (µs) |\n|---|---|---|\n"
        f"| off (default) | {off_us:.0f} | {', '.join(f'{v * 1e6:.0f}' for v in off)} |\n"
        f"| on | {on_us:.0f} | {', '.join(f'{v * 1e6:.0f}' for v in on)} |\n\n"
        f"On / off: **{on_us / off_us:.3f}**. The off path's own cost is one `is None` test "
        f"per attempt: {off_check_ns:.0f} ns, {off_check_ns / (off_us * 1e3) * 100:.4f} % of "
        "a request's CPU time.\n"
    )


if __name__ == "__main__":
    print(run())
