"""The target's Prometheus metrics (prefix ``target_``, base units).

Several uvicorn workers each write their own samples; when ``PROMETHEUS_MULTIPROC_DIR`` is set
(``server.py`` sets it before forking) the values live in shared files and ``/metrics`` merges them
with ``MultiProcessCollector``, so any worker's scrape shows the sum over all workers. Gauges use
``livesum`` for the same reason.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.35, 0.5, 0.75,
    1.0, 1.5, 2.5, 5.0, 7.5, 10.0, 20.0, 30.0, 60.0, 120.0,
)  # fmt: skip
GAP_BUCKETS = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
    0.15, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip
TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 32768, 131072)


class TargetMetrics:
    """All target metrics, registered on the registry passed in."""

    def __init__(self, registry: CollectorRegistry, multiproc_dir: str | None = None) -> None:
        self.registry = registry
        self.multiproc_dir = multiproc_dir
        self.request_duration = Histogram(
            "target_http_request_duration_seconds",
            "Time from request start to the end of the response body, by route template.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.ttft = Histogram(
            "target_ttft_seconds",
            "Server-side time from request arrival to sending the first output token.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.inter_token = Histogram(
            "target_inter_token_seconds",
            "Gap between consecutive token-bearing events, divided by the tokens in the event.",
            buckets=GAP_BUCKETS,
            registry=registry,
        )
        self.queue_wait = Histogram(
            "target_queue_wait_seconds",
            "Time a request waited for a scheduler slot.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.prefill = Histogram(
            "target_prefill_seconds",
            "Simulated prefill time.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.output_tokens = Histogram(
            "target_completion_tokens",
            "Output tokens per completion.",
            buckets=TOKEN_BUCKETS,
            registry=registry,
        )
        self.prompt_tokens_total = Counter(
            "target_prompt_tokens", "Prompt tokens received.", registry=registry
        )
        self.output_tokens_total = Counter(
            "target_output_tokens", "Output tokens sent.", registry=registry
        )
        self.prefix_cache_lookups_total = Counter(
            "target_prefix_cache_lookups",
            "Prompts looked up in the prefix cache (only while it is enabled).",
            registry=registry,
        )
        self.prefix_cache_hits_total = Counter(
            "target_prefix_cache_hits",
            "Prefix-cache lookups that found at least one cached block.",
            registry=registry,
        )
        self.prefix_cache_queried_tokens_total = Counter(
            "target_prefix_cache_queried_tokens",
            "Prompt tokens of the prompts looked up in the prefix cache.",
            registry=registry,
        )
        self.prefix_cache_hit_tokens_total = Counter(
            "target_prefix_cache_hit_tokens",
            "Prompt tokens served from the prefix cache (reported as cached_tokens).",
            registry=registry,
        )
        self.prefix_cache_blocks = Gauge(
            "target_prefix_cache_blocks",
            "Blocks held in the prefix caches (summed over worker processes).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.completions_total = Counter(
            "target_completions",
            "Completions by how they ended.",
            ["outcome"],
            registry=registry,
        )
        self.rejected_total = Counter(
            "target_rejected_requests",
            "Requests refused before generation, by reason.",
            ["reason"],
            registry=registry,
        )
        self.disconnects_total = Counter(
            "target_client_disconnects",
            "Streams ended because the client went away or stopped reading.",
            ["kind"],
            registry=registry,
        )
        self.running = Gauge(
            "target_running_sequences",
            "Sequences holding a scheduler slot.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.waiting = Gauge(
            "target_waiting_sequences",
            "Requests waiting for a scheduler slot.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.active_streams = Gauge(
            "target_active_streams",
            "SSE responses currently open.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.redis_errors_total = Counter(
            "target_redis_errors",
            "Redis operations that failed or timed out.",
            ["operation"],
            registry=registry,
        )

        self.redis_pool_in_use = Gauge(
            "target_redis_pool_connections_in_use",
            "Redis connections checked out of the pool.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.redis_pool_waiting = Gauge(
            "target_redis_pool_waiting_callers",
            "Callers waiting for a free Redis connection.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.redis_pool_wait = Histogram(
            "target_redis_pool_wait_seconds",
            "Time to obtain a Redis connection from the pool (connect included when new).",
            buckets=GAP_BUCKETS,
            registry=registry,
        )
        self.sign_queue = Histogram(
            "target_sign_queue_seconds",
            "Time from asking for a response signature until a signing thread runs it.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.sign_lock_wait = Histogram(
            "target_sign_lock_wait_seconds",
            "Time blocked on the signing lock (locked mode; 0 in the other modes).",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.sign_duration = Histogram(
            "target_sign_seconds",
            "Time computing a response signature.",
            ["mode"],
            buckets=GAP_BUCKETS,
            registry=registry,
        )
        self.auth_failures_total = Counter(
            "target_auth_failures",
            "Requests refused with 401, by reason.",
            ["reason"],
            registry=registry,
        )
        self.tokens_issued_total = Counter(
            "target_auth_tokens_issued", "Access tokens issued.", registry=registry
        )
        self.key_rotations_total = Counter(
            "target_jwt_keys_generated",
            "Signing keys generated for the shared key ring (one per period over all processes).",
            registry=registry,
        )
        self.ratelimited_total = Counter(
            "target_ratelimited_requests",
            "Requests refused with 429 by the GCRA limiter, by scope.",
            ["scope"],
            registry=registry,
        )
        self.faults_total = Counter(
            "target_injected_faults",
            "Failures injected on purpose, by kind.",
            ["kind"],
            registry=registry,
        )
        self.processes = Gauge(
            "target_worker_processes",
            "Configured target worker processes.",
            registry=registry,
            multiprocess_mode="max",
        )
        self.threads = Gauge(
            "target_threads",
            "Live threads, summed over worker processes.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.signing_threads = Gauge(
            "target_signing_threads",
            "Threads of the signing pool, summed over worker processes.",
            registry=registry,
            multiprocess_mode="livesum",
        )

    def observe_scheduler(self, running: int, waiting: int) -> None:
        self.running.set(running)
        self.waiting.set(waiting)

    def render(self) -> bytes:
        if self.multiproc_dir:
            merged = CollectorRegistry()
            MultiProcessCollector(merged, path=self.multiproc_dir)  # type: ignore[no-untyped-call]
            return generate_latest(merged)
        return generate_latest(self.registry)
