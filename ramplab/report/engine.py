"""The server's own figures in the report: its Prometheus endpoint beside the client's view.

Per step, what only the server knows (requests running and waiting, KV-cache use, prefix-cache
hits) and its histograms beside the client's exact figures: TTFT against TTFT from the send,
inter-token latency against ITL, end-to-end against TTLT from the send, and the queue, prefill
and decode phases that decompose the server's part (§4.1 on a real engine). The server's
percentiles are interpolated in its histogram buckets; its means are exact. Over the run, its
token and request counters against the client's own sums over every record.
"""

from __future__ import annotations

from typing import Any

from ramplab.report.tables import Table
from ramplab.results.offered import offered_load
from ramplab.results.summary import RunSummary

__all__ = ["ENGINE_NOTE", "engine_table", "engine_totals"]

ENGINE_NOTE = (
    "From the server's own Prometheus endpoint, scraped each second (engine_metrics.jsonl). "
    "Gauges: mean/max of the scrapes in the step's window; server histograms: the requests it "
    "finished in the window (± the scrape interval), mean exact, p99 interpolated in its "
    "buckets. Client columns: exact; TTFT from the send, TTLT from the intended start."
)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"


def _hist(engine: dict[str, Any], name: str, key: str) -> Any:
    return (engine.get(f"{name}_ms") or {}).get(key)


def _gauge(engine: dict[str, Any], name: str, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    figure = engine.get(name)
    if not figure:
        return "-"
    return f"{fmt.format(figure['mean'] * scale)} / {fmt.format(figure['max'] * scale)}"


def _ratio(hits: Any, queries: Any) -> str:
    if not queries:
        return "-"
    return f"{100 * float(hits or 0) / float(queries):.1f} %"


def engine_table(summary: RunSummary) -> Table:
    """One row per step that has the server's figures; empty when no step has them."""
    headers = [
        "offered", "running mean/max", "waiting mean/max", "KV cache % mean/max",
        "prefix hits", "TTFT mean ms server / client", "TTFT p99 ms server / client",
        "ITL mean ms server / client", "E2E mean ms server / client TTLT", "queue mean ms",
        "prefill mean ms", "decode mean ms",
    ]  # fmt: skip
    body = []
    for step in summary.steps:
        e = step.engine
        if not e:
            continue
        value, unit = offered_load(step)
        body.append([
            f"{value:g} {unit}",
            _gauge(e, "running"),
            _gauge(e, "waiting"),
            _gauge(e, "kv_cache_usage", 100.0),
            _ratio(e.get("prefix_hits"), e.get("prefix_queries")),
            f"{_ms(_hist(e, 'ttft', 'mean'))} / {_ms(step.ttft_send_ms.mean)}",
            f"{_ms(_hist(e, 'ttft', 'p99'))} / {_ms(step.ttft_send_ms.p99)}",
            f"{_ms(_hist(e, 'itl', 'mean'))} / {_ms(step.itl_ms.mean)}",
            f"{_ms(_hist(e, 'e2e', 'mean'))} / {_ms(step.ttlt_ms.mean)}",
            _ms(_hist(e, "queue", "mean")),
            _ms(_hist(e, "prefill", "mean")),
            _ms(_hist(e, "decode", "mean")),
        ])  # fmt: skip
    return headers, body


def engine_totals(summary: RunSummary) -> str | None:
    """The server's counters over the run against the client's sums, one sentence."""
    totals = summary.engine
    if not totals:
        return None
    client = totals.get("client") or {}
    parts = []
    for name, label in (("prompt_tokens", "prompt tokens"),
                        ("generation_tokens", "output tokens"),
                        ("requests", "completed requests")):  # fmt: skip
        server = totals.get(name)
        if server is None or name not in client:
            continue
        mark = "=" if round(server) == client[name] else "≠"
        parts.append(f"{label} {server:.0f} {mark} {client[name]}")
    if not parts:
        return None
    return (
        f"the server ({totals['engine']}) counted over the run, against the client's records "
        "(warm-ups included): " + "; ".join(parts)
    )
