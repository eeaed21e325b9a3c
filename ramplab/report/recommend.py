"""Recommendations: explicit rules over a run's summary and records, each citing its figure.

Every rule is a small named function ``rule(evidence, thresholds) -> Recommendation | None``:
it reads measured figures only, and when one crosses its threshold it returns one sentence that
names the figure, its value, where it was seen (the offered load) and the threshold, followed by
what to do. Nothing is inferred that was not measured: a rule whose input is missing (no server
timings, no retry log, too few requests) stays silent. ``RULES`` is the ordered list
``recommend`` applies; ``docs/report.md`` lists every rule and its threshold.

Severities: ``act`` (a change to the system under test or its client would help), ``distrust``
(the measurement itself is compromised at some loads: read those steps with care), ``note``
(context a reader needs, e.g. a p99 over too few requests).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from ramplab.results.breakdown import group_breakdown
from ramplab.results.digest import RunDigest, StepDigest
from ramplab.results.offered import offered_load, where
from ramplab.results.summary import RunSummary, StepStats
from ramplab.results.trust import TAIL_SAMPLE, late
from ramplab.runs.rundir import RunDir, write_atomically

__all__ = [
    "RECOMMENDATIONS_FILE",
    "RULES",
    "Evidence",
    "Recommendation",
    "Thresholds",
    "recommend",
    "write_recommendations",
]

Severity = Literal["act", "distrust", "note"]
RECOMMENDATIONS_FILE = RunDir.RECOMMENDATIONS


@dataclass(frozen=True)
class Thresholds:
    """Where each rule fires; the defaults are documented in ``docs/report.md``."""

    lock_wait_share: float = 0.20  # of TTLT, per step
    setup_share: float = 0.10  # DNS + connect + TLS, of the slowest 1 %'s TTLT
    drop_ratio: float = 0.01  # dropped ÷ scheduled, per step
    lateness_p99_ms: float = 20.0  # per step
    retry_after_lost: float = 0.005  # failed-with-Retry-After ÷ requests, over the run
    queueing_growth: float = 2.0  # TTFT p99 ratio between two steps ...
    achieved_share: float = 0.95  # ... while both achieved at least this share of offered
    min_requests: int = 20  # per step, for rules comparing steps
    retry_amplification: float = 1.2  # attempts ÷ requests, per step
    error_ratio: float = 0.01  # per step
    tail_count: int = 100  # requests below which a step's p99 is not a tail
    tokenizer_share: float = 0.01  # records counted with the approximate tokenizer
    slo_miss: float = 0.10  # successes that missed the SLO, ÷ requests, per step
    burst_itl_ratio: float = 0.25  # ITL p50 below this share of TPOT p50 ...
    burst_zero_share: float = 0.30  # ... with at least this share of the step's gaps ...
    burst_zero_gap_ms: float = 0.05  # ... under this (≈ 0: tokens that arrived together)


@dataclass(frozen=True)
class Recommendation:
    """One fired rule: the sentence, and the figure behind it for machines (comparison, CI)."""

    rule: str
    severity: Severity
    message: str
    figure: str  # what was measured, e.g. "lock_wait share of TTLT"
    value: float
    threshold: float
    steps: tuple[int, ...] = ()  # the steps where it was seen (indices into summary.steps)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["steps"] = list(self.steps)
        return data


@dataclass(frozen=True)
class Evidence:
    """What the rules read: the summary, and the digest of its records (same steps)."""

    summary: RunSummary
    digest: RunDigest

    def records_of(self, step: StepStats) -> StepDigest | None:
        return next((d for d in self.digest.steps if d.index == step.index), None)


Rule = Callable[[Evidence, Thresholds], "Recommendation | None"]


def _pct(value: float) -> str:
    return f"{100 * value:.0f} %" if value >= 0.01 else f"{100 * value:.2g} %"


def _load(step: StepStats) -> str:
    value, unit = offered_load(step)
    return f"{value:g} {unit}"


def signing_lock_wait(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """The target's signing lock takes a large share of TTLT (reference target's timings)."""
    shares: list[tuple[StepStats, float]] = []
    for step in ev.summary.steps:
        d = ev.records_of(step)
        if d is None or len(d.phases) == 0:
            continue
        ttlt = float(d.column("ttlt").sum())
        if ttlt > 0:
            shares.append((step, float(d.column("lock_wait").sum()) / ttlt))
    flagged = [(s, v) for s, v in shares if v >= th.lock_wait_share]
    if not flagged:
        return None
    worst = max(v for _, v in flagged)
    steps = [s for s, _ in flagged]
    return Recommendation(
        "signing_lock_wait", "act",
        f"lock wait is {_pct(worst)} of TTLT {where(steps, ev.summary.steps)} (threshold "
        f"{_pct(th.lock_wait_share)}): responses queue for the target's signing lock; switch "
        "signing to parallel (target.settings.signing.mode: parallel) or to ed25519",
        "lock_wait share of TTLT", worst, th.lock_wait_share, tuple(s.index for s in steps),
    )  # fmt: skip


def connection_setup(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """DNS, TCP connect and TLS take a large share of the slowest requests' TTLT."""
    tail = group_breakdown(ev.digest.pooled("phases"), "p99")
    if tail is None:
        return None
    share = tail.share("dns", "connect", "tls")
    if share < th.setup_share:
        return None
    parts = {k: tail.client[k] for k in ("dns", "connect", "tls")}
    biggest = max(parts, key=lambda k: parts[k])
    advice = {
        "dns": "cache name resolution (drop --no-dns-cache)",
        "connect": "reuse connections (keep-alive: drop --new-connection-per-request)",
        "tls": "reuse TLS sessions and connections (keep-alive)",
    }[biggest]
    detail = ", ".join(f"{k} {v:.1f} ms" for k, v in parts.items() if v > 0)
    return Recommendation(
        "connection_setup", "act",
        f"connection set-up is {_pct(share)} of the slowest 1 %'s TTLT ({detail} of "
        f"{tail.ttlt_ms:.1f} ms; threshold {_pct(th.setup_share)}): {advice}",
        "DNS+connect+TLS share of p99-group TTLT", share, th.setup_share,
    )  # fmt: skip


def _drop_limit(step: StepStats) -> Literal["generator", "cap", "sizing"] | None:
    """What dropped a step's arrivals: a starved generator (its self-check), the cap on users
    (a worker that dropped ran its share of ``max_users``), or — users below the cap — the
    sizing (before workers started users on demand); ``None`` when the summary cannot say."""
    if step.generator_bound:
        return "generator"
    users = [
        (w.peak_users, w.max_users)
        for w in step.by_worker.values()
        if w.dropped and w.peak_users is not None and w.max_users is not None
    ]
    if not users and step.peak_users is not None and step.max_users is not None:
        users = [(step.peak_users, step.max_users)]
    if not users:
        return None
    return "cap" if any(peak >= cap for peak, cap in users) else "sizing"


def _users(steps: Sequence[StepStats]) -> str:
    shown = [s for s in steps if s.peak_users is not None and s.max_users is not None]
    if not shown:
        return ""
    peak = max(shown, key=lambda s: s.peak_users or 0)
    return f" (peak {peak.peak_users} users of the {peak.max_users} cap)"


def dropped_arrivals(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """Arrivals of the schedule that no free user could take, and the limit that dropped them."""
    flagged = [s for s in ev.summary.steps if (s.drop_ratio or 0.0) >= th.drop_ratio]
    if not flagged:
        return None
    worst = max(flagged, key=lambda s: s.drop_ratio or 0.0)
    ratio = worst.drop_ratio or 0.0
    by_limit: dict[str | None, list[StepStats]] = {}
    for step in flagged:
        by_limit.setdefault(_drop_limit(step), []).append(step)
    every = ev.summary.steps
    causes = []
    if "generator" in by_limit:
        steps = by_limit["generator"]
        reason = next((s.generator_reason for s in steps if s.generator_reason), None)
        causes.append(
            f"the generator was starved {where(steps, every)}"
            + (f" ({reason})" if reason else "")
            + ": its event loop could not start requests in time; add workers (more processes "
            "or hosts), not users"
        )
    if "cap" in by_limit:
        steps = by_limit["cap"]
        causes.append(
            f"the workers ran every user the cap allows {where(steps, every)}{_users(steps)}: "
            "raise --ramplab-max-users (campaign max_users)"
        )
    if "sizing" in by_limit:
        steps = by_limit["sizing"]
        causes.append(
            f"users fell short of the cap {where(steps, every)}{_users(steps)}: the user sizing "
            "lagged the load (a ramplab that starts users on demand does not drop for that)"
        )
    if None in by_limit:
        causes.append(
            f"too few users {where(by_limit[None], every)}, the cap or the sizing (this summary "
            "does not record the users): raise --ramplab-max-users (campaign max_users)"
        )
    return Recommendation(
        "dropped_arrivals", "distrust",
        f"dropped arrivals {_pct(ratio)} at {_load(worst)} ({worst.dropped} of "
        f"{worst.scheduled} scheduled; threshold {_pct(th.drop_ratio)}), so the target saw less "
        f"than the offered load: " + "; ".join(causes),
        "drop_ratio", ratio, th.drop_ratio, tuple(s.index for s in flagged),
    )  # fmt: skip


def generator_lateness(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """The client sent requests late (coordinated omission risk), judged as the run's trust
    status judges it (``results/trust.py``: p99 over enough requests, p90 over fewer)."""
    judged = [(s, j) for s in ev.summary.steps if (j := late(s, th.lateness_p99_ms)) is not None]
    if not judged:
        return None
    flagged = [s for s, _ in judged]
    first = min(flagged, key=lambda s: offered_load(s)[0])
    name, worst = max((j for _, j in judged), key=lambda j: j[1])
    return Recommendation(
        "generator_lateness", "distrust",
        f"lateness {name} {worst:.0f} ms {where(flagged, ev.summary.steps)} (threshold "
        f"{th.lateness_p99_ms:g} ms; p99 over ≥ {TAIL_SAMPLE} sent requests, else p90): the "
        f"generator sent late, so results at {_load(first)} and above describe a later load "
        "than asked (add workers or users, or lower the rate); TTFT from the intended start "
        "keeps the delay, TTFT from send hides it",
        "lateness_ms.p99", worst, th.lateness_p99_ms, tuple(s.index for s in flagged),
    )  # fmt: skip


def _no_retries(retry: Any) -> bool:
    if retry is None:
        return True
    if isinstance(retry, str):
        return retry.strip().partition(":")[0] == "none"
    return isinstance(retry, Mapping) and retry.get("policy") == "none"


def retry_after_ignored(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """The server said when to come back (Retry-After) and the client never retried."""
    if not _no_retries(ev.summary.retry) or ev.summary.requests == 0:
        return None
    lost: Counter[str] = Counter()
    for d in ev.digest.steps:
        lost.update(d.failed_with_retry_after)
    total = sum(lost.values())
    share = total / ev.summary.requests
    if total == 0 or share < th.retry_after_lost:
        return None
    statuses = ", ".join(f"{k}×{v}" for k, v in sorted(lost.items()))
    return Recommendation(
        "retry_after_ignored", "act",
        f"{total} requests ({_pct(share)}) failed with a Retry-After ({statuses}) and the retry "
        f"policy is none (threshold {_pct(th.retry_after_lost)}): goodput lost; honour it with "
        "--ramplab-retry retry_after (campaign retry: {policy: retry_after})",
        "failed with Retry-After ÷ requests", share, th.retry_after_lost,
    )  # fmt: skip


def _kept_up(step: StepStats, th: Thresholds) -> bool:
    return step.target_qps is not None and step.achieved_qps >= th.achieved_share * (
        step.target_qps
    )


def _has_server(d: StepDigest) -> bool:
    return len(d.phases) > 0 and bool(d.column("server_seen").all())


def server_queueing(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """TTFT's tail, measured from the send (the generator's own lateness left out), grows
    between steps while the generator delivered the offered rate. The server's queue phase,
    when reported, decides what the sentence may blame: growth its queue does not explain is
    not called queueing at the server."""
    steps = sorted(
        (s for s in ev.summary.steps
         if _kept_up(s, th) and s.ttft_send_ms.p99 and s.ttft_send_ms.count >= th.min_requests),
        key=lambda s: offered_load(s)[0],
    )  # fmt: skip
    # The knee: the first step whose TTFT p99 reached ``queueing_growth`` × the lowest step's.
    if len(steps) < 2:
        return None
    low = steps[0]
    base = low.ttft_send_ms.p99 or 0.0
    high = next(
        (s for s in steps[1:] if (s.ttft_send_ms.p99 or 0.0) >= th.queueing_growth * base), None
    )
    if high is None or base <= 0:
        return None
    top = high.ttft_send_ms.p99 or 0.0
    growth = top / base
    head = (
        f"TTFT p99 (from the send) grows {growth:.1f}× from {_load(low)} ({base:.0f} ms) to "
        f"{_load(high)} ({top:.0f} ms) while achieved = offered (≥ {_pct(th.achieved_share)}; "
        f"threshold {th.queueing_growth:g}×)"
    )
    blame = "requests queue at the server; its capacity is near the lower rate (add capacity, " \
        "or cap concurrency)"  # fmt: skip
    lo_d, hi_d = ev.records_of(low), ev.records_of(high)
    if lo_d is not None and hi_d is not None and _has_server(lo_d) and _has_server(hi_d):
        q_lo, q_hi = (float(np.percentile(d.column("queue"), 99)) for d in (lo_d, hi_d))
        head += f"; the server's own queue p99 went {q_lo:.1f} → {q_hi:.1f} ms"
        if q_hi - q_lo < 0.5 * (top - base):
            blame = (
                "the server's queue explains less than half of it, so the time goes elsewhere "
                "(prefill, the network, or the generator's own receive path when its CPU is "
                "busy): read the phase breakdown before adding capacity"
            )
    return Recommendation(
        "server_queueing", "act", f"{head}: {blame}",
        "ttft_send_ms.p99 growth between steps", growth, th.queueing_growth,
        (low.index, high.index),
    )  # fmt: skip


def retry_amplification(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """Retries multiply the load the target sees."""
    flagged = [
        s for s in ev.summary.steps if (s.retry_amplification or 0.0) >= th.retry_amplification
    ]
    if not flagged:
        return None
    worst = max(flagged, key=lambda s: s.retry_amplification or 0.0)
    value = worst.retry_amplification or 0.0
    causes: Counter[str] = Counter()
    for s in flagged:
        d = ev.records_of(s)
        if d is not None:
            causes.update(d.retried)
    why = ", ".join(f"{k}×{v}" for k, v in causes.most_common(3))
    return Recommendation(
        "retry_amplification", "act",
        f"retries multiply the load {value:.2f}× at {_load(worst)} (attempts ÷ requests; "
        f"threshold {th.retry_amplification:g}×{'; retried on ' + why if why else ''}): under "
        "overload this feeds the overload; bound it with a retry budget (retry.budget) or "
        "client-side throttling (retry.throttle)",
        "retry_amplification", value, th.retry_amplification, tuple(s.index for s in flagged),
    )  # fmt: skip


def errors(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """Requests that failed (after retries), by final status."""
    flagged = [s for s in ev.summary.steps if (s.error_ratio or 0.0) >= th.error_ratio]
    if not flagged:
        return None
    worst = max(flagged, key=lambda s: s.error_ratio or 0.0)
    ratio = worst.error_ratio or 0.0
    by = Counter[str]()
    for s in flagged:
        by.update(s.errors)
    statuses = ", ".join(f"{k}×{v}" for k, v in sorted(by.items()))
    hints = []
    if "429" in by:
        hints.append("429: rate limited")
    if "503" in by:
        hints.append("503: the target was full or unavailable")
    if any(not k.isdigit() for k in by):
        hints.append("no status: the connection or the stream failed (error_kinds)")
    return Recommendation(
        "errors", "act",
        f"errors are {_pct(ratio)} of requests at {_load(worst)} ({statuses} "
        f"{where(flagged, ev.summary.steps)}; threshold {_pct(th.error_ratio)})"
        + (f": {'; '.join(hints)}" if hints else ""),
        "error_ratio", ratio, th.error_ratio, tuple(s.index for s in flagged),
    )  # fmt: skip


def bursting_server(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """Tokens delivered in bursts: ITL p50 far below TPOT, and many gaps ≈ 0. A server that
    batches its sends (or a proxy that buffers them) delivers several events at once, then
    nothing: the gaps inside a burst are ≈ 0 and the wait between bursts is one large gap, so
    the ITL percentiles describe the bursts and TPOT (the stream's mean pace) is the figure to
    read. Gaps read in one piece (coalesced) are not among the ITL values, so what fires this
    reached the client as separate reads."""
    flagged: list[tuple[StepStats, float, float, float]] = []
    for step in ev.summary.steps:
        d = ev.records_of(step)
        itl, tpot = step.itl_ms.p50, step.tpot_ms.p50
        if d is None or d.itl_ms.size < th.min_requests or itl is None or not tpot:
            continue
        zero = float(np.count_nonzero(d.itl_ms < th.burst_zero_gap_ms)) / d.itl_ms.size
        if itl < th.burst_itl_ratio * tpot and zero >= th.burst_zero_share:
            flagged.append((step, itl, tpot, zero))
    if not flagged:
        return None
    worst, itl, tpot, zero = max(flagged, key=lambda f: f[3])
    steps = [f[0] for f in flagged]
    return Recommendation(
        "bursting_server", "distrust",
        f"the server delivered tokens in bursts {where(steps, ev.summary.steps)}: ITL p50 "
        f"{itl:.2f} ms vs TPOT p50 {tpot:.2f} ms, {_pct(zero)} of gaps ≈ 0 (< "
        f"{th.burst_zero_gap_ms:g} ms) at {_load(worst)} (thresholds: ITL p50 < "
        f"{th.burst_itl_ratio:g} × TPOT p50 and ≥ {_pct(th.burst_zero_share)} of gaps ≈ 0) — "
        "ITL percentiles describe the bursts, use TPOT for the pace a reader sees",
        "share of ITL gaps ≈ 0", zero, th.burst_zero_share, tuple(s.index for s in steps),
    )  # fmt: skip


def tail_sample_size(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """A p99 over fewer than ``tail_count`` requests is the few largest values, not a tail."""
    thin = [s for s in ev.summary.steps if 0 < s.ttft_ms.count < th.tail_count]
    if not thin:
        return None
    fewest = min(s.ttft_ms.count for s in thin)
    return Recommendation(
        "tail_sample_size", "note",
        f"p99 {where(thin, ev.summary.steps)} is over as few as {fewest} successful requests "
        f"(threshold {th.tail_count}): it is the largest few values, not a tail; hold those "
        "steps longer for a p99 to mean something",
        "successful requests per step", float(fewest), float(th.tail_count),
        tuple(s.index for s in thin),
    )  # fmt: skip


def tokenizer_fallback(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """Output tokens counted with the approximate tokenizer (no ``usage`` from the server)."""
    sources: Counter[str] = Counter()
    for d in ev.digest.steps:
        sources.update(d.tokens_counted)
    total = sum(sources.values())
    share = sources["tokenizer"] / total if total else 0.0
    if share < th.tokenizer_share or sources["tokenizer"] == 0:
        return None
    return Recommendation(
        "tokenizer_fallback", "note",
        f"output tokens of {_pct(share)} of requests were counted with ramplab's approximate "
        f"tokenizer (the server sent no usage; threshold {_pct(th.tokenizer_share)}): token "
        "rates, TPOT and ITL are approximate (±15 %); ask for usage "
        "(stream_options.include_usage) or pass a real tokenizer",
        "tokenizer-counted share", share, th.tokenizer_share,
    )  # fmt: skip


def slo_misses(ev: Evidence, th: Thresholds) -> Recommendation | None:
    """Requests that succeeded but missed the SLO: goodput below success."""
    flagged = []
    for s in ev.summary.steps:
        if s.success_ratio is None or s.goodput_ratio is None:
            continue
        if s.success_ratio - s.goodput_ratio >= th.slo_miss:
            flagged.append(s)
    if not flagged:
        return None
    worst = max(flagged, key=lambda s: (s.success_ratio or 0.0) - (s.goodput_ratio or 0.0))
    gap = (worst.success_ratio or 0.0) - (worst.goodput_ratio or 0.0)
    return Recommendation(
        "slo_misses", "act",
        f"{_pct(gap)} of requests at {_load(worst)} succeeded but missed the SLO (goodput "
        f"{worst.goodput_qps:.2f} of {worst.achieved_qps:.2f} QPS achieved; threshold "
        f"{_pct(th.slo_miss)}): latency, not errors, limits goodput "
        f"{where(flagged, ev.summary.steps)}",
        "success_ratio − goodput_ratio", gap, th.slo_miss, tuple(s.index for s in flagged),
    )  # fmt: skip


RULES: tuple[Rule, ...] = (
    generator_lateness,
    dropped_arrivals,
    signing_lock_wait,
    connection_setup,
    server_queueing,
    bursting_server,
    retry_after_ignored,
    retry_amplification,
    errors,
    slo_misses,
    tail_sample_size,
    tokenizer_fallback,
)
_ORDER: dict[Severity, int] = {"distrust": 0, "act": 1, "note": 2}


def recommend(
    summary: RunSummary,
    digest: RunDigest,
    thresholds: Thresholds | None = None,
    rules: Sequence[Rule] = RULES,
) -> list[Recommendation]:
    """Every rule that fires, ``distrust`` first (it qualifies everything else), then ``act``,
    then ``note``; rule order within a severity."""
    th = thresholds or Thresholds()
    ev = Evidence(summary, digest)
    fired = [r for r in (rule(ev, th) for rule in rules) if r is not None]
    return sorted(fired, key=lambda r: _ORDER[r.severity])


class _Judged(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def write_recommendations(
    run_dir: Path,
    recommendations: Sequence[Recommendation],
    thresholds: Thresholds | None = None,
    verdict: _Judged | None = None,
) -> Path:
    """``recommendations.json`` beside ``summary.json``: the verdict (``verdict.py``), the
    fired rules and the thresholds."""
    path = run_dir / RECOMMENDATIONS_FILE
    data = {
        "verdict": None if verdict is None else verdict.to_json(),
        "recommendations": [r.to_json() for r in recommendations],
        "thresholds": asdict(thresholds or Thresholds()),
        "rules": [rule.__name__ for rule in RULES],
    }
    write_atomically(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path
