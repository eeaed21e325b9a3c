"""§4.1 P99 decomposition: where the time of the median and of the slowest 1 % of requests goes.

Per variant of the experiment (DNS cache on/off through a slow resolver, connection reuse on/off
over TLS, static vs continuous scheduling), the runs' successful requests are pooled and split
into the two groups of ``ramplab/results/breakdown.py`` (median: TTLT between p45 and p55;
slowest 1 %: TTLT ≥ p99), each segment the group's mean:

    client       the generator's own lateness and earlier attempts (≈ 0 when it keeps up)
    dns, connect, tls, send      the final attempt's client phases (httpcore's trace)
    admission    server: auth + rate limit          ┐ the server's Server-Timing figures, placed
    queue        server: waiting for a slot         │ inside the client's window from "request
    prefill      server: prefill                    ┘ written" to "first token" (the join rule)
    trip         first-token trip: the rest of that window (network, framework, client parsing)
    streaming    first → last token, less the signature
    signature    server: signing hand-off + lock wait + signing, computed before the last token

The check: the segments add up to the measured TTLT (intended start → last token) up to a
residual — what the client's phases leave unaccounted, minus any server figure that overflows
its client window (two processes' clocks; such an overflow is cut at the window, never carried
into another segment). The residual is stated per group, in ms and as a share of TTLT.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from ramplab.experiment.sources import expand
from ramplab.experiment.study_result import StudyResult, StudyTable
from ramplab.results.breakdown import GROUP_LABELS, Group, PhaseBreakdown, group_breakdown
from ramplab.results.digest import PHASE_COLUMNS, Floats, read_digest
from ramplab.runs.rebuild import load_summary
from ramplab.runs.rundir import RunDir

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["SEGMENTS", "Decomposition", "analyse", "decompose", "study_result", "variant_phases"]

SEGMENTS: dict[str, str] = {
    "client": "generator lateness, stall & retries",
    "dns": "DNS",
    "connect": "TCP connect",
    "tls": "TLS handshake",
    "send": "send request",
    "admission": "server: auth & rate limit",
    "queue": "server: queue",
    "prefill": "server: prefill",
    "trip": "first-token trip",
    "streaming": "streaming",
    "signature": "server: signature",
}
COLOURS = {
    "client": "#bdbdbd", "dns": "#6baed6", "connect": "#3182bd", "tls": "#08519c",
    "send": "#9ecae1", "admission": "#fdd0a2", "queue": "#e6550d", "prefill": "#fd8d3c",
    "trip": "#c7e9c0", "streaming": "#31a354", "signature": "#a50f15",
}  # fmt: skip
# A residual beyond this share of TTLT is flagged in the notes: the client's own bookkeeping
# (its "client" phase, parsing the head) leaves ~1-2 ms per request unaccounted (docs/metrics.md).
RESIDUAL_SHARE_WARN = 0.05
Cell = str | int | float | None


@dataclass(frozen=True)
class Decomposition:
    """One variant's group: mean ms per segment, the measured TTLT and what is left over."""

    variant: str
    group: Group
    count: int
    ttlt_ms: float
    segments: dict[str, float]  # SEGMENTS order
    server_seen: bool
    overflow_ms: float  # server figures beyond their client window, cut (see the module doc)

    @property
    def label(self) -> str:
        return GROUP_LABELS[self.group]

    @property
    def total_ms(self) -> float:
        return sum(self.segments.values())

    @property
    def residual_ms(self) -> float:
        return self.ttlt_ms - self.total_ms

    def share(self, segment: str) -> float:
        return self.segments[segment] / self.ttlt_ms if self.ttlt_ms > 0 else 0.0

    def largest(self) -> str:
        return max(self.segments, key=lambda k: self.segments[k])


def decompose(variant: str, b: PhaseBreakdown) -> Decomposition:
    """The study's segments of one breakdown group."""
    c = b.client
    window = c["wait"] + c["first_token"]
    segments = {
        "client": c["lateness"] + c["retries"] + c["stall"],
        "dns": c["dns"],
        "connect": c["connect"],
        "tls": c["tls"],
        "send": c["send"],
        "admission": 0.0,
        "queue": 0.0,
        "prefill": 0.0,
        "trip": window,
        "streaming": c["stream"],
        "signature": 0.0,
    }
    overflow = 0.0
    if b.server is not None:
        s = b.server
        before = {"admission": s["auth"] + s["ratelimit"], "queue": s["queue"],
                  "prefill": s["prefill"]}  # fmt: skip
        before, cut = _fit(before, window)
        signature, cut2 = _fit({"signature": s["sign_queue"] + s["lock_wait"] + s["sign"]},
                               c["stream"])  # fmt: skip
        segments.update(before)
        segments.update(signature)
        segments["trip"] = window - sum(before.values())
        segments["streaming"] = c["stream"] - signature["signature"]
        overflow = cut + cut2
    return Decomposition(variant, b.group, b.count, b.ttlt_ms, segments, b.server is not None,
                         overflow)  # fmt: skip


def _fit(parts: dict[str, float], window: float) -> tuple[dict[str, float], float]:
    """``parts`` scaled down to fit ``window`` when they overflow it; the amount cut."""
    total = sum(parts.values())
    if total <= window or total <= 0:
        return parts, 0.0
    scale = max(window, 0.0) / total
    return {k: v * scale for k, v in parts.items()}, total - max(window, 0.0)


def variant_phases(runs: list[Path]) -> Floats:
    """Every successful request's phase row over ``runs`` (rows as ``digest.PHASE_COLUMNS``)."""
    arrays = [
        read_digest(RunDir(path).records, load_summary(path)).pooled("phases") for path in runs
    ]
    return np.vstack(arrays) if arrays else np.empty((0, len(PHASE_COLUMNS)))


def analyse(directory: Path, manifest: Manifest) -> StudyResult:
    """The registered analysis (``study: decomposition``)."""
    notes: list[str] = []
    found: list[Decomposition] = []
    for group in expand([directory], notes):
        phases = variant_phases([run.path for run in group.runs])
        if phases.size == 0:
            notes.append(f"{group.name}: no successful request")
            continue
        groups: tuple[Group, ...] = ("median", "p99")
        for name in groups:
            b = group_breakdown(phases, name)
            if b is not None:
                found.append(decompose(group.name, b))
    return study_result(found, manifest.baseline, notes)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def study_result(found: list[Decomposition], baseline: str, notes: list[str]) -> StudyResult:
    """Tables, chart, conclusions and data of the decompositions ``found``."""
    conclusions: list[str] = []
    p99 = {d.variant: d for d in found if d.group == "p99"}
    if found:
        worst = max(found, key=lambda d: abs(d.residual_ms))
        conclusions.append(
            f"The segments add up to the measured TTLT within {abs(worst.residual_ms):.2f} ms "
            f"in every group (largest residual: {worst.variant}, {worst.label}: "
            f"{worst.residual_ms:+.2f} ms of {worst.ttlt_ms:.1f} ms, "
            f"{_pct(abs(worst.residual_ms) / worst.ttlt_ms if worst.ttlt_ms else 0.0)}); client "
            "phases from httpcore's trace, server phases from Server-Timing placed by the join "
            "rule (docs/report.md)."
        )
    for d in p99.values():
        top = d.largest()
        conclusions.append(
            f"{d.variant}: the slowest 1 % (n={d.count}) take {d.ttlt_ms:.1f} ms on average; "
            f"the largest part is {SEGMENTS[top]} ({d.segments[top]:.1f} ms, {_pct(d.share(top))}"
            f"); DNS is {_pct(d.share('dns'))}, TLS {_pct(d.share('tls'))}, TCP connect "
            f"{_pct(d.share('connect'))}, server queue {_pct(d.share('queue'))} of that P99."
        )
    base = p99.get(baseline)
    for d in p99.values():
        if base is None or d.variant == baseline:
            continue
        deltas = {k: d.segments[k] - base.segments[k] for k in SEGMENTS}
        key = max(deltas, key=lambda k: abs(deltas[k]))
        conclusions.append(
            f"{d.variant} vs {baseline}: slowest-1 % mean TTLT {base.ttlt_ms:.1f} → "
            f"{d.ttlt_ms:.1f} ms ({d.ttlt_ms - base.ttlt_ms:+.1f} ms); the segment that moved "
            f"most is {SEGMENTS[key]}, {base.segments[key]:.1f} → {d.segments[key]:.1f} ms."
        )
    for d in found:
        if d.ttlt_ms > 0 and abs(d.residual_ms) / d.ttlt_ms > RESIDUAL_SHARE_WARN:
            notes.append(f"{d.variant} {d.group}: residual {d.residual_ms:+.1f} ms is more than "
                         f"{_pct(RESIDUAL_SHARE_WARN)} of TTLT")  # fmt: skip
        if d.overflow_ms > 0.05:
            notes.append(f"{d.variant} {d.group}: server figures overflowed their client window "
                         f"by {d.overflow_ms:.2f} ms (cut)")  # fmt: skip
        if not d.server_seen:
            notes.append(f"{d.variant} {d.group}: no server timings: client view only")
    return StudyResult(
        study="decomposition",
        title="§4.1 P99 decomposition: DNS → TLS → send → scheduling → streaming",
        conclusions=conclusions,
        tables=_tables(found),
        charts=[_chart(found).to_plotly_json()] if found else [],
        data={"groups": [_data(d) for d in found], "baseline": baseline, "segments": SEGMENTS},
        notes=notes,
    )


def _data(d: Decomposition) -> dict[str, Any]:
    return {
        "variant": d.variant, "group": d.group, "count": d.count, "ttlt_ms": d.ttlt_ms,
        "segments_ms": d.segments, "total_ms": d.total_ms, "residual_ms": d.residual_ms,
        "overflow_ms": d.overflow_ms, "server_seen": d.server_seen,
        "shares": {k: d.share(k) for k in SEGMENTS},
    }  # fmt: skip


def _tables(found: list[Decomposition]) -> list[StudyTable]:
    heads = ["variant", "group", "n", "TTLT ms", *(f"{v} ms" for v in SEGMENTS.values()),
             "sum ms", "residual ms"]  # fmt: skip
    ms: list[list[Cell]] = [
        [d.variant, d.label, d.count, round(d.ttlt_ms, 2),
         *(round(d.segments[k], 2) for k in SEGMENTS), round(d.total_ms, 2),
         round(d.residual_ms, 2)]
        for d in found
    ]  # fmt: skip
    shares: list[list[Cell]] = [
        [d.variant, d.label,
         *(round(100 * d.share(k), 1) for k in SEGMENTS)]
        for d in found
    ]  # fmt: skip
    return [
        StudyTable("Where the time goes (group mean, ms)", heads, ms),
        StudyTable("Share of the group's mean TTLT (%)",
                   ["variant", "group", *(f"{v} %" for v in SEGMENTS.values())], shares),
    ]  # fmt: skip


def _chart(found: list[Decomposition]) -> go.Figure:
    cats = [f"{d.variant} · {d.label}" for d in found]
    fig = go.Figure()
    for key, label in SEGMENTS.items():
        xs = [d.segments[key] for d in found]
        if not any(xs):
            continue
        fig.add_trace(go.Bar(y=cats, x=xs, name=label, orientation="h",
                             marker={"color": COLOURS[key]}))  # fmt: skip
    fig.add_trace(go.Scatter(y=cats, x=[d.ttlt_ms for d in found], name="measured TTLT",
                             mode="markers", marker={"symbol": "line-ns-open", "size": 18,
                                                     "color": "black"}))  # fmt: skip
    fig.update_layout(
        title={"text": "§4.1 where the time goes: median and slowest 1 %, per variant", "x": 0.01},
        barmode="stack", template="plotly_white", xaxis_title="ms (group mean)",
        height=max(320, 60 * len(found) + 160), legend={"orientation": "h", "y": -0.2},
    )  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    return fig
