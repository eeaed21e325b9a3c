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
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ramplab.report.accounting import accounting_table, incomplete_lines
from ramplab.report.charts import LabelledRun
from ramplab.report.html import write_html
from ramplab.report.markdown import RunMeta, render_markdown
from ramplab.report.recommend import recommend, write_recommendations
from ramplab.report.tables import (
    COLUMNS,
    gate_rows,
    rows,
    sessions_line,
    slo_text,
    step_columns,
)
from ramplab.results.summary import GateVerdict, RunSummary
from ramplab.runs.rundir import RunDir, write_atomically

__all__ = [
    "COLUMNS",
    "gate_rows",
    "rows",
    "steps_table",
    "write_report",
]

# Terminal width below which the per-step table is printed as two.
WIDE = 150


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
    """The per-step table; on a narrow terminal as two tables (load, then latencies)."""
    columns = step_columns(summary)
    slo = slo_text(summary)
    if slo is not None:
        console.print(f"SLO: {slo} (goodput: the requests that met it)", highlight=False)
    if console.width >= WIDE:
        console.print(steps_table(summary, title, columns))
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


def write_report(run_dir: Path, summary: RunSummary, gates: Sequence[GateVerdict] = ()) -> Path:
    """``report.md`` (facts, recommendations, tables), ``report.html`` (the same with charts,
    one self-contained file) and ``recommendations.json``, from ``summary`` and one streamed
    pass over the records. Returns the Markdown file's path."""
    meta = RunMeta.read(run_dir)
    run = LabelledRun.load(run_dir, run_dir.name, summary)
    recommendations = recommend(summary, run.digest)
    write_recommendations(run_dir, recommendations)
    files = RunDir(run_dir)
    out = files.report_md
    text = render_markdown(run_dir.name, meta, summary, run.digest, recommendations, gates)
    write_atomically(out, text)
    write_html(files.report_html, run, meta, recommendations, gates)
    return out
