"""The report's tables as plain cells, shared by the terminal, ``report.md`` and ``report.html``.

Each builder returns ``(headers, rows)`` of strings; a value that was not measured is ``-``,
never 0. Formats are fixed, so the same run always gives the same text (``ramplab report``
rebuilds an identical ``report.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ramplab.results.breakdown import CLIENT_LABELS, SERVER_LABELS, PhaseBreakdown
from ramplab.results.digest import RunDigest
from ramplab.results.failures import kinds_text
from ramplab.results.offered import offered_load
from ramplab.results.summary import GateVerdict, Percentiles, RunSummary

__all__ = [
    "COLUMNS",
    "Table",
    "gate_rows",
    "latency_table",
    "load_table",
    "phase_table",
    "rows",
    "step_latency_table",
]

Table = tuple[list[str], list[list[str]]]

# (header, path in a step dict, format)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("step", "index", "{:d}"),
    ("target QPS", "target_qps", "{:g}"),
    ("achieved QPS", "achieved_qps", "{:.2f}"),
    ("dropped", "dropped", "{:d}"),
    ("requests", "requests", "{:d}"),
    ("errors", "errors", ""),
    ("goodput QPS", "goodput_qps", "{:.2f}"),
    ("output tokens/s", "output_tokens_per_s", "{:.0f}"),
    ("TTFT p50 ms", "ttft_ms.p50", "{:.1f}"),
    ("TTFT p99 ms", "ttft_ms.p99", "{:.1f}"),
    ("ITL p50 ms", "itl_ms.p50", "{:.2f}"),
    ("TPOT p50 ms", "tpot_ms.p50", "{:.2f}"),
    ("TTLT p99 ms", "ttlt_ms.p99", "{:.1f}"),
)
# Beside goodput when the run had an SLO: the share of the step's requests that met it.
SLO_COLUMN = ("SLO met", "goodput_ratio", "{:.1%}")


def step_columns(summary: RunSummary) -> tuple[tuple[str, str, str], ...]:
    """The per-step table's columns: ``COLUMNS``, with the SLO's attainment when it had one."""
    if not summary.slo:
        return COLUMNS
    at = next(i for i, column in enumerate(COLUMNS) if column[1] == "goodput_qps") + 1
    return (*COLUMNS[:at], SLO_COLUMN, *COLUMNS[at:])


def slo_text(summary: RunSummary) -> str | None:
    """The run's SLO as reports state it (``ttft_ms ≤ 500 ms``); None without one."""
    if not summary.slo:
        return None
    return ", ".join(f"{name} ≤ {limit:g} ms" for name, limit in summary.slo.items())


# The latencies summarised everywhere, with every percentile (field, label).
LATENCY_FIELDS = (
    ("ttft_ms", "TTFT"),
    ("ttft_send_ms", "TTFT from send"),
    ("itl_ms", "ITL"),
    ("tpot_ms", "TPOT"),
    ("ttlt_ms", "TTLT"),
    ("ttfb_ms", "TTFB"),
    ("lateness_ms", "lateness"),
)
# Added to the latency table for a run that had a reasoning phase (docs/workloads.md).
REASONING_FIELDS = (
    ("answer_ttft_ms", "first answer token"),
    ("reasoning_itl_ms", "ITL, reasoning"),
    ("answer_itl_ms", "ITL, answer"),
)
PERCENTILE_COLUMNS = (("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"),
                      ("p999", "p99.9"), ("max", "max"), ("mean", "mean"))  # fmt: skip


def _get(step: Mapping[str, Any], path: str) -> Any:
    value: Any = step
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _cell(step: Mapping[str, Any], path: str, fmt: str) -> str:
    value = _get(step, path)
    if path == "errors":  # by kind, the statuses inside http_status (``results/failures.py``)
        return kinds_text(dict(step.get("error_kinds") or {}), dict(value or {}))
    if value is None:
        return "-"
    if path == "target_qps" and step.get("target_users") is not None:
        return f"{step['target_users']:g} users"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def rows(summary: RunSummary, columns: Sequence[tuple[str, str, str]] = COLUMNS) -> list[list[str]]:
    """The per-step table's cells, one row per step (the terminal table, report.md, HTML)."""
    steps = summary.to_json()["steps"]
    return [[_cell(step, path, fmt) for _, path, fmt in columns] for step in steps]


def _ms(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _percentile_cells(p: Percentiles) -> list[str]:
    digits = 2 if p.p50 is not None and p.p50 < 10 else 1
    return [_ms(getattr(p, attr), digits) for attr, _ in PERCENTILE_COLUMNS]


def latency_table(summary: RunSummary) -> Table:
    """Every latency per step, with p50/p90/p95/p99/p99.9/max/mean (ms): a percentile pooled
    over steps of different loads mixes their regimes and answers no capacity question, so the
    report shows none (``summary.json`` keeps the pooled figures for other tools)."""
    headers = ["latency (ms)", "offered", "count", *(label for _, label in PERCENTILE_COLUMNS)]
    body = []
    fields = LATENCY_FIELDS + (REASONING_FIELDS if summary.reasoning_tokens.count else ())
    for field, label in fields:
        _, rows = step_latency_table(summary, field)
        body += [[label if i == 0 else "", *row] for i, row in enumerate(rows)]
    return headers, body


def step_latency_table(summary: RunSummary, field: str) -> Table:
    """One latency per step, with every percentile."""
    headers = ["offered", "count", *(label for _, label in PERCENTILE_COLUMNS)]
    body = []
    for step in summary.steps:
        value, unit = offered_load(step)
        p: Percentiles = getattr(step, field)
        body.append([f"{value:g} {unit}", str(p.count), *_percentile_cells(p)])
    return headers, body


def turns_table(summary: RunSummary) -> Table:
    """Multi-turn sessions: per turn index, requests, prompt tokens and TTFT (empty without)."""
    sessions = summary.sessions
    headers = ["turn", "requests", "ok", "prompt tokens p50", "cached p50", "TTFT p50",
               "TTFT p90", "TTFT p99"]  # fmt: skip
    if sessions is None:
        return headers, []
    body = [
        [str(t.turn), str(t.requests), str(t.ok), _ms(t.prompt_tokens.p50, 0),
         _ms(t.cached_tokens.p50, 0), _ms(t.ttft_ms.p50), _ms(t.ttft_ms.p90), _ms(t.ttft_ms.p99)]
        for t in sessions.turns
    ]  # fmt: skip
    return headers, body


def sessions_line(summary: RunSummary) -> str | None:
    """One sentence on the rate of sessions (the steps' QPS count requests, turns included)."""
    sessions = summary.sessions
    if sessions is None:
        return None
    offered = sessions.offered_sessions_per_s
    return (
        f"Sessions: {sessions.sessions} started in the measured windows, "
        f"{sessions.achieved_sessions_per_s:.3g}/s achieved"
        + (f" of {offered:.3g}/s offered" if offered is not None else "")
        + "; a step's target QPS is sessions/s, its achieved QPS requests/s (every turn)."
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def load_table(summary: RunSummary, digest: RunDigest) -> Table:
    """Per step: what the generator delivered, how late, what it dropped and retried, and the
    prompt sizes it asked for against those the server counted (its chat template included)."""
    headers = ["offered", "achieved QPS", "goodput QPS", "dropped", "lateness p50 ms",
               "lateness p99 ms", "TTFT p99 ms (intended / send)", "retry amplification",
               "retried on", "stream tokens/s p50",
               "prompt tokens mean (requested / served)"]  # fmt: skip
    by_index = {d.index: d for d in digest.steps}
    body = []
    for step in summary.steps:
        value, unit = offered_load(step)
        d = by_index.get(step.index)
        retried = ", ".join(f"{k}×{v}" for k, v in (d.retried if d else {}).items()) or "-"
        rate = "-"
        if d is not None and d.stream_tokens_per_s.size:
            rate = f"{float(np.percentile(d.stream_tokens_per_s, 50)):.0f}"
        amplification = step.retry_amplification
        body.append([
            f"{value:g} {unit}",
            f"{step.achieved_qps:.2f}",
            f"{step.goodput_qps:.2f}",
            "-" if step.dropped is None else f"{step.dropped} ({_pct(step.drop_ratio)})",
            _ms(step.lateness_ms.p50, 2),
            _ms(step.lateness_ms.p99, 2),
            f"{_ms(step.ttft_ms.p99)} / {_ms(step.ttft_send_ms.p99)}",
            "-" if amplification is None else f"{amplification:.2f}",
            retried,
            rate,
            f"{_tokens(step.prompt_tokens_requested)} / {_tokens(step.prompt_tokens_served)}",
        ])  # fmt: skip
    return headers, body


def _tokens(mean: float | None) -> str:
    return "-" if mean is None else f"{mean:.1f}"


def phase_table(groups: Sequence[PhaseBreakdown]) -> Table:
    """Mean ms and share of TTLT per segment, one column pair per group (client view, then the
    server's joined view when the server disclosed its phases)."""
    headers = ["segment"]
    for g in groups:
        headers += [f"{g.label} (n={g.count}) ms", "% of TTLT"]
    body: list[list[str]] = []

    def add(view: str, labels: Mapping[str, str]) -> None:
        for key, label in labels.items():
            cells = []
            for g in groups:
                values = g.client if view == "client" else g.server
                v = None if values is None else values.get(key)
                cells += [_ms(v, 2), "-" if v is None or g.ttlt_ms <= 0 else
                          f"{100 * v / g.ttlt_ms:.1f}"]  # fmt: skip
            if any(c not in ("-", "0.00", "0.0") for c in cells):
                body.append([f"{view}: {label}", *cells])

    add("client", CLIENT_LABELS)
    add("server", {k: v.removeprefix("server: ") for k, v in SERVER_LABELS.items()})
    body.append(["mean TTLT", *(c for g in groups for c in (_ms(g.ttlt_ms, 2), "100.0"))])
    return headers, body


def gate_rows(verdicts: Sequence[GateVerdict]) -> list[tuple[str, str, str]]:
    """(gate, observed values, pass/fail/invalid) for report.md."""
    return [
        (
            v.gate,
            ", ".join(f"{x:g}" if isinstance(x, int | float) else str(x) for _, x in v.observed)
            or v.detail,
            v.status,
        )
        for v in verdicts
    ]
