"""The report of a run directory: the per-step table, ``report.md``, ``report.html`` and
``recommendations.json`` beside the results (``ramplab report RUN_DIR`` rebuilds them all).

``write_report`` reads the records once, a batch at a time (``digest.py``), for what the
summary does not hold (distributions, phases, retries); the recommendation rules
(``recommend.py``) run on the summary and that digest; ``mdreport`` and ``htmlreport`` render
the same tables (``tables.py``), the HTML adding the plotly charts (``charts/``).

The source is ``summary.json`` as the master wrote it, or as ``ramplab.runs.rebuild`` rebuilt
it from the records and the campaign saved in the run directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table

from ramplab.report.accounting import accounting_table, incomplete_lines
from ramplab.report.charts import LabelledRun
from ramplab.report.html import write_html
from ramplab.report.markdown import RunMeta, render_markdown
from ramplab.report.recommend import Recommendation, recommend, write_recommendations
from ramplab.report.tables import (
    COLUMNS,
    gate_rows,
    rows,
    sessions_line,
    slo_text,
    step_columns,
)
from ramplab.report.verdict import Verdict, judge
from ramplab.results.slo import print_gates
from ramplab.results.summary import GateVerdict, RunSummary
from ramplab.results.trust import run_warnings
from ramplab.runs.rundir import RunDir, write_atomically

__all__ = [
    "COLUMNS",
    "WrittenReport",
    "gate_rows",
    "print_results",
    "print_verdict",
    "rows",
    "steps_table",
    "write_report",
]

SEVERITY_STYLE = {"distrust": "red", "act": "yellow", "note": "dim"}
TRUST_STYLE = {"trusted": "green", "caution": "yellow", "untrusted": "red"}


@dataclass(frozen=True)
class WrittenReport:
    """What ``write_report`` wrote and judged: the Markdown file, the verdict, the rules."""

    markdown: Path
    verdict: Verdict
    recommendations: tuple[Recommendation, ...]


def steps_table(
    summary: RunSummary,
    title: str = "per-step summary",
    columns: Sequence[tuple[str, str, str]] = COLUMNS,
) -> Table:
    table = Table(title=title, title_justify="left")
    for header, _, _ in columns:
        table.add_column(header, justify="left" if header == "errors" else "right")
    for row in rows(summary, columns):
        table.add_row(*row)
    return table


def print_steps(summary: RunSummary, console: Console, title: str = "per-step summary") -> None:
    """The per-step table; as two tables (load, then latencies) when it is wider than the
    terminal."""
    columns = step_columns(summary)
    slo = slo_text(summary)
    if slo is not None:
        console.print(f"SLO: {slo} (goodput: the requests that met it)", highlight=False)
    whole = steps_table(summary, title, columns)
    # Whole when it fits unwrapped; rich would otherwise squeeze columns and wrap cells.
    unbounded = console.options.update_width(1 << 16)  # measured as wide as it wants
    if Measurement.get(console, unbounded, whole).maximum <= console.width:
        console.print(whole)
    else:
        split = next(i for i, column in enumerate(columns) if column[0].startswith("TTFT"))
        console.print(steps_table(summary, f"{title}: load", columns[:split]))
        console.print(steps_table(summary, f"{title}: latency", (*columns[:2], *columns[split:])))
    line = sessions_line(summary)
    if line is not None:
        console.print(line, highlight=False)
    headers, body = accounting_table(summary)
    accounting = Table(title="every request accounted for", title_justify="left")
    for header in headers:
        accounting.add_column(header, justify="right")
    for row in body:
        accounting.add_row(*row)
    console.print(accounting)
    for reason in incomplete_lines(summary):
        console.print(f"[red]{escape(reason)}[/]")


def print_verdict(verdict: Verdict, console: Console) -> None:
    """The verdict block: one labelled sentence a line, the trust line in its level's colour."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for label, text in verdict.lines():
        style = TRUST_STYLE[verdict.trust.level] if label == "trust" else ""
        table.add_row(label, f"[{style}]{escape(text)}[/]" if style else escape(text))
    console.print(Panel(table, title="verdict", title_align="left", expand=False))


def print_results(
    summary: RunSummary,
    report: WrittenReport,
    console: Console,
    title: str = "per-step summary",
) -> None:
    """A finished run on the terminal: the verdict, the per-step table, the gates, the
    warnings, then each fired rule's severity and first clause (the whole sentence is in
    report.md), and the verdict's answer again as the last line."""
    print_verdict(report.verdict, console)
    print_steps(summary, console, title)
    if summary.gates:
        print_gates(summary.gates, console)
    for warning in run_warnings(summary):
        console.print(f"[red]{escape(warning)}[/]")
    if report.recommendations:
        console.print("recommendations (whole sentences in report.md):")
    for r in report.recommendations:
        head = r.message.split(": ", 1)[0]
        console.print(
            f"  [{SEVERITY_STYLE[r.severity]}]{r.severity:<8}[/] {escape(head)} [dim]({r.rule})[/]"
        )
    console.print(f"verdict: {escape(report.verdict.headline)}", highlight=False)


def write_report(
    run_dir: Path, summary: RunSummary, gates: Sequence[GateVerdict] = ()
) -> WrittenReport:
    """``report.md`` (verdict, recommendations, tables), ``report.html`` (the same with
    charts, one self-contained file) and ``recommendations.json`` (with the verdict), from
    ``summary`` and one streamed pass over the records."""
    meta = RunMeta.read(run_dir)
    run = LabelledRun.load(run_dir, run_dir.name, summary)
    recommendations = recommend(summary, run.digest)
    verdict = judge(summary, run.digest, recommendations)
    write_recommendations(run_dir, recommendations, verdict=verdict)
    files = RunDir(run_dir)
    out = files.report_md
    text = render_markdown(run_dir.name, meta, summary, run.digest, recommendations, gates, verdict)
    write_atomically(out, text)
    write_html(files.report_html, run, meta, recommendations, gates, verdict)
    return WrittenReport(out, verdict, tuple(recommendations))
