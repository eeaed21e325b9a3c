"""The shipped dashboards; each answers one question about a campaign.

Every query names a metric that exists: the load generator's (``ramplab/metrics/exporter.py``), the
target's (``target_service/metrics.py``) or a recording rule (``prometheus/rules/recording.yml``).
The end-to-end test evaluates every one against a real Prometheus after a real ramp.
"""

from __future__ import annotations

from ramplab.metrics.dashboards.engine import inference_engine
from ramplab.metrics.dashboards.model import Dashboard, Panel, Query
from ramplab.metrics.dashboards.variables import LG, RS, VARIABLES

TARGET = 'job="target"'
QUANTILES = (0.5, 0.9, 0.99)


def _rate(rule: str, extra: str = "", by: str = "") -> str:
    """Sum of an ``instance:…:rate1m`` recording rule over the selected workers."""
    grouping = f" by ({by})" if by else ""
    selector = f"{LG}, {extra}" if extra else LG
    return f"sum{grouping} (instance:{rule}:rate1m{{{selector}}})"


def _quantiles(metric: str, extra: str = "") -> tuple[Query, ...]:
    """p50/p90/p99 over time from a histogram's per-worker bucket rates (summed, never averaged)."""
    selector = f"{LG}, {extra}" if extra else LG
    return tuple(
        Query(
            f"histogram_quantile({q}, sum by (le) (instance:{metric}_bucket:rate1m{{{selector}}}))",
            f"p{round(q * 100)}",
        )
        for q in QUANTILES
    )


def _per_step(metric: str, quantile: float, extra: str = "", by: str = "step") -> Query:
    """A quantile over the whole time range, per load step (or per offered rate)."""
    selector = f'{LG}, step!="none"' + (f", {extra}" if extra else "")
    legend = "step {{step}}" if by == "step" else "{{target_qps}} QPS"
    return Query(
        f"histogram_quantile({quantile}, sum by ({by}, le) "
        f"(increase({metric}_bucket{{{selector}}}[$__range])))",
        legend,
    )


def _mean(metric: str, extra: str, by: str) -> str:
    selector = f"{LG}, {extra}"
    return (
        f"sum by ({by}) (instance:{metric}_sum:rate1m{{{selector}}})"
        f" / sum by ({by}) (instance:{metric}_count:rate1m{{{selector}}})"
    )


def _target_mean(metric: str) -> str:
    return f"sum(rate({metric}_sum{{{TARGET}}}[1m])) / sum(rate({metric}_count{{{TARGET}}}[1m]))"


ERROR_RATIO = _rate("ramplab_requests", 'outcome="error"') + " / " + _rate("ramplab_requests")


def campaign_overview() -> Dashboard:
    return Dashboard(
        uid="ramplab-overview",
        title="ramplab / Campaign overview",
        description="Is the generator delivering the schedule, and how much of it succeeds?",
        variables=VARIABLES,
        panels=(
            Panel(
                "Target vs achieved QPS",
                "The schedule's rate (master), the arrivals the workers reached, and the "
                "requests that finished. Achieved below target means drops or a slow target.",
                (
                    Query(f"sum(ramplab_target_qps{{{RS}}})", "target"),
                    Query(_rate("ramplab_arrivals_scheduled"), "scheduled"),
                    Query(_rate("ramplab_requests"), "finished"),
                ),
                unit="reqps",
            ),
            Panel(
                "Users and workers",
                "Locust users over all workers (Little's law sizing) and connected workers.",
                (
                    Query(f"sum(ramplab_users{{{RS}}})", "users"),
                    Query(f"sum(ramplab_workers{{{RS}}})", "workers"),
                ),
                width=6,
            ),
            Panel(
                "Current step",
                "Index of the load step the master is in.",
                (Query(f"max(ramplab_step{{{RS}}})", "step"),),
                kind="stat",
                width=6,
            ),
            Panel(
                "Dropped arrivals",
                "Arrivals no free user could take in time: the offered load fell short of the "
                "schedule (coordinated omission made visible, not hidden).",
                (Query(_rate("ramplab_arrivals_dropped"), "dropped"),),
                unit="reqps",
                width=8,
            ),
            Panel(
                "Errors by status",
                "Failed requests per second by final HTTP status and error kind.",
                (
                    Query(
                        _rate("ramplab_requests", 'outcome="error"', "status, error_kind"),
                        "{{status}} {{error_kind}}",
                    ),
                ),
                unit="reqps",
                stack=True,
                width=8,
            ),
            Panel(
                "Goodput",
                "Requests per second that met every SLO of the campaign, against all finished.",
                (
                    Query(_rate("ramplab_goodput_requests"), "goodput"),
                    Query(_rate("ramplab_requests"), "finished"),
                ),
                unit="reqps",
                width=8,
            ),
            Panel(
                "Output tokens per second",
                "Tokens received over all streams.",
                (Query(_rate("ramplab_output_tokens"), "tokens/s"),),
                width=12,
            ),
            Panel(
                "Error ratio",
                "Share of finished requests that failed (after retries).",
                (Query(ERROR_RATIO, "errors"),),
                unit="percentunit",
                kind="stat",
                width=12,
            ),
        ),
    )


def streaming_latency() -> Dashboard:
    start = 'start="intended"'
    return Dashboard(
        uid="ramplab-latency",
        title="ramplab / Streaming latency",
        description="How long until the first token, between tokens, and until the last?",
        variables=VARIABLES,
        panels=(
            Panel(
                "TTFT (from the intended start)",
                "Time to the first token-bearing event, counted from when the schedule wanted "
                "the request sent.",
                _quantiles("ramplab_ttft_seconds", start),
                unit="s",
            ),
            Panel(
                "TTLT (from the intended start)",
                "Time to the last token-bearing event.",
                _quantiles("ramplab_ttlt_seconds", start),
                unit="s",
            ),
            Panel(
                "Inter-token latency",
                "Gap between token-bearing events, one observation per token.",
                _quantiles("ramplab_inter_token_seconds"),
                unit="s",
            ),
            Panel(
                "TPOT",
                "(TTLT - TTFT) / (output tokens - 1), one observation per request.",
                _quantiles("ramplab_tpot_seconds"),
                unit="s",
            ),
            Panel(
                "TTFT p99: intended vs actual send",
                "The gap is the generator's own lateness (coordinated omission).",
                (
                    Query(_quantiles("ramplab_ttft_seconds", start)[2].expr, "from intended"),
                    Query(
                        _quantiles("ramplab_ttft_seconds", 'start="actual"')[2].expr,
                        "from actual send",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Schedule lateness",
                "Actual send minus intended start.",
                _quantiles("ramplab_schedule_lateness_seconds"),
                unit="s",
            ),
            Panel(
                "TTFT p99 per step",
                "Over the whole time range, one bar per load step.",
                (_per_step("ramplab_ttft_seconds", 0.99, start),),
                unit="s",
                kind="bargauge",
                width=6,
            ),
            Panel(
                "ITL p99 per step",
                "Over the whole time range, one bar per load step.",
                (_per_step("ramplab_inter_token_seconds", 0.99),),
                unit="s",
                kind="bargauge",
                width=6,
            ),
            Panel(
                "TPOT p50 per step",
                "Over the whole time range, one bar per load step.",
                (_per_step("ramplab_tpot_seconds", 0.5),),
                unit="s",
                kind="bargauge",
                width=6,
            ),
            Panel(
                "TTLT p99 per step",
                "Over the whole time range, one bar per load step.",
                (_per_step("ramplab_ttlt_seconds", 0.99, start),),
                unit="s",
                kind="bargauge",
                width=6,
            ),
        ),
    )


def token_rate_decay() -> Dashboard:
    rate = "ramplab_stream_tokens_per_second"
    return Dashboard(
        uid="ramplab-decay",
        title="ramplab / Token-rate decay",
        description="Where does each stream's token rate fall as the offered QPS rises (§4.2)?",
        variables=VARIABLES,
        panels=(
            Panel(
                "Tokens/s per stream over time",
                "Median and slow (p10) streams' token rate, with the offered rate beside it.",
                (
                    Query(
                        f"histogram_quantile(0.5, sum by (le) "
                        f"(instance:{rate}_bucket:rate1m{{{LG}}}))",
                        "p50 tokens/s",
                    ),
                    Query(
                        f"histogram_quantile(0.1, sum by (le) "
                        f"(instance:{rate}_bucket:rate1m{{{LG}}}))",
                        "p10 tokens/s",
                    ),
                    Query(f"sum(ramplab_target_qps{{{RS}}})", "offered QPS"),
                ),
            ),
            Panel(
                "Tokens/s per stream against offered QPS",
                "Median stream rate per step's target rate over the whole range: the decay curve.",
                (_per_step(rate, 0.5, by="target_qps"),),
                kind="bargauge",
            ),
            Panel(
                "Slow streams against offered QPS",
                "p10 stream rate per step's target rate.",
                (_per_step(rate, 0.1, by="target_qps"),),
                kind="bargauge",
                width=8,
            ),
            Panel(
                "Aggregate output tokens/s",
                "All streams together (client view) and what the target sent.",
                (
                    Query(_rate("ramplab_output_tokens"), "received"),
                    Query(f"sum(rate(target_output_tokens_total{{{TARGET}}}[1m]))", "sent"),
                ),
                width=8,
            ),
            Panel(
                "Server tokens/s per running sequence",
                "Target output rate divided by the sequences decoding: the server-side decay.",
                (
                    Query(
                        f"sum(rate(target_output_tokens_total{{{TARGET}}}[1m]))"
                        f" / clamp_min(sum(target_running_sequences{{{TARGET}}}), 1)",
                        "tokens/s per sequence",
                    ),
                ),
                width=8,
            ),
        ),
    )


def latency_decomposition() -> Dashboard:
    return Dashboard(
        uid="ramplab-decomposition",
        title="ramplab / Latency decomposition",
        description="Where does a request's time go, on the client and on the server (§4.1)?",
        variables=VARIABLES,
        panels=(
            Panel(
                "Client phases (mean, stacked)",
                "DNS, connect, TLS, send, wait, first token, stream, as the client timed them.",
                (Query(_mean("ramplab_phase_seconds", 'side="client"', "phase"), "{{phase}}"),),
                unit="s",
                stack=True,
            ),
            Panel(
                "Server phases (mean, stacked)",
                "The phases the server disclosed (Server-Timing and the final timing event).",
                (Query(_mean("ramplab_phase_seconds", 'side="server"', "phase"), "{{phase}}"),),
                unit="s",
                stack=True,
            ),
            Panel(
                "p99 per phase",
                "Tail of each phase over time.",
                (
                    Query(
                        "histogram_quantile(0.99, sum by (side, phase, le) "
                        f"(instance:ramplab_phase_seconds_bucket:rate1m{{{LG}}}))",
                        "{{side}} {{phase}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Target: queue, prefill, TTFT",
                "The target's own view: time waiting for a slot, prefill, first token.",
                (
                    Query(f"job:target_queue_wait_seconds:p99_1m{{{TARGET}}}", "queue p99"),
                    Query(_target_mean("target_prefill_seconds"), "prefill mean"),
                    Query(f"job:target_ttft_seconds:p99_1m{{{TARGET}}}", "TTFT p99"),
                ),
                unit="s",
            ),
            Panel(
                "Target: signing inside decode",
                "Signature queue, lock wait and signing time per response (mean).",
                (
                    Query(_target_mean("target_sign_queue_seconds"), "sign queue"),
                    Query(_target_mean("target_sign_lock_wait_seconds"), "lock wait"),
                    Query(_target_mean("target_sign_seconds"), "sign"),
                ),
                unit="s",
                stack=True,
            ),
            Panel(
                "Target: HTTP duration p99 by route",
                "Whole response time per route template.",
                (
                    Query(
                        "histogram_quantile(0.99, sum by (route, le) "
                        f"(rate(target_http_request_duration_seconds_bucket{{{TARGET}}}[1m])))",
                        "{{route}}",
                    ),
                ),
                unit="s",
            ),
        ),
    )


def target_internals() -> Dashboard:
    return Dashboard(
        uid="ramplab-target",
        title="ramplab / Target internals",
        description="What is the reference target doing: slots, locks, Redis, faults, keys?",
        variables=VARIABLES,
        panels=(
            Panel(
                "Scheduler: running and waiting sequences",
                "Sequences holding a slot, requests waiting for one, open SSE streams.",
                (
                    Query(f"sum(target_running_sequences{{{TARGET}}})", "running"),
                    Query(f"sum(target_waiting_sequences{{{TARGET}}})", "waiting"),
                    Query(f"sum(target_active_streams{{{TARGET}}})", "open streams"),
                ),
            ),
            Panel(
                "Lock wait vs signing time",
                "Seconds per second spent blocked on the signing lock and computing signatures "
                "(§4.2: the lock's share grows with concurrency).",
                (
                    Query(
                        f"sum(rate(target_sign_lock_wait_seconds_sum{{{TARGET}}}[1m]))", "lock wait"
                    ),
                    Query(f"sum(rate(target_sign_seconds_sum{{{TARGET}}}[1m]))", "signing"),
                ),
                unit="s",
            ),
            Panel(
                "Lock-wait share",
                "Lock wait / (lock wait + signing).",
                (
                    Query(
                        f"sum(rate(target_sign_lock_wait_seconds_sum{{{TARGET}}}[1m])) / "
                        f"(sum(rate(target_sign_lock_wait_seconds_sum{{{TARGET}}}[1m])) + "
                        f"sum(rate(target_sign_seconds_sum{{{TARGET}}}[1m])))",
                        "lock share",
                    ),
                ),
                unit="percentunit",
                kind="stat",
                width=6,
            ),
            Panel(
                "Signing p99",
                "Lock wait and signing time, 99th percentile.",
                (
                    Query(f"job:target_sign_lock_wait_seconds:p99_1m{{{TARGET}}}", "lock wait"),
                    Query(f"job:target_sign_seconds:p99_1m{{{TARGET}}}", "sign"),
                ),
                unit="s",
                width=6,
            ),
            Panel(
                "Redis pool",
                "Connections checked out and callers waiting for one (pool of 32, §4.2).",
                (
                    Query(f"sum(target_redis_pool_connections_in_use{{{TARGET}}})", "in use"),
                    Query(f"sum(target_redis_pool_waiting_callers{{{TARGET}}})", "waiting"),
                ),
                width=6,
            ),
            Panel(
                "Redis pool wait p99",
                "Time to get a connection from the pool.",
                (Query(f"job:target_redis_pool_wait_seconds:p99_1m{{{TARGET}}}", "p99"),),
                unit="s",
                width=6,
            ),
            Panel(
                "Faults injected",
                "Failures injected on purpose, per second, by kind.",
                (
                    Query(
                        f"sum by (kind) (rate(target_injected_faults_total{{{TARGET}}}[1m]))",
                        "{{kind}}",
                    ),
                ),
                unit="reqps",
                stack=True,
                width=8,
            ),
            Panel(
                "Rate-limited requests",
                "Requests refused with 429 by the GCRA limiter, by scope.",
                (
                    Query(
                        f"sum by (scope) (rate(target_ratelimited_requests_total{{{TARGET}}}[1m]))",
                        "{{scope}}",
                    ),
                ),
                unit="reqps",
                width=8,
            ),
            Panel(
                "Key rotations and tokens",
                "JWT signing keys generated and access tokens issued over the time range.",
                (
                    Query(
                        f"sum(increase(target_jwt_keys_generated_total{{{TARGET}}}[$__range]))",
                        "keys generated",
                    ),
                    Query(
                        f"sum(increase(target_auth_tokens_issued_total{{{TARGET}}}[$__range]))",
                        "tokens issued",
                    ),
                ),
                kind="stat",
                width=8,
            ),
            Panel(
                "Completions by outcome",
                "How completions ended on the target.",
                (Query(f"job:target_completions:rate1m{{{TARGET}}}", "{{outcome}}"),),
                unit="reqps",
                stack=True,
            ),
            Panel(
                "Threads",
                "Live threads and signing-pool threads over the target's processes.",
                (
                    Query(f"sum(target_threads{{{TARGET}}})", "threads"),
                    Query(f"sum(target_signing_threads{{{TARGET}}})", "signing threads"),
                ),
            ),
        ),
    )


def retries_and_recovery() -> Dashboard:
    return Dashboard(
        uid="ramplab-retries",
        title="ramplab / Retries and recovery",
        description="What do retries cost, and how fast does goodput recover after faults (§4.4)?",
        variables=VARIABLES,
        panels=(
            Panel(
                "Attempts vs requests",
                "HTTP attempts (retries included) against finished requests.",
                (
                    Query(_rate("ramplab_attempts"), "attempts"),
                    Query(_rate("ramplab_requests"), "requests"),
                ),
                unit="reqps",
            ),
            Panel(
                "Retry amplification",
                "Attempts per finished request (1 = no retries).",
                (
                    Query(
                        f"{_rate('ramplab_attempts')} / {_rate('ramplab_requests')}",
                        "amplification",
                    ),
                ),
            ),
            Panel(
                "Retries by status",
                "Retried attempts per second by the status of the attempt that failed.",
                (Query(_rate("ramplab_retries", by="status"), "{{status}}"),),
                unit="reqps",
                stack=True,
            ),
            Panel(
                "Outcome over time",
                "Successful and failed requests per second: after an outage, the time until "
                "failures fall back to zero is the recovery time.",
                (
                    Query(_rate("ramplab_requests", 'outcome="ok"'), "ok"),
                    Query(_rate("ramplab_requests", 'outcome="error"'), "error"),
                    Query(_rate("ramplab_goodput_requests"), "goodput"),
                ),
                unit="reqps",
            ),
            Panel(
                "Seconds since the last failure",
                "Counts up from the last failed request (over the last hour): after an outage "
                "ends, it is how long the run has been clean again.",
                (
                    Query(
                        "time() - max(max_over_time((timestamp(sum(increase("
                        f'ramplab_requests_total{{{LG}, outcome="error"}}[5s])) > 0))[1h:1s]))',
                        "seconds",
                    ),
                ),
                unit="s",
                kind="stat",
                width=6,
            ),
            Panel(
                "Target refusals",
                "429 and 503 the target sent (rate limits, injected faults), per second.",
                (
                    Query(
                        "sum by (status) (rate(target_http_request_duration_seconds_count"
                        f'{{{TARGET}, status=~"429|503"}}[1m]))',
                        "{{status}}",
                    ),
                ),
                unit="reqps",
            ),
            Panel(
                "Error ratio after retries",
                "Share of requests that still failed after their retries.",
                (Query(ERROR_RATIO, "error ratio"),),
                unit="percentunit",
            ),
        ),
    )


def all_dashboards() -> tuple[Dashboard, ...]:
    """The shipped dashboards, in the order the README lists them."""
    return (
        campaign_overview(),
        streaming_latency(),
        token_rate_decay(),
        latency_decomposition(),
        target_internals(),
        retries_and_recovery(),
        inference_engine(),
    )
