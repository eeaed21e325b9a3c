"""An experiment's ``report.html``: ``report.md``'s sections with every variant's runs overlaid
in the report's charts, in one self-contained file.

The page is ``results.htmlreport.html_page`` (plotly.js inlined once, nothing fetched) around
``results.charts.run_charts`` of every finished run: one colour per variant, its repeats sharing
it (the legend names the repeat), so repeat-to-repeat noise is seen beside the difference
between variants. The study's own plotly figures are drawn in its section. Every text is
escaped; the comparison's cells carry a class (``worse``, ``better``, ``within``) for the same
marks as ``comparison.md``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go

from ramplab.experiment.compare import Cell, Comparison, Metric
from ramplab.experiment.mdreport import PHASES_INTRO
from ramplab.experiment.overview import (
    Overview,
    facts,
    nothing_compared,
    order_table,
    phases_side_by_side,
    variants_table,
)
from ramplab.experiment.render import (
    LEGEND,
    change,
    condition_lines,
    recommendation_line,
    table_metrics,
    table_rows,
    value_text,
)
from ramplab.experiment.study_result import StudyResult
from ramplab.report.charts import Chart, charts_html, run_charts
from ramplab.report.html import html_page, html_table

__all__ = ["render_html", "study_charts"]

_STYLE = """<style>
td.worse{color:#a40000;font-weight:600}td.better{color:#006d2c;font-weight:600}
td.within{color:#777}tr.block td{border-top:2px solid #888}tr.delta td{background:#fafafa}
li.partial{font-style:italic}table.comparison td:nth-child(2){text-align:left}
</style>"""


def _esc(text: str) -> str:
    return html.escape(text)


def _change_cell(metric: Metric, cell: Cell) -> str:
    text, mark = change(metric, cell)
    if mark == "!":
        assert cell.delta is not None
        assert cell.delta.absolute is not None
        worse = (cell.delta.absolute > 0) == (metric.better == "lower")
        return f'<td class="{"worse" if worse else "better"}">{_esc(text)}!</td>'
    if mark == "~":
        return f'<td class="within">~{_esc(text)}</td>'
    return f"<td>{_esc(text)}</td>"


def _value_cell(metric: Metric, cell: Cell) -> str:
    return f"<td>{_esc(value_text(metric, cell))}</td>"


def comparison_html(comparison: Comparison) -> str:
    metrics = table_metrics(comparison)
    axis = "users" if comparison.x_axis == "target_users" else "offered QPS"
    heads = [axis, "variant", "runs", *(m.label for m in metrics)]
    out = [
        '<table class="comparison"><tr>' + "".join(f"<th>{_esc(h)}</th>" for h in heads) + "</tr>"
    ]
    first = True
    for row in table_rows(comparison, metrics, _change_cell, _value_cell):
        label, variant, runs, *cells = row
        classes = []
        if label and not first:
            classes.append("block")
        if variant.strip().startswith("Δ"):
            classes.append("delta")
        first = False
        attr = f' class="{" ".join(classes)}"' if classes else ""
        out.append(
            f"<tr{attr}><td>{_esc(label)}</td><td>{_esc(variant)}</td><td>{_esc(runs)}</td>"
            + "".join(cells)
            + "</tr>"
        )
    out.append("</table>")
    return "".join(out)


def study_charts(study: StudyResult, notes: list[str]) -> list[Chart]:
    """The study's plotly figures as charts (keys ``study-1``, …); one that plotly refuses is
    left out with a note rather than costing the page."""
    charts = []
    for i, spec in enumerate(study.charts, 1):
        try:
            figure = go.Figure(spec)
        except (ValueError, TypeError) as exc:
            notes.append(f"study chart {i} could not be drawn: {exc}")
            continue
        title = figure.layout.title.text or f"{study.title}: chart {i}"
        charts.append(Chart(f"study-{i}", str(title), figure))
    return charts


def _study(study: StudyResult, charts: Sequence[Chart], inline: bool) -> str:
    parts = [f"<h2>Study: {_esc(study.title)}</h2>"]
    items = "".join(f"<li>{_esc(c)}</li>" for c in study.conclusions)
    parts.append(f"<ul>{items}</ul>" if items else "<p>No conclusion could be computed.</p>")
    for table in study.tables:
        parts.append(f"<h3>{_esc(table.title)}</h3>")
        cells = [["-" if c is None else f"{c:.4g}" if isinstance(c, float) else str(c)
                  for c in row] for row in table.rows]  # fmt: skip
        parts.append(html_table((list(table.headers), cells)))
    if charts and inline:
        parts.append(charts_html(charts))
    if study.notes:
        parts.append("<p>Notes:</p><ul>" + "".join(f"<li>{_esc(n)}</li>" for n in study.notes))
        parts.append("</ul>")
    return "".join(parts)


def _recommendations(overview: Overview) -> str:
    parts = [
        "<h2>Recommendations</h2><p>Each variant's rules (docs/report.md), merged over its "
        "finished runs: a rule that fired in some repeats only says in which; the sentence is "
        "the repeat where its figure was worst.</p>"
    ]
    for name, items in overview.advice.items():
        parts.append(f'<h3 data-variant="{_esc(name)}">{_esc(name)}</h3>')
        if not items:
            parts.append("<p>No rule fired: nothing measured crossed a threshold.</p>")
            continue
        lis = []
        for r in items:
            line = _esc(recommendation_line(r, lambda rule: f"\0{rule}\1"))
            line = line.replace("\0", "<code>").replace("\1", "</code>")
            partial = "" if r.everywhere else " partial"
            lis.append(f'<li class="{r.severity}{partial}" data-rule="{_esc(r.rule)}">{line}</li>')
        parts.append(f'<ul data-variant="{_esc(name)}">{"".join(lis)}</ul>')
    return "".join(parts)


def render_html(overview: Overview, notes: Sequence[str] = ()) -> str:
    manifest = overview.manifest
    notes = [*overview.notes, *notes]
    listed = "".join(f"<li>{_esc(k)}: <code>{_esc(v)}</code></li>" for k, v in facts(manifest))
    sections = [_STYLE]
    if manifest.command:
        sections.append(f"<p>Command: <code>{_esc(manifest.command)}</code></p>")
    sections += [f"<ul>{listed}</ul>", "<h2>Variants</h2>", html_table(variants_table(manifest)),
                 "<p><code>*</code> the baseline every delta is measured against.</p>"]  # fmt: skip
    charts: list[Chart] = run_charts(overview.runs) if overview.runs else []
    extra: list[Chart] = []
    if overview.study is not None:
        drawn = study_charts(overview.study, notes)
        inline = bool(charts)  # plotly.js comes with the page's charts; else these are them
        sections.append(_study(overview.study, drawn, inline))
        if not inline:
            extra = drawn
    after: list[str] = []
    if overview.comparison is None:
        sections.append(f"<p>{_esc(nothing_compared(manifest))}</p>")
    else:
        comparison = overview.comparison
        sections.append(_recommendations(overview))
        sections.append(f"<h2>Comparison (baseline: {_esc(comparison.baseline)})</h2>")
        if comparison.notes:
            sections.append("<ul>" + "".join(f"<li>{_esc(n)}</li>" for n in comparison.notes))
            sections.append("</ul>")
        sections += [comparison_html(comparison), f"<p>{_esc(LEGEND)}</p>"]
        if comparison.conditions:
            lines = "\n".join(condition_lines(comparison))
            sections.append(f"<h3>fail_if</h3><pre>{_esc(lines)}</pre>")
        sections.append(
            "<h2>Charts</h2><p>Every finished run against the offered load: one colour per "
            "variant, p50 solid and p99 dotted; a variant's repeats are one band from the lowest "
            "to the highest repeat at each load (the legend names the variant and its repeats)."
            "</p>"
        )
        phases = phases_side_by_side(overview)
        if phases[1]:
            after += ["<h2>Where the time goes, per variant</h2>", f"<p>{_esc(PHASES_INTRO)}</p>",
                      html_table(phases)]  # fmt: skip
    if notes:
        sections.insert(1, "<ul>" + "".join(f"<li>note: {_esc(n)}</li>" for n in notes) + "</ul>")
    after += ["<h2>Run order</h2>", html_table(order_table(manifest))]
    after.append(
        "<p>Definitions: docs/metrics.md; the report: docs/report.md. comparison.json holds the "
        "comparison and each variant's recommendations; each run directory its own report.</p>"
    )
    title = f"ramplab experiment {manifest.name}"
    return html_page(title, sections, [*extra, *charts], after)
