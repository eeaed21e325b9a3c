"""The load generator's Prometheus metrics (prefix ``ramplab_``, base units).

Each Locust worker owns one :class:`LoadMetrics` on a registry it passes in, feeds it every
finished :class:`~ramplab.measure.record.RequestRecord` and serves it with :func:`serve`;
Prometheus sums over workers. The master owns :class:`MasterGauges` for the run-level state.

Design decisions:

- ``LoadMetrics`` is a custom collector, not a set of ``prometheus_client`` metric objects. One
  record feeds a dozen series and one observation per token gap; prometheus_client takes a lock
  and resolves ``labels()`` per observation, which on a 256-token stream is hundreds of lock
  round trips. Here one lock is taken per record and the samples are built only on scrape
  (``bench/exporter_overhead.py`` measures the cost).
- ``run`` and ``scenario`` are constant labels on every series, so that one Prometheus can hold
  several runs and the dashboards' ``$run`` / ``$scenario`` variables select them.
- Label values that come from the outside (error kinds, phase names reported by an arbitrary
  server in ``Server-Timing``) are capped: past :data:`MAX_LABEL_VALUES` distinct values per label
  the rest are counted as ``other``, so a misbehaving server cannot explode cardinality.
- Latency histograms take only successful requests: an error answered in 1 ms is not a TTFT.
  Errors are counted in ``ramplab_requests_total`` by status and kind instead.
- The streaming histograms (TTFT, ITL, TPOT, TTLT, tokens/s per stream) carry the load step and
  its target rate (``step``, ``target_qps``; ``none`` outside a ramp), so that a dashboard can
  show percentiles per step and tokens/s against the offered rate. A ramp has tens of steps;
  past :data:`MAX_STEPS` the rest are counted as ``other``.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ramplab.measure.record import RequestRecord

#: Seconds: 1 ms … 2 min, dense around the 50 ms – 5 s of typical TTFT and TTLT.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.35, 0.5, 0.75,
    1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0,
)  # fmt: skip
#: Seconds per token: 0.1 ms … 2.5 s.
GAP_BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03,
    0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip
#: Output tokens per second of one stream.
RATE_BUCKETS: tuple[float, ...] = (
    1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000,
)  # fmt: skip

MAX_LABEL_VALUES = 32
MAX_STEPS = 64
OTHER = "other"
NONE = "none"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")

LabelValues = tuple[str, ...]


@dataclass(slots=True)
class _Buckets:
    """A classic histogram's state: per-bucket counts (last one is +Inf) and the sum."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def add(self, value: float) -> None:
        # bisect_left puts a value equal to a bound into that bound's bucket: Prometheus' `le`.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            out.append((_float_label(bound), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


def _float_label(value: float) -> str:
    # The same spelling prometheus_client uses for `le`, so series merge with its own histograms.
    return repr(float(value))


@dataclass(slots=True)
class _HistogramFamily:
    name: str
    documentation: str
    labelnames: tuple[str, ...]
    bounds: tuple[float, ...]
    series: dict[LabelValues, _Buckets] = field(default_factory=dict)

    def get(self, values: LabelValues) -> _Buckets:
        buckets = self.series.get(values)
        if buckets is None:
            buckets = self.series[values] = _Buckets(self.bounds)
        return buckets


@dataclass(slots=True)
class _CounterFamily:
    name: str  # without the `_total` suffix, as prometheus_client's families expect
    documentation: str
    labelnames: tuple[str, ...]
    series: dict[LabelValues, float] = field(default_factory=dict)

    def inc(self, values: LabelValues, amount: float = 1.0) -> None:
        self.series[values] = self.series.get(values, 0.0) + amount


class _LabelCap:
    """Admits ``limit`` distinct well-formed values of one label; the rest become ``other``."""

    def __init__(self, limit: int = MAX_LABEL_VALUES) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        if value is None:
            return NONE
        if value in self.seen:
            return value
        if len(self.seen) >= self.limit or not _LABEL_VALUE.match(value):
            return OTHER
        self.seen.add(value)
        return value


class LoadMetrics(Collector):
    """A worker's request metrics, registered on ``registry`` under ``run`` and ``scenario``.

    Call :meth:`observe` once per finished record, and :meth:`arrival_scheduled` /
    :meth:`arrival_dropped` from the pacer. Thread-safe: one lock per call.
    """

    def __init__(self, registry: CollectorRegistry, run: str, scenario: str) -> None:
        self.run = run
        self.scenario = scenario
        self._const: LabelValues = (run, scenario)
        self._lock = threading.Lock()
        self._status_cap = _LabelCap()
        self._kind_cap = _LabelCap()
        self._phase_cap = {"client": _LabelCap(), "server": _LabelCap()}
        self._step_cap = _LabelCap(MAX_STEPS)
        const = ("run", "scenario")

        def hist(name: str, doc: str, bounds: tuple[float, ...], *labels: str) -> _HistogramFamily:
            return _HistogramFamily(name, doc, (*const, *labels), bounds)

        def counter(name: str, doc: str, *labels: str) -> _CounterFamily:
            return _CounterFamily(name, doc, (*const, *labels))

        self.ttft = hist(
            "ramplab_ttft_seconds",
            "Time to the first token-bearing SSE event, from the intended or the actual start.",
            LATENCY_BUCKETS,
            "step",
            "target_qps",
            "start",
        )
        self.inter_token = hist(
            "ramplab_inter_token_seconds",
            "Gap between token-bearing events divided by the tokens they carry (one per token).",
            GAP_BUCKETS,
            "step",
            "target_qps",
        )
        self.tpot = hist(
            "ramplab_tpot_seconds",
            "Time per output token after the first: (TTLT - TTFT) / (output tokens - 1).",
            GAP_BUCKETS,
            "step",
            "target_qps",
        )
        self.ttlt = hist(
            "ramplab_ttlt_seconds",
            "Time to the last token-bearing SSE event, from the intended or the actual start.",
            LATENCY_BUCKETS,
            "step",
            "target_qps",
            "start",
        )
        self.phase = hist(
            "ramplab_phase_seconds",
            "Duration of one latency phase, measured by the client or reported by the server.",
            LATENCY_BUCKETS,
            "side",
            "phase",
        )
        self.stream_rate = hist(
            "ramplab_stream_tokens_per_second",
            "Output tokens of one stream over the time from its send to its last token.",
            RATE_BUCKETS,
            "step",
            "target_qps",
        )
        self.lateness = hist(
            "ramplab_schedule_lateness_seconds",
            "Actual send minus intended start (the generator's own lateness).",
            LATENCY_BUCKETS,
        )
        self.requests = counter(
            "ramplab_requests",
            "Finished requests (attempt chains) by outcome, final status and error kind.",
            "outcome",
            "status",
            "error_kind",
        )
        self.attempts = counter("ramplab_attempts", "HTTP attempts, retries included.")
        self.retries = counter(
            "ramplab_retries",
            "Attempts retried, by the status of the attempt that failed.",
            "status",
        )
        self.output_tokens = counter("ramplab_output_tokens", "Output tokens received.")
        self.goodput = counter(
            "ramplab_goodput_requests",
            "Successful requests that met every SLO of the campaign (all successes without SLOs).",
        )
        self.scheduled = counter("ramplab_arrivals_scheduled", "Arrivals the schedule asked for.")
        self.dropped = counter(
            "ramplab_arrivals_dropped", "Arrivals no free user could take in time (not sent)."
        )
        self._histograms = (
            self.ttft,
            self.inter_token,
            self.tpot,
            self.ttlt,
            self.phase,
            self.stream_rate,
            self.lateness,
        )
        self._counters = (
            self.requests,
            self.attempts,
            self.retries,
            self.output_tokens,
            self.goodput,
            self.scheduled,
            self.dropped,
        )
        # Series that exist from the start, so rate() sees the first increment.
        for family in (self.attempts, self.output_tokens, self.goodput, self.scheduled):
            family.inc(self._const, 0.0)
        self.dropped.inc(self._const, 0.0)
        registry.register(self)

    def observe(self, record: RequestRecord) -> None:
        """Count one finished request and, when it succeeded, observe its latencies."""
        const = self._const
        with self._lock:
            status = self._status_cap(None if record.status is None else str(record.status))
            kind = self._kind_cap(record.error_kind)
            outcome = "ok" if record.ok else "error"
            self.requests.inc((*const, outcome, status, kind))
            self.attempts.inc(const, record.attempts)
            self._count_retries(record)
            if not record.ok:
                return
            if record.slo_ok is not False:
                self.goodput.inc(const)
            self.lateness.get(const).add(max(record.lateness_ms, 0.0) / 1000.0)
            if record.output_tokens:
                self.output_tokens.inc(const, record.output_tokens)
            self._observe_latencies(record)

    def _count_retries(self, record: RequestRecord) -> None:
        retried = record.attempts - 1
        if retried <= 0:
            return
        failed = record.attempt_log[:retried]
        for attempt in failed:
            status = None if attempt.status is None else str(attempt.status)
            self.retries.inc((*self._const, self._status_cap(status)))
        if len(failed) < retried:  # a record without its attempt log
            self.retries.inc((*self._const, "unknown"), retried - len(failed))

    def _step_labels(self, record: RequestRecord) -> LabelValues:
        if record.step is None:
            return (*self._const, NONE, NONE)
        step = self._step_cap(str(record.step))
        if step == OTHER:
            return (*self._const, OTHER, OTHER)
        rate = NONE if record.target_qps is None else f"{record.target_qps:g}"
        return (*self._const, step, rate)

    def _observe_latencies(self, record: RequestRecord) -> None:
        const = self._const
        stepped = self._step_labels(record)
        if record.ttft_ms is not None:
            self.ttft.get((*stepped, "intended")).add(record.ttft_ms / 1000.0)
        if record.ttft_send_ms is not None:
            self.ttft.get((*stepped, "actual")).add(record.ttft_send_ms / 1000.0)
        if record.ttlt_ms is not None:
            self.ttlt.get((*stepped, "intended")).add(record.ttlt_ms / 1000.0)
        if record.ttlt_send_ms is not None:
            self.ttlt.get((*stepped, "actual")).add(record.ttlt_send_ms / 1000.0)
        if record.tpot_ms is not None:
            self.tpot.get(stepped).add(record.tpot_ms / 1000.0)
        if record.itl_ms:
            gaps = self.inter_token.get(stepped)
            for gap_ms in record.itl_ms:
                gaps.add(gap_ms / 1000.0)
        stream_ms = record.ttlt_send_ms if record.ttlt_send_ms is not None else record.ttlt_ms
        if record.output_tokens and stream_ms:
            self.stream_rate.get(stepped).add(record.output_tokens / (stream_ms / 1000.0))
        for side, phases in (("client", record.phases_ms), ("server", record.server_timing_ms)):
            cap = self._phase_cap[side]
            for name, ms in phases.items():
                self.phase.get((*const, side, cap(name))).add(ms / 1000.0)

    def arrival_scheduled(self, count: int = 1) -> None:
        """The pacer reached ``count`` intended start times."""
        with self._lock:
            self.scheduled.inc(self._const, count)

    def arrival_dropped(self, count: int = 1) -> None:
        """``count`` arrivals found no free user in time and were not sent."""
        with self._lock:
            self.dropped.inc(self._const, count)

    def collect(self) -> Iterator[Metric]:
        """Build the families from the current state (called by the registry on each scrape)."""
        with self._lock:
            counters = [(family, dict(family.series)) for family in self._counters]
            histograms = [
                (family, {key: (b.cumulative(), b.total) for key, b in family.series.items()})
                for family in self._histograms
            ]
        for cfamily, cseries in counters:
            out = CounterMetricFamily(
                cfamily.name, cfamily.documentation, labels=list(cfamily.labelnames)
            )
            for values, value in cseries.items():
                out.add_metric(list(values), value)
            yield out
        for hfamily, hseries in histograms:
            hout = HistogramMetricFamily(
                hfamily.name, hfamily.documentation, labels=list(hfamily.labelnames)
            )
            for values, (buckets, total) in hseries.items():
                hout.add_metric(list(values), buckets, total)
            yield hout

    def describe(self) -> Iterable[Metric]:
        # Without describe() the registry would call collect() at registration to learn names.
        return [
            CounterMetricFamily(f.name, f.documentation, labels=list(f.labelnames))
            for f in self._counters
        ] + [
            HistogramMetricFamily(f.name, f.documentation, labels=list(f.labelnames))
            for f in self._histograms
        ]


class MasterGauges:
    """The run-level gauges the Locust master serves (one master per run)."""

    def __init__(self, registry: CollectorRegistry, run: str, scenario: str) -> None:
        labels = ("run", "scenario")
        self.run_info = Gauge(
            "ramplab_run_info", "1 while this run is active.", labels, registry=registry
        ).labels(run, scenario)
        self.step_gauge = Gauge(
            "ramplab_step", "Index of the current load step.", labels, registry=registry
        ).labels(run, scenario)
        self.target_qps_gauge = Gauge(
            "ramplab_target_qps", "Rate the schedule asks for now.", labels, registry=registry
        ).labels(run, scenario)
        self.workers_gauge = Gauge(
            "ramplab_workers", "Workers connected to the master.", labels, registry=registry
        ).labels(run, scenario)
        self.users_gauge = Gauge(
            "ramplab_users", "Locust users running over all workers.", labels, registry=registry
        ).labels(run, scenario)
        self.run_info.set(1)

    def update(
        self,
        *,
        step: int | None = None,
        target_qps: float | None = None,
        workers: int | None = None,
        users: int | None = None,
    ) -> None:
        """Set whichever gauges are given."""
        for gauge, value in (
            (self.step_gauge, step),
            (self.target_qps_gauge, target_qps),
            (self.workers_gauge, workers),
            (self.users_gauge, users),
        ):
            if value is not None:
                gauge.set(value)

    def finish(self) -> None:
        """Mark the run over: ``ramplab_run_info`` goes to 0 and the offered rate to 0."""
        self.run_info.set(0)
        self.target_qps_gauge.set(0)


class LiveLatency(Collector):
    """``ramplab_live_latency_milliseconds{step, figure, quantile}`` on the master: the workers'
    sketches merged (``metrics/live.py``, within 1 %), read at each scrape. The workers'
    histograms give the same to Prometheus bucket by bucket; this is the run's own answer."""

    def __init__(self, registry: CollectorRegistry, run: str, scenario: str,
                 snapshot: Callable[[], dict[str, dict[str, dict[str, Any]]]]) -> None:  # fmt: skip
        self.labels = (run, scenario)
        self.snapshot = snapshot
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "ramplab_live_latency_milliseconds",
            "Live latency per step from the workers' merged sketches (within 1 %).",
            labels=["run", "scenario", "step", "figure", "quantile"],
        )
        for step, figures in self.snapshot().items():
            for figure, shown in figures.items():
                for quantile in ("p50", "p90", "p99"):
                    value = shown.get(quantile)
                    if value is not None:
                        family.add_metric([*self.labels, step, figure, quantile], float(value))
        yield family

    def describe(self) -> Iterable[Metric]:
        return []


def serve(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> int:
    """Serve ``registry`` on ``http://host:port/metrics`` in the background; returns the port.

    ``port=0`` picks a free port. Under gevent's monkey-patching the server thread becomes a
    greenlet and its socket a cooperative one, so scrapes do not block the users.
    """
    server, _thread = start_http_server(port, addr=host, registry=registry)
    bound: int = server.server_port
    return bound


__all__: Sequence[str] = [
    "GAP_BUCKETS",
    "LATENCY_BUCKETS",
    "MAX_STEPS",
    "RATE_BUCKETS",
    "LiveLatency",
    "LoadMetrics",
    "MasterGauges",
    "serve",
]
