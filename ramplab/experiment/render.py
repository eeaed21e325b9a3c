"""A comparison as a terminal table, as ``comparison.md`` and as ``comparison.json``.

One table: a block of rows per step of the x-axis (then one for the whole run), a row per
variant, a column per metric. A baseline cell shows its mean (``±`` half the spread across
repeats); every other cell adds its change against the baseline in percent — bold and coloured
(green better, red worse) when it exceeds the noise, dim with ``~`` when it does not, plain when
the noise is unknown (fewer than two repeats on either side). Under it, each variant's
recommendations (``recommendations.py``: the runs' fired rules merged over the repeats), which
``comparison.json`` also carries per variant. The experiment's whole report (``report.md``,
``report.html``) reuses these rows (``mdreport.py``, ``htmlreport.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ramplab.experiment.compare import Cell, Comparison, Metric, Point
from ramplab.experiment.recommendations import VariantRecommendation, variant_recommendations
from ramplab.runs.rundir import ExperimentDir

__all__ = [
    "LEGEND",
    "TABLE_METRICS",
    "Advice",
    "change",
    "comparison_json",
    "comparison_table",
    "condition_lines",
    "markdown",
    "markdown_table",
    "print_comparison",
    "recommendation_line",
    "recommendation_lines",
    "table_metrics",
    "table_rows",
    "value_text",
    "write_comparison",
]

Advice = dict[str, list[VariantRecommendation]]  # per variant name

TABLE_METRICS = (
    "achieved_qps",
    "goodput_qps",
    "goodput_ratio",
    "error_ratio",
    "ttft_ms.p50",
    "ttft_ms.p99",
    "itl_ms.p50",
    "tpot_ms.p50",
    "ttlt_ms.p99",
    "output_tokens_per_s",
)
JSON_FILE = ExperimentDir.COMPARISON_JSON
MD_FILE = ExperimentDir.COMPARISON_MD
LEGEND = (
    "Mean over a variant's finished runs, ± half their spread. Δ: change against the baseline "
    "(*); ! exceeds the noise (half the variant's spread + half the baseline's), ~ is within "
    "it, no mark: noise unknown (fewer than 2 repeats)."
)


def _fmt(metric: Metric, value: float | None) -> str:
    if value is None:
        return "-"
    if metric.unit == "ratio":
        return f"{value:.1%}"
    if metric.unit == "tokens/s":
        return f"{value:.0f}"
    if metric.unit == "ms":
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return f"{value:.2f}" if metric.unit == "QPS" else f"{value:.4g}"


def value_text(metric: Metric, cell: Cell) -> str:
    """A cell's mean, with ``±`` half the spread when the variant ran more than once."""
    text = _fmt(metric, cell.value.mean)
    spread = cell.value.half_range
    if cell.value.n >= 2 and spread:
        text += f" ±{_fmt(metric, spread)}"
    return text


def change(metric: Metric, cell: Cell) -> tuple[str, str]:
    """(change text, mark): mark is '!' beyond the noise, '~' within it, '' noise unknown."""
    delta = cell.delta
    if delta is None or delta.absolute is None:
        return "-", ""
    if metric.unit == "ratio" or delta.relative is None:
        change = f"{'+' if delta.absolute >= 0 else ''}{_fmt(metric, delta.absolute)}"
    else:
        change = f"{delta.relative:+.1%}"
    mark = "" if delta.exceeds_noise is None else "!" if delta.exceeds_noise else "~"
    return change, mark


def _rich_change(metric: Metric, cell: Cell) -> str:
    text, mark = change(metric, cell)
    if mark == "~":
        return f"[dim]~{text}[/]"
    if mark == "":
        return text
    assert cell.delta is not None
    assert cell.delta.absolute is not None
    worse = (cell.delta.absolute > 0) == (metric.better == "lower")
    return f"[bold {'red' if worse else 'green'}]{text}![/]"


def _md_change(metric: Metric, cell: Cell) -> str:
    text, mark = change(metric, cell)
    return f"**{text}!**" if mark == "!" else f"{'~' if mark == '~' else ''}{text}"


def table_metrics(comparison: Comparison, keys: Sequence[str] = TABLE_METRICS) -> list[Metric]:
    by_key = {m.key: m for m in comparison.metrics}
    return [by_key[k] for k in keys if k in by_key]


def _x_label(comparison: Comparison) -> str:
    return "users" if comparison.x_axis == "target_users" else "offered QPS"


def table_rows(
    comparison: Comparison,
    metrics: Sequence[Metric],
    change: Callable[[Metric, Cell], str],
    value: Callable[[Metric, Cell], str] = value_text,
) -> list[list[str]]:
    """Per point: a row of values per variant, and under each non-baseline one its changes
    (``change`` and ``value`` format the cells: terminal, Markdown or HTML)."""
    rows = []
    points: list[tuple[str, Point]] = [
        (f"{p.x:g}" if p.x is not None else "?", p) for p in comparison.steps
    ]
    if not points:  # a run without steps; otherwise per step only: no row pools the rates
        points.append(("whole run", comparison.run))
    for label, point in points:
        first = True
        for group in comparison.groups:
            cells = point.cells[group.name]
            if all(cells[m.key].value.n == 0 for m in metrics):
                continue  # this variant has no such step
            star = " *" if group.name == comparison.baseline else ""
            rows.append([label if first else "", f"{group.name}{star}", str(len(group.runs)),
                         *(value(m, cells[m.key]) for m in metrics)])  # fmt: skip
            first = False
            if group.name != comparison.baseline:
                rows.append(["", "  Δ vs *", "", *(change(m, cells[m.key]) for m in metrics)])
    return rows


def comparison_table(comparison: Comparison, keys: Sequence[str] = TABLE_METRICS) -> Table:
    metrics = table_metrics(comparison, keys)
    table = Table(
        title=f"comparison (baseline *: {comparison.baseline})",
        title_justify="left",
        caption=LEGEND,
        caption_justify="left",
    )
    table.add_column(_x_label(comparison), justify="right")
    table.add_column("variant")
    table.add_column("runs", justify="right")
    for m in metrics:
        table.add_column(m.label, justify="right")
    previous = None
    for row in table_rows(comparison, metrics, _rich_change):
        if row[0] and previous is not None:
            table.add_section()
        previous = row
        table.add_row(*row)
    return table


def condition_lines(comparison: Comparison) -> list[str]:
    lines = []
    for c in comparison.conditions:
        verdict = "HOLDS" if c.holds else "does not hold"
        lines.append(f"fail-if {c.condition!r}: {verdict}")
        for f in c.findings:
            if f.holds:
                value = "-" if f.value is None else f"{f.value:.4g}"
                limit = "-" if f.threshold is None else f"{f.threshold:.4g}"
                why = f" ({f.detail})" if f.detail else ""
                lines.append(f"  {f.variant} {f.where}: {value} vs {limit}{why}")
    return lines


def recommendation_line(r: VariantRecommendation, code: Callable[[str], str] = str) -> str:
    """``severity — sentence (rule; in k of n repeats: …; figure range)``; ``code`` formats the
    rule's name (Markdown backticks, HTML ``<code>``)."""
    extra = "; ".join(x for x in (r.where, r.spread) if x)
    return f"{r.severity} — {r.message} ({code(r.rule)}{'; ' + extra if extra else ''})"


def recommendation_lines(advice: Advice, code: Callable[[str], str] = str) -> list[str]:
    """Per variant a line ``name:``, then ``- `` and its recommendations (or that none fired)."""
    lines: list[str] = []
    for name, items in advice.items():
        lines.append(f"{name}:")
        lines += [f"- {recommendation_line(r, code)}" for r in items] or ["- no rule fired"]
    return lines


def print_comparison(
    comparison: Comparison,
    console: Console,
    keys: Sequence[str] = TABLE_METRICS,
    advice: Advice | None = None,
) -> None:
    """The notes, the table, the conditions, then (``advice``) what each variant's rules say
    to do or distrust — the notes (context) are left to the reports."""
    for note in comparison.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    console.print(comparison_table(comparison, keys))
    for line in condition_lines(comparison):
        style = "red" if line.startswith("fail-if") and "HOLDS" in line else ""
        console.print(f"[{style}]{line}[/]" if style else line, highlight=False)
    if advice:
        shown = {k: [r for r in v if r.severity != "note"] for k, v in advice.items()}
        if any(shown.values()):
            console.print("[bold]recommendations[/] (all of them: report.md)")
            for line in recommendation_lines({k: v for k, v in shown.items() if v}):
                console.print(f"  {line}", highlight=False)


def markdown_table(comparison: Comparison, keys: Sequence[str] = TABLE_METRICS) -> list[str]:
    """The comparison table's Markdown lines (header, rule, rows)."""
    metrics = table_metrics(comparison, keys)
    headers = [_x_label(comparison), "variant", "runs", *(m.label for m in metrics)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(comparison, metrics, _md_change)]
    return lines


def markdown(
    comparison: Comparison, keys: Sequence[str] = TABLE_METRICS, advice: Advice | None = None
) -> str:
    lines = [f"# Comparison (baseline: {comparison.baseline})", ""]
    lines += [f"- {n}" for n in comparison.notes]
    lines += ["", *markdown_table(comparison, keys), "", LEGEND, ""]
    lines += ["## Variants", ""]
    for group in comparison.groups:
        lines.append(f"- **{group.name}**: " + ", ".join(str(r.path) for r in group.runs))
    if comparison.conditions:
        lines += ["", "## Conditions", ""]
        lines += [f"    {line}" for line in condition_lines(comparison)]
    if advice is not None:
        lines += ["", "## Recommendations", ""]
        for name, items in advice.items():
            lines += [f"**{name}**", ""]
            lines += [f"- {recommendation_line(r, _md_code)}" for r in items] or ["- no rule fired"]
            lines.append("")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def _md_code(text: str) -> str:
    return f"`{text}`"


def comparison_json(comparison: Comparison, advice: Advice) -> dict[str, Any]:
    """``comparison.json``: ``Comparison.to_json()``, each variant with its ``recommendations``
    (``VariantRecommendation.to_json()``)."""
    data = comparison.to_json()
    for variant in data["variants"]:
        variant["recommendations"] = [r.to_json() for r in advice.get(variant["name"], [])]
    return data


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_comparison(
    comparison: Comparison, directory: Path, advice: Advice | None = None
) -> tuple[Path, Path]:
    """``comparison.json`` and ``comparison.md`` in ``directory``; returns their paths.
    ``advice``: the variants' recommendations, read from their runs when not given."""
    if advice is None:
        advice = variant_recommendations(comparison.groups)
    json_path, md_path = directory / JSON_FILE, directory / MD_FILE
    _atomic(json_path, json.dumps(comparison_json(comparison, advice), indent=2) + "\n")
    _atomic(md_path, markdown(comparison, advice=advice))
    return json_path, md_path
