"""``report.md``: a run's report readable on its own, in a terminal or a pull request.

Order: the verdict (``verdict.py``); warnings; what ran, folded; the recommendations (what a
reader should do or distrust first); the per-step table; every latency with every percentile,
per step; what the generator delivered per step (lateness, drops, retries); where the time goes
(the phase breakdown); the server's own figures; the gates. The charts are in ``report.html``
beside it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ramplab.report.accounting import ACCOUNTING_NOTE, accounting_table, incomplete_lines
from ramplab.report.engine import ENGINE_NOTE, engine_table, engine_totals
from ramplab.report.recommend import Recommendation
from ramplab.report.tables import (
    Table,
    gate_rows,
    latency_table,
    load_table,
    phase_table,
    rows,
    sessions_line,
    slo_text,
    step_columns,
    turns_table,
)
from ramplab.report.verdict import Verdict
from ramplab.results.breakdown import breakdowns
from ramplab.results.digest import RunDigest
from ramplab.results.summary import GateVerdict, RunSummary
from ramplab.results.trust import run_warnings
from ramplab.runs.rundir import RunDir

__all__ = [
    "RunMeta",
    "markdown_table",
    "recommendation_lines",
    "render_markdown",
    "verdict_lines",
]


@dataclass(frozen=True)
class RunMeta:
    """What ``ramplab run`` wrote to ``run.json`` (empty for a bare Locust run)."""

    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, run_dir: Path) -> RunMeta:
        return cls(RunDir(run_dir).read_run_json())

    def facts(self, summary: RunSummary) -> list[tuple[str, str]]:
        """(name, value) of what ran, only those known."""
        pairs = [
            ("campaign", self.data.get("campaign")),
            ("target", self.data.get("target")),
            ("workers", self.data.get("workers")),
            ("mode", summary.mode),
            ("shape", summary.shape),
            ("arrivals", summary.arrivals),
            ("retry", summary.retry),
            ("SLO (goodput: the requests that met it)", slo_text(summary)),
            ("requests", summary.requests),
            ("worker clocks vs the master's", _clocks(summary)),
            ("exit code", self.data.get("exit_code")),
        ]
        return [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in pairs if v is not None]


def _clocks(summary: RunSummary) -> str | None:
    if not summary.clocks:
        return None
    return "; ".join(
        f"{worker} {c.offset_ms:+.1f} ± {c.uncertainty_ms:.1f} ms"
        for worker, c in sorted(summary.clocks.items())
    )


def markdown_table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _section(title: str, table: Table, intro: str = "") -> list[str]:
    headers, body = table
    if not body:
        return []
    return [f"## {title}", "", *([intro, ""] if intro else []), markdown_table(headers, body), ""]


def recommendation_lines(recommendations: Sequence[Recommendation]) -> list[str]:
    if not recommendations:
        return ["No rule fired: nothing measured crossed a threshold (rules: docs/report.md).", ""]
    return [f"- **{r.severity}** — {r.message} (`{r.rule}`)" for r in recommendations] + [""]


def verdict_lines(verdict: Verdict) -> list[str]:
    """The verdict block: a bold label and its sentence a line."""
    return ["## Verdict", "", *(f"- **{label}**: {text}" for label, text in verdict.lines()), ""]


def render_markdown(
    name: str,
    meta: RunMeta,
    summary: RunSummary,
    digest: RunDigest,
    recommendations: Sequence[Recommendation],
    gates: Sequence[GateVerdict] = (),
    verdict: Verdict | None = None,
) -> str:
    parts = [f"# ramplab run `{name}`", ""]
    if verdict is not None:
        parts += verdict_lines(verdict)
    for warning in run_warnings(summary):
        parts += [f"> **{warning}**", ""]
    if summary.stopped_at_s is not None:
        parts += [f"- interrupted after {summary.stopped_at_s:.1f} s: steps cover what ran before"]
    elif summary.rebuilt:
        parts.append("- summary rebuilt from the records (the run did not write one)")
    parts += [f"- **{line}**" for line in incomplete_lines(summary)]
    # What ran: folded, so the answer comes first (GitHub and most viewers render <details>).
    parts += ["", "<details><summary>The run: command, target, shape, workers, clocks</summary>",
              ""]  # fmt: skip
    if meta.data.get("command"):
        parts += ["Command:", "", "```", str(meta.data["command"]), "```", ""]
    parts += [f"- {k}: `{v}`" for k, v in meta.facts(summary)]
    parts += ["", "</details>"]
    parts += ["", "## Recommendations", "", *recommendation_lines(recommendations)]
    columns = step_columns(summary)
    table = markdown_table([c[0] for c in columns], rows(summary, columns))
    parts += ["## Per step", "", table, ""]
    parts += _section("TTFT by turn (multi-turn sessions)", turns_table(summary),
                      sessions_line(summary) or "")  # fmt: skip
    parts += _section(
        "Latency percentiles per step",
        latency_table(summary),
        "Exact over every successful request of every worker in the step's measured window "
        "(lateness and TTFB: every request sent). Per step only: a percentile pooled over loads "
        "mixes their regimes (summary.json keeps the pooled figures).",
    )
    parts += _section(
        "What the generator delivered, per step",
        load_table(summary, digest),
        "Lateness: intended start → actual send. TTFT from the intended start keeps the "
        "generator's delay; from the send it hides it. Goodput: the requests per second that met "
        "every SLO (or succeeded, without an SLO).",
    )
    groups = breakdowns(digest.pooled("phases"))
    parts += _section(
        "Where the time goes",
        phase_table(groups) if groups else ([], []),
        "Mean per segment of the median requests (TTLT p45–p55) and the slowest 1 % (≥ p99), "
        "over every measured step. Server phases lie inside the client's wait + stream; the "
        "join rule is in docs/report.md.",
    )
    parts += _section("The server's own figures", engine_table(summary),
                      " ".join(filter(None, (engine_totals(summary), ENGINE_NOTE))))  # fmt: skip
    parts += _section("Every request accounted for", accounting_table(summary), ACCOUNTING_NOTE)
    if gates:
        parts += _section("SLO gates", (["gate", "observed", "result"],
                                        [list(row) for row in gate_rows(gates)]))  # fmt: skip
    parts += [
        "Definitions: docs/metrics.md. Latencies are exact percentiles of successful requests;",
        "steps exclude their warm-up. `requests.parquet` holds every request (docs/records.md);",
        "`report.html` the charts; `recommendations.json` the rules that fired.",
        "",
    ]
    return "\n".join(parts)
