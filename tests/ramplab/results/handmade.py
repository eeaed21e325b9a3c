"""Hand-built runs for the report's unit tests: records → the real producer → summary + digest.

Nothing here imitates our components: the summary comes from ``producer.summarize`` and the
digest from ``digest.digest_records``, on records written out by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ramplab.load.shapes import parse_shape
from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.results.digest import RunDigest, digest_records
from ramplab.results.producer import EngineCounts, RunFacts, summarize
from ramplab.results.slo import RequestSlo
from ramplab.results.summary import RunSummary, WorkerHealth

T0 = 1_700_000_000.0
STEP_S = 10.0

# A phase vector that adds up to the TTLT below (keep-alive: no connect).
PHASES = {"client": 0.3, "dns": 0.0, "connect": 0.0, "tls": 0.0, "send": 0.2, "wait": 30.0,
          "first_token": 1.0, "stream": 67.5}  # fmt: skip
SERVER = {"auth": 0.1, "ratelimit": 0.1, "queue": 0.5, "prefill": 20.0, "decode": 75.0,
          "sign": 1.0, "lock_wait": 0.0, "sign_queue": 0.2, "ttft": 29.0}  # fmt: skip


def rec(step: int, i: int, n: int, **changes: Any) -> RequestRecord:
    """The ``i``-th of ``n`` records of ``step``: evenly spread over the step, successful, with
    TTFT 30 ms, TTLT 100 ms (lateness 1 ms), 20 tokens; ``changes`` override any field."""
    lateness = changes.pop("lateness_ms", 1.0)
    ttlt = changes.pop("ttlt_ms", 100.0)
    ttft = changes.pop("ttft_ms", 30.0)
    start = T0 + step * STEP_S + (i + 0.5) * STEP_S / n
    fields: dict[str, Any] = {
        "request_id": f"s{step}-{i}",
        "worker": f"w{i % 2}",
        "intended_start": start,
        "actual_start": start + lateness / 1000,
        "ok": True,
        "status": 200,
        "error_kind": None,
        "step": step,
        "attempts": 1,
        "attempt_log": [AttemptRecord(1, start, 200, None, ttlt - lateness)],
        "total_ms": ttlt,
        "lateness_ms": lateness,
        "ttfb_ms": 30.0,
        "ttft_ms": ttft,
        "ttft_send_ms": ttft - lateness,
        "ttlt_ms": ttlt,
        "ttlt_send_ms": ttlt - lateness,
        "tpot_ms": (ttlt - ttft) / 19,
        "itl_ms": [(ttlt - ttft) / 19] * 19,
        "phases_ms": dict(PHASES),
        "server_timing_ms": dict(SERVER),
        "output_tokens": 20,
        "output_tokens_source": "usage",
    }
    fields.update(changes)
    return RequestRecord(**fields)


def failed(step: int, i: int, n: int, status: int, retry_after_s: float | None = None,
           attempts: int = 1) -> RequestRecord:  # fmt: skip
    start = T0 + step * STEP_S + (i + 0.5) * STEP_S / n
    log = [AttemptRecord(a + 1, start, status, "http_status", 2.0, retry_after_s)
           for a in range(attempts)]  # fmt: skip
    return replace(rec(step, i, n), ok=False, status=status, error_kind="http_status",
                   attempts=attempts, attempt_log=log, ttft_ms=None, ttlt_ms=None,
                   ttft_send_ms=None, ttlt_send_ms=None, tpot_ms=None, itl_ms=[],
                   output_tokens=None, phases_ms={}, server_timing_ms={})  # fmt: skip


@dataclass
class Run:
    """A hand-built ramp: one record list per step at ``rates`` QPS, 10 s steps, no warm-up."""

    rates: Sequence[float]
    steps: list[list[RequestRecord]]
    dropped: Sequence[int] | None = None
    retry: Any = None
    slo: RequestSlo = field(default_factory=RequestSlo)
    # One worker's report: its peak users per step and its cap, and its mean CPU per step.
    peak_users: Sequence[int] | None = None
    max_users: int | None = None
    cpu_mean: Sequence[float] | None = None

    def summary(self) -> RunSummary:
        shape = parse_shape(",".join(f"{r:g}" for r in self.rates) + f"@{STEP_S:g}s/0s")
        scheduled = [round(r * STEP_S) for r in self.rates]
        dropped = list(self.dropped or [0] * len(self.rates))
        dispatched = [s - d for s, d in zip(scheduled, dropped, strict=True)]
        counts = EngineCounts(dispatched, dropped)
        if self.peak_users is not None:
            report = {"dispatched": dispatched, "dropped": dropped,
                      "peak_users": list(self.peak_users), "max_users": self.max_users}  # fmt: skip
            counts = EngineCounts.from_reports({"w0": report}, len(self.rates))
        health = None
        if self.cpu_mean is not None:
            health = [{"w0": WorkerHealth(samples=100, cpu_max=c, cpu_mean=c,
                                          loop_lag_max_ms=1.0, loop_lag_mean_ms=1.0)}
                      for c in self.cpu_mean]  # fmt: skip
        facts = RunFacts(shape=shape, run_start=T0, mode="open", shape_text="hand-made",
                         arrivals="constant", seed=1, retry=self.retry, slo=self.slo,
                         scheduled=scheduled, counts=counts, health=health,
                         max_users=self.max_users)  # fmt: skip
        return summarize(self.records, facts)

    @property
    def records(self) -> list[RequestRecord]:
        return [r for step in self.steps for r in step]

    def evidence(self) -> tuple[RunSummary, RunDigest]:
        summary = self.summary()
        return summary, digest_records(iter(self.records), summary)


def full(rate: float, step: int, **changes: Any) -> list[RequestRecord]:
    """A step that achieved its offered rate: ``rate × 10 s`` records."""
    n = round(rate * STEP_S)
    return [rec(step, i, n, **changes) for i in range(n)]


def steady(rates: Sequence[float] = (2, 8), **changes: Any) -> Run:
    """A healthy run: every step achieved, fast, no errors (``changes`` apply to every record)."""
    return Run(rates, [full(r, i, **changes) for i, r in enumerate(rates)])
