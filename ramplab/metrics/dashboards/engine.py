"""The inference engine's dashboard: what the server says about itself, beside what the clients
measured.

vLLM's own ``/metrics`` (its v1 engine's names, the ones ``ramplab/results/engine.py`` reads) is
the first choice of every query; where the reference target (``target_service/metrics.py``)
models the same figure, the query falls back to its series with PromQL's ``or``, so a stack
without an engine still shows its simulator here. KV-cache usage, end-to-end and decode time
have no counterpart on the target and stay empty there. SGLang's and TGI's names are not
queried (docs/observability.md).

The server's series are not filtered by job: Prometheus scrapes the engine as job ``engine``
(``ENGINE_METRICS`` in compose, docs/observability.md) or, in ``ramplab run --prometheus
--target URL``, as job ``target``; their names alone say they are the engine's. One engine per
Prometheus: two would be summed.
"""

from __future__ import annotations

from ramplab.metrics.dashboards.model import Dashboard, Panel, Query
from ramplab.metrics.dashboards.variables import LG, VARIABLES

UID = "ramplab-engine"
QUANTILES = (0.5, 0.99)


def _either(vllm: str, target: str | None) -> str:
    """vLLM's figure, or the reference target's where vLLM exposes none."""
    return vllm if target is None else f"{vllm} or {target}"


def _rate(counter: str, selector: str = "") -> str:
    return f"sum(rate({counter}{{{selector}}}[1m]))"


def _server_quantile(q: float, vllm: str, target: str | None) -> str:
    def one(histogram: str) -> str:
        return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{{}}[1m])))"

    return _either(one(vllm), None if target is None else one(target))


def _server(vllm: str, target: str | None = None) -> tuple[Query, ...]:
    """Server p50 and p99 of one of the engine's histograms."""
    return tuple(
        Query(_server_quantile(q, vllm, target), f"server p{round(q * 100)}") for q in QUANTILES
    )


def _client(metric: str, extra: str = "") -> tuple[Query, ...]:
    """Client p50 and p99 from ramplab's per-worker bucket rates (recording rules)."""
    selector = f"{LG}, {extra}" if extra else LG
    return tuple(
        Query(
            f"histogram_quantile({q}, sum by (le) (instance:{metric}_bucket:rate1m{{{selector}}}))",
            f"client p{round(q * 100)}",
        )
        for q in QUANTILES
    )


def inference_engine() -> Dashboard:
    # From the actual send: the server cannot see the generator's own lateness.
    actual = 'start="actual"'
    return Dashboard(
        uid=UID,
        title="ramplab / Inference engine",
        description="What does the server say about itself, beside what the clients measured?",
        variables=VARIABLES,
        panels=(
            Panel(
                "Requests running and waiting",
                "Requests in the engine's batch and requests queued for a place in it.",
                (
                    Query(
                        _either(
                            "sum(vllm:num_requests_running{})", "sum(target_running_sequences{})"
                        ),
                        "running",
                    ),
                    Query(
                        _either(
                            "sum(vllm:num_requests_waiting{})", "sum(target_waiting_sequences{})"
                        ),
                        "waiting",
                    ),
                ),
            ),
            Panel(
                "KV-cache usage",
                "Share of the KV cache's blocks in use (vLLM only).",
                (Query("max(vllm:kv_cache_usage_perc{})", "KV cache"),),
                unit="percentunit",
                width=6,
            ),
            Panel(
                "Prefix-cache hit rate",
                "Prompt tokens found in the prefix cache over prompt tokens looked up, over the "
                "last minute.",
                (
                    Query(
                        _either(
                            f"{_rate('vllm:prefix_cache_hits_total')} / "
                            f"{_rate('vllm:prefix_cache_queries_total')}",
                            f"{_rate('target_prefix_cache_hit_tokens_total')} / "
                            f"{_rate('target_prefix_cache_queried_tokens_total')}",
                        ),
                        "hit rate",
                    ),
                ),
                unit="percentunit",
                width=6,
            ),
            Panel(
                "Tokens per second: server and client",
                "The server's prompt and generation counters, and the output tokens ramplab's "
                "clients received. Generated and received agree unless streams were cut.",
                (
                    Query(
                        _either(
                            _rate("vllm:prompt_tokens_total"), _rate("target_prompt_tokens_total")
                        ),
                        "server prompt",
                    ),
                    Query(
                        _either(
                            _rate("vllm:generation_tokens_total"),
                            _rate("target_output_tokens_total"),
                        ),
                        "server generated",
                    ),
                    Query(f"sum(instance:ramplab_output_tokens:rate1m{{{LG}}})", "client received"),
                ),
            ),
            Panel(
                "Requests finished per second: server and client",
                "Requests the server finished successfully, and requests ramplab's clients "
                "finished (errors included).",
                (
                    Query(
                        _either(
                            _rate("vllm:request_success_total"),
                            _rate("target_completions_total", 'outcome="completed"'),
                        ),
                        "server",
                    ),
                    Query(f"sum(instance:ramplab_requests:rate1m{{{LG}}})", "client"),
                ),
                unit="reqps",
            ),
            Panel(
                "TTFT: server and client",
                "The server's time to the first token against the client's, from the actual "
                "send: the difference is the network, the HTTP stack and the client's own reads.",
                (
                    *_server("vllm:time_to_first_token_seconds", "target_ttft_seconds"),
                    *_client("ramplab_ttft_seconds", actual),
                ),
                unit="s",
            ),
            Panel(
                "Inter-token latency: server and client",
                "Gaps between tokens as the engine produced them and as the client read them "
                "(a client on a busy machine reads them bunched: docs/engines.md).",
                (
                    *_server("vllm:inter_token_latency_seconds", "target_inter_token_seconds"),
                    *_client("ramplab_inter_token_seconds"),
                ),
                unit="s",
            ),
            Panel(
                "End to end: server and client",
                "The server's request latency (vLLM only) against the client's time to the last "
                "token, from the actual send.",
                (
                    *_server("vllm:e2e_request_latency_seconds"),
                    *_client("ramplab_ttlt_seconds", actual),
                ),
                unit="s",
            ),
            Panel(
                "Queue time",
                "From arrival at the engine to its first scheduling.",
                _server("vllm:request_queue_time_seconds", "target_queue_wait_seconds"),
                unit="s",
                width=8,
            ),
            Panel(
                "Prefill time",
                "Computing the prompt's KV cache, once scheduled.",
                _server("vllm:request_prefill_time_seconds", "target_prefill_seconds"),
                unit="s",
                width=8,
            ),
            Panel(
                "Decode time",
                "From the first token to the last (vLLM only).",
                _server("vllm:request_decode_time_seconds"),
                unit="s",
                width=8,
            ),
        ),
    )
