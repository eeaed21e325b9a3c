"""``report.html``: the run's verdict, facts, recommendations, charts and tables in one offline
file.

plotly.js is inlined once in the head (``charts.plotly_script``); every chart is a ``<div>``
with its ``Plotly.newPlot`` call, and there is no other script, stylesheet, font or image to
fetch — the file opens from a CI artefact or an e-mail with no network. ``html_page`` is the
shell the experiment comparison can reuse for its own page of overlaid charts.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from ramplab.report.accounting import ACCOUNTING_NOTE, accounting_table, incomplete_lines
from ramplab.report.charts import (
    GOODPUT,
    Chart,
    LabelledRun,
    charts_html,
    plotly_script,
    run_charts,
)
from ramplab.report.engine import ENGINE_NOTE, engine_table, engine_totals
from ramplab.report.markdown import RunMeta
from ramplab.report.recommend import Recommendation
from ramplab.report.tables import (
    Table,
    gate_rows,
    latency_table,
    load_table,
    phase_table,
    rows,
    sessions_line,
    step_columns,
    turns_table,
)
from ramplab.report.verdict import Verdict
from ramplab.results.breakdown import breakdowns
from ramplab.results.summary import GateVerdict
from ramplab.results.trust import run_warnings
from ramplab.runs.rundir import write_atomically

__all__ = [
    "html_page",
    "html_table",
    "recommendations_html",
    "verdict_html",
    "write_html",
]

_STYLE = """
body{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
figure.chart{margin:0 0 1.5em 0;max-width:1100px}figcaption{font-size:12px;color:#555}
li.distrust{color:#a40000}li.act{color:#7a4b00}li.note{color:#333}.sev{font-weight:600}
p.warning{color:#a40000;border:1px solid #a40000;padding:6px 10px}
#verdict{border:2px solid #2ca02c;border-radius:6px;padding:0 1em .5em;margin-bottom:1em}
#verdict.trust-caution{border-color:#d58a00}#verdict.trust-untrusted{border-color:#a40000}
#verdict table{margin:.3em 0;border:none}#verdict th,#verdict td{border:none;text-align:left;
vertical-align:top;background:none}#verdict th{padding-right:1.2em}
#verdict tr.trust td{font-weight:600}details.run{margin:.5em 0 1em}
p.chart-collapsed{color:#555;font-style:italic;margin:0 0 1.5em 0}
"""


def html_table(table: Table) -> str:
    headers, body = table
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    cells = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body
    )
    return f"<table><tr>{head}</tr>{cells}</table>"


def recommendations_html(recommendations: Sequence[Recommendation]) -> str:
    if not recommendations:
        return "<p>No rule fired: nothing measured crossed a threshold.</p>"
    items = "".join(
        f'<li class="{r.severity}"><span class="sev">{r.severity}</span> — '
        f"{html.escape(r.message)} <code>{r.rule}</code></li>"
        for r in recommendations
    )
    return f"<ul>{items}</ul>"


def verdict_html(verdict: Verdict) -> str:
    """The verdict block, first on the page: one labelled sentence a row."""
    cells = "".join(
        f'<tr class="{html.escape(label)}"><th>{html.escape(label)}</th>'
        f"<td>{html.escape(text)}</td></tr>"
        for label, text in verdict.lines()
    )
    return (
        f'<section id="verdict" class="trust-{verdict.trust.level}"><h2>Verdict</h2>'
        f"<table>{cells}</table></section>"
    )


def html_page(
    title: str,
    sections: Sequence[str],
    charts: Sequence[Chart] = (),
    after: Sequence[str] = (),
) -> str:
    """A whole page: ``sections`` (trusted HTML), the charts one under another, then ``after``.
    (One column on purpose: plotly sizes a chart when it draws it, and a chart drawn into a grid
    cell before the grid is laid out comes out wider than its cell.)"""
    grid = f'<div class="charts">{charts_html(charts)}</div>' if charts else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style>{plotly_script() if charts else ''}</head><body>"
        f"<h1>{html.escape(title)}</h1>{''.join(sections)}{grid}{''.join(after)}</body></html>\n"
    )


def write_html(
    path: Path,
    run: LabelledRun,
    meta: RunMeta,
    recommendations: Sequence[Recommendation],
    gates: Sequence[GateVerdict] = (),
    verdict: Verdict | None = None,
) -> Path:
    """Write the run's report; every text is escaped."""
    summary = run.summary
    listed = "".join(
        f"<li>{html.escape(k)}: <code>{html.escape(v)}</code></li>" for k, v in meta.facts(summary)
    )
    command = meta.data.get("command")
    shown = f"<p>Command: <code>{html.escape(str(command))}</code></p>" if command else ""
    groups = breakdowns(run.digest.pooled("phases"))
    columns = step_columns(summary)
    sections = [
        *([verdict_html(verdict)] if verdict is not None else []),
        *(
            f'<p class="warning"><strong>{html.escape(warning)}</strong></p>'
            for warning in run_warnings(summary)
        ),
        *(
            f'<p class="warning"><strong>{html.escape(line)}</strong></p>'
            for line in incomplete_lines(summary)
        ),
        f'<details class="run"><summary>The run: command, target, shape, workers, clocks'
        f"</summary>{shown}<ul>{listed}</ul></details>",
        "<h2>Recommendations</h2>",
        recommendations_html(recommendations),
        "<h2>Per step</h2>",
        html_table(([c[0] for c in columns], rows(summary, columns))),
    ]
    if summary.sessions is not None:
        sections += [
            "<h2>TTFT by turn (multi-turn sessions)</h2>",
            f"<p>{html.escape(sessions_line(summary) or '')}</p>",
            html_table(turns_table(summary)),
        ]
    sections.append("<h2>Charts</h2>")
    after = [
        "<h2>Latency percentiles per step</h2>",
        html_table(latency_table(summary)),
        "<h2>What the generator delivered, per step</h2>",
        f"<p>{html.escape(GOODPUT)}.</p>",
        html_table(load_table(summary, run.digest)),
    ]
    if groups:
        after += ["<h2>Where the time goes</h2>", html_table(phase_table(groups))]
    engine = engine_table(summary)
    if engine[1]:
        said = " ".join(filter(None, (engine_totals(summary), ENGINE_NOTE)))
        after += ["<h2>The server's own figures</h2>", f"<p>{html.escape(said)}</p>",
                  html_table(engine)]  # fmt: skip
    after += [
        "<h2>Every request accounted for</h2>",
        f"<p>{html.escape(ACCOUNTING_NOTE)}</p>",
        html_table(accounting_table(summary)),
    ]
    if gates:
        after += [
            "<h2>SLO gates</h2>",
            html_table((["gate", "observed", "result"], [list(r) for r in gate_rows(gates)])),
        ]
    after.append(
        "<p>Definitions: docs/metrics.md; charts and rules: docs/report.md. Steps exclude "
        "their warm-up.</p>"
    )
    page = html_page(f"ramplab run {path.parent.name}", sections, run_charts([run]), after)
    write_atomically(path, page)
    return path
