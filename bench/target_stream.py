"""Target streaming throughput against bare sse-starlette, and pacing error under load.

Both servers run as one process each on loopback, driven by the same asyncio client in this
process (the machine has two cores: one for the server, one for the client). Both stay up for the
whole comparison and take turns, ``ROUNDS`` times per chunk size: the machine is shared, so a burst
of someone else's load hits both alike, and the section quotes the median of the per-round ratios.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics

import httpx
import numpy as np

from bench.loadclient import one_stream, run_for
from bench.servers import UNPACED, bare_sse, target

TOKENS = 256
CONCURRENCY = 32
DURATION_S = 4.0
ROUNDS = 5
WARM_UP_S = 1.0


def _body(chunk: int, tokens: int = TOKENS) -> dict[str, object]:
    return {
        "model": "ramplab-sim-1",
        "messages": [{"role": "user", "content": "benchmark"}],
        "stream": True,
        "max_tokens": tokens,
        "ignore_eos": True,
        "chunk_size": chunk,
    }


def throughput(port: int, chunk: int) -> tuple[float, float]:
    streams, events, elapsed = asyncio.run(
        run_for("127.0.0.1", port, _body(chunk), CONCURRENCY, DURATION_S)
    )
    return events / elapsed, streams / elapsed


def pacing(concurrency: int = 200, tokens: int = 100, itl_ms: float = 20.0) -> dict[str, float]:
    env = {
        **UNPACED,
        "APP_LATENCY__ITL_MS": str(itl_ms),
        "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",
    }
    with target(env) as port:

        async def run() -> list[list[float]]:
            results = await asyncio.gather(
                *(
                    one_stream("127.0.0.1", port, _body(1, tokens), keep_times=True)
                    for _ in range(concurrency)
                )
            )
            return [r.event_times for r in results]

        all_times = asyncio.run(run())
    gaps = []
    spans = []
    for times in all_times:
        content = times[1 : 1 + tokens]  # skip the role event; keep the token events
        gaps.extend(b - a for a, b in itertools.pairwise(content))
        spans.append(content[-1] - content[0] - (tokens - 1) * itl_ms / 1000)
    errors_ms = (np.array(gaps) - itl_ms / 1000) * 1000
    drift_ms = np.array(spans) * 1000
    return {
        "gap_error_p50_ms": float(np.percentile(np.abs(errors_ms), 50)),
        "gap_error_p99_ms": float(np.percentile(np.abs(errors_ms), 99)),
        "span_error_p50_ms": float(np.percentile(drift_ms, 50)),
        "span_error_p99_ms": float(np.percentile(drift_ms, 99)),
    }


def _warm_up(port: int) -> None:
    # Keys for the JWKS are generated in a background thread right after start-up: let that and
    # the first connections' one-off costs pass before anything is measured.
    httpx.get(f"http://127.0.0.1:{port}/.well-known/jwks.json", timeout=30)
    asyncio.run(run_for("127.0.0.1", port, _body(1, 16), CONCURRENCY, WARM_UP_S))


def run() -> str:
    rows = []
    with bare_sse() as bare_port, target(UNPACED) as target_port:
        _warm_up(target_port)
        asyncio.run(run_for("127.0.0.1", bare_port, _body(1, 16), CONCURRENCY, WARM_UP_S))
        for chunk in (1, 16):
            cells: list[tuple[float, float, float, float]] = []
            for _ in range(ROUNDS):
                cells.append((*throughput(bare_port, chunk), *throughput(target_port, chunk)))
            bare_events = statistics.median(c[0] for c in cells)
            bare_streams = statistics.median(c[1] for c in cells)
            ours_events = statistics.median(c[2] for c in cells)
            ours_streams = statistics.median(c[3] for c in cells)
            event_ratios = [c[2] / c[0] for c in cells]
            stream_ratio = statistics.median(c[3] / c[1] for c in cells)
            rows.append(
                f"| {chunk} | {bare_events:,.0f} | {ours_events:,.0f} | "
                f"{statistics.median(event_ratios):.2f} | "
                f"{min(event_ratios):.2f}–{max(event_ratios):.2f} | "
                f"{bare_streams:,.1f} | {ours_streams:,.1f} | {stream_ratio:.2f} |"
            )
            print(rows[-1], flush=True)
    pace = pacing()
    lines = [
        "## Target streaming throughput (one process) vs bare sse-starlette",
        "",
        f"{CONCURRENCY} concurrent streams of {TOKENS} tokens, unpaced (ITL 0, prefill 0), "
        f"{DURATION_S:.0f} s per cell, one new connection per stream; auth and signing off."
        f" The two servers take turns, {ROUNDS} rounds per chunk size; medians of the rounds"
        " (the ratio columns: median of the per-round ratios; *rounds* gives their range, how"
        " much the load of other jobs on this shared machine moved them). Both servers get"
        f" {WARM_UP_S:.0f} s of load first.",
        "Goal: target ≥ 0.6× the bare endpoint.",
        "",
        "| chunk size | bare events/s | target events/s | ratio | rounds | bare streams/s "
        "| target streams/s | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "## Pacing error at 200 concurrent streams",
        "",
        "ITL 20 ms, 100 tokens per stream, chunk size 1, slowdown 0; gaps measured by the client "
        "when the bytes arrive. Span error = (last − first token) − 99 × 20 ms: drift, if any;"
        " negative when a late first token is followed by tokens that keep their absolute"
        " deadlines (they catch up instead of drifting).",
        "",
        "| gap error p50 | gap error p99 | span error p50 | span error p99 |",
        "|---:|---:|---:|---:|",
        f"| {pace['gap_error_p50_ms']:.2f} ms | {pace['gap_error_p99_ms']:.2f} ms | "
        f"{pace['span_error_p50_ms']:.2f} ms | {pace['span_error_p99_ms']:.2f} ms |",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
