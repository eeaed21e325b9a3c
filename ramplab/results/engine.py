"""The inference engine's own figures: its Prometheus endpoint, scraped through a run and joined
to the steps.

A server that exposes ``/metrics`` says what the client cannot see: how many requests it runs
and queues, how full its KV cache is, its prefix cache's hits, its own token counters and its
histograms of TTFT, inter-token latency, end-to-end latency, queue, prefill and decode time.
``ENGINES`` maps each engine's names onto one set of figures:

- **gauges** (``running``, ``waiting``, ``kv_cache_usage``): per step, the mean and the maximum
  of the scrapes inside the step's measured window;
- **counters** (``prompt_tokens``, ``generation_tokens``, ``requests``, ``prefix_queries``,
  ``prefix_hits``): per step, the increase across the window, each boundary placed by linear
  interpolation between the scrapes around it; over the run, the increase from the scrape
  before the first arrival to the one after the drain — exact, and what the client's own
  counts are held against;
- **histograms** (seconds: ``ttft``, ``itl``, ``e2e``, ``queue``, ``prefill``, ``decode``): per
  step, the increase of every bucket between the last scrape at or before the window's start
  and the first at or after its end (a request the server finished in that second on either
  side counts too), reported as the mean (Δsum ÷ Δcount, exact for those requests) and p50/p99
  interpolated inside their bucket as Prometheus's ``histogram_quantile`` does (an estimate,
  as fine as the engine's buckets).

Samples of every label set (model, engine index, finish reason) are summed. Each scrape is
one JSON line of ``engine_metrics.jsonl`` in the run directory, written as it is taken.
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "COUNTERS",
    "ENGINES",
    "GAUGES",
    "HISTOGRAMS",
    "EngineSample",
    "detect",
    "parse",
    "read_samples",
    "run_totals",
    "window_figures",
    "write_sample",
]

Kind = Literal["gauge", "counter", "histogram"]
GAUGES = ("running", "waiting", "kv_cache_usage")
COUNTERS = ("prompt_tokens", "generation_tokens", "requests", "prefix_queries", "prefix_hits")
HISTOGRAMS = ("ttft", "itl", "e2e", "queue", "prefill", "decode")

# Figure → the engine's metric names (the first present wins; later ones are older releases'
# names). Counters are named as exposed, with ``_total``; histograms by their base name.
ENGINES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "requests": ("vllm:request_success_total",),
        "prefix_queries": ("vllm:prefix_cache_queries_total",),
        "prefix_hits": ("vllm:prefix_cache_hits_total",),
        "ttft": ("vllm:time_to_first_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "queue": ("vllm:request_queue_time_seconds",),
        "prefill": ("vllm:request_prefill_time_seconds",),
        "decode": ("vllm:request_decode_time_seconds",),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
        "requests": ("sglang:num_requests_total",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "e2e": ("sglang:e2e_request_latency_seconds",),
        "queue": ("sglang:queue_time_seconds",),
    },
    "tgi": {
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
        "requests": ("tgi_request_success_total", "tgi_request_success"),
        "itl": ("tgi_request_mean_time_per_token_duration",),
        "e2e": ("tgi_request_duration",),
        "queue": ("tgi_request_queue_duration",),
        "decode": ("tgi_request_inference_duration",),
    },
    # The reference target (target_service/metrics.py) models the same figures.
    "ramplab-target": {
        "running": ("target_running_sequences",),
        "waiting": ("target_waiting_sequences",),
        "prompt_tokens": ("target_prompt_tokens_total",),
        "generation_tokens": ("target_output_tokens_total",),
        "requests": ("target_completions_total",),
        "prefix_queries": ("target_prefix_cache_queried_tokens_total",),
        "prefix_hits": ("target_prefix_cache_hit_tokens_total",),
        "ttft": ("target_ttft_seconds",),
        "itl": ("target_inter_token_seconds",),
        "queue": ("target_queue_wait_seconds",),
        "prefill": ("target_prefill_seconds",),
    },
}
# Which request outcomes a ``requests`` counter counts, where it is labelled by outcome.
_REQUEST_LABELS = {"target_completions_total": ("outcome", "completed")}


def _kind(figure: str) -> Kind:
    if figure in GAUGES:
        return "gauge"
    return "counter" if figure in COUNTERS else "histogram"


@dataclass
class Histogram:
    """Cumulative bucket counts by upper bound, with the sum and count of the observations."""

    buckets: dict[float, float] = field(default_factory=dict)
    sum: float = 0.0
    count: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"b": [[le, n] for le, n in sorted(self.buckets.items())], "s": self.sum,
                "n": self.count}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Histogram:
        return cls({float(le): float(n) for le, n in data["b"]}, float(data["s"]), float(data["n"]))

    def minus(self, earlier: Histogram) -> Histogram:
        return Histogram(
            {le: n - earlier.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            self.sum - earlier.sum,
            self.count - earlier.count,
        )

    def quantile(self, q: float) -> float | None:
        """Prometheus's ``histogram_quantile``: linear inside the bucket holding rank q·count."""
        if self.count <= 0:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        for le, cumulative in sorted(self.buckets.items()):
            if cumulative >= rank:
                if math.isinf(le):
                    return lower  # the top bucket has no upper bound: its lower one
                inside = cumulative - below
                return lower + (le - lower) * ((rank - below) / inside if inside > 0 else 1.0)
            lower, below = le, cumulative
        return lower


@dataclass
class EngineSample:
    """One scrape: when, which engine, and every figure it exposed."""

    t: float  # epoch seconds
    engine: str
    values: dict[str, float] = field(default_factory=dict)  # gauges and counters
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "engine": self.engine, "v": self.values,
                "h": {k: h.to_json() for k, h in self.histograms.items()}}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineSample:
        return cls(
            float(data["t"]),
            str(data["engine"]),
            {k: float(v) for k, v in data.get("v", {}).items()},
            {k: Histogram.from_json(h) for k, h in data.get("h", {}).items()},
        )


def _samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name, sample.labels, float(sample.value)


def detect(text: str) -> str | None:
    """The engine whose names the exposition holds most of; None when it holds none."""
    names = {name for name, _, _ in _samples(text)}
    expanded = names | {n.rsplit("_", 1)[0] for n in names if n.endswith(("_bucket", "_count"))}
    best, hits = None, 0
    for engine, figures in ENGINES.items():
        found = sum(any(n in expanded for n in candidates) for candidates in figures.values())
        if found > hits:
            best, hits = engine, found
    return best


def parse(text: str, engine: str, t: float) -> EngineSample:
    """One scrape of ``engine``'s exposition, every label set summed."""
    wanted: dict[str, tuple[str, Kind]] = {}
    for figure, candidates in ENGINES[engine].items():
        for name in candidates:
            wanted.setdefault(name, (figure, _kind(figure)))
    sample = EngineSample(t, engine)
    seen: dict[str, str] = {}  # figure → the name that served it (the first present wins)
    families = list(text_string_to_metric_families(text))
    for family in families:
        # A labelled counter with no child yet (nothing finished) is exposed as its TYPE line
        # alone: it stands at 0, which a later scrape's increase is counted from.
        counter = wanted.get(f"{family.name}_total")
        if family.type == "counter" and counter is not None and counter[1] == "counter":
            sample.values.setdefault(counter[0], 0.0)
    samples = ((x.name, x.labels, float(x.value)) for f in families for x in f.samples)
    for name, labels, value in samples:
        base, part = name, ""
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in wanted:
                base, part = name[: -len(suffix)], suffix
        if base not in wanted:
            continue
        figure, kind = wanted[base]
        if seen.setdefault(figure, base) != base:
            continue
        if kind != "histogram":
            required = _REQUEST_LABELS.get(base)
            if required is None or labels.get(required[0]) == required[1]:
                sample.values[figure] = sample.values.get(figure, 0.0) + value
            continue
        hist = sample.histograms.setdefault(figure, Histogram())
        if part == "_bucket":
            le = float(labels["le"])
            hist.buckets[le] = hist.buckets.get(le, 0.0) + value
        elif part == "_sum":
            hist.sum += value
        elif part == "_count":
            hist.count += value
    return sample


def read_samples(path: Path) -> list[EngineSample]:
    """The scrapes of a run, in order; a torn last line (a killed master) is skipped."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            out.append(EngineSample.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    return sorted(out, key=lambda s: s.t)


def _at(samples: Sequence[EngineSample], figure: str, t: float) -> float | None:
    """A counter's value at ``t``, linear between the scrapes around it."""
    points = [(s.t, s.values[figure]) for s in samples if figure in s.values]
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, v0), (t1, v1) in pairwise(points):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return points[-1][1]


def _around(
    samples: Sequence[EngineSample], figure: str, start: float, end: float
) -> Histogram | None:
    having = [s for s in samples if figure in s.histograms]
    before = [s for s in having if s.t <= start]
    after = [s for s in having if s.t >= end]
    if not before or not after:
        return None
    return after[0].histograms[figure].minus(before[-1].histograms[figure])


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def window_figures(
    samples: Sequence[EngineSample], start: float, end: float
) -> dict[str, Any] | None:
    """The engine's figures over ``[start, end]`` (epoch seconds); None without a scrape
    around the window."""
    if not samples or end <= start:
        return None
    inside = [s for s in samples if start <= s.t <= end]
    out: dict[str, Any] = {"engine": samples[0].engine, "scrapes": len(inside)}
    for figure in GAUGES:
        values = [s.values[figure] for s in inside if figure in s.values]
        if values:
            out[figure] = {"mean": sum(values) / len(values), "max": max(values)}
    for figure in COUNTERS:
        first, last = _at(samples, figure, start), _at(samples, figure, end)
        if first is not None and last is not None:
            out[figure] = last - first
    for figure in HISTOGRAMS:
        hist = _around(samples, figure, start, end)
        if hist is None or hist.count <= 0:
            continue
        out[f"{figure}_ms"] = {
            "count": hist.count,
            "mean": _ms(hist.sum / hist.count),
            "p50": _ms(hist.quantile(0.50)),
            "p99": _ms(hist.quantile(0.99)),
        }
    return out


def run_totals(samples: Sequence[EngineSample]) -> dict[str, Any] | None:
    """Each counter's increase from the first scrape to the last: the whole run, exactly."""
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    out: dict[str, Any] = {"engine": last.engine, "scrapes": len(samples),
                           "seconds": last.t - first.t}  # fmt: skip
    for figure in COUNTERS:
        if figure in first.values and figure in last.values:
            out[figure] = last.values[figure] - first.values[figure]
    return out


def write_sample(path: Path, sample: EngineSample) -> None:
    """Append one line, whole or not at all: a full disk takes back the part that fitted, so the
    file holds whole lines only (a line is one ``write``: a killed master tears none either)."""
    line = (json.dumps(sample.to_json(), separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, line) != len(line):  # the disk took only part of it
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
