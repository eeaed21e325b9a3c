"""A search's report: ``search.md`` and ``search.html`` beside ``search.json``.

Built from ``search.json`` alone, so ``ramplab report SEARCH_DIR`` rewrites both at any time: the
probes in the order they ran (rate offered and achieved, arrivals by fate, attainment with its
interval, TTFT and ITL p50/p99, verdict and reason), the bracket and the answer; the HTML adds
a chart of attainment and TTFT against the offered rate (the run report's page shell, plotly
inlined: one offline file). Every value in it is escaped (a reason quotes a campaign's text).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from ramplab.report.charts import Chart
from ramplab.report.html import html_page
from ramplab.runs.rundir import RunDir, write_atomically
from ramplab.search.table import COUNTS, answer_line, unplaced

__all__ = [
    "HEADERS",
    "probe_rows",
    "probes_chart",
    "search_html",
    "search_markdown",
    "write_search_report",
]

HEADERS = ("#", "phase", "offered QPS", "achieved QPS", *COUNTS, "unplaced", "attainment %",
           "CI %", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "verdict",
           "reason")  # fmt: skip


def _num(value: Any, fmt: str = ".3g") -> str:
    return format(value, fmt) if isinstance(value, int | float) else "–"


def _pct(value: Any) -> str:
    return f"{value * 100:.1f}" if isinstance(value, int | float) else "–"


def probe_rows(probes: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row of ``HEADERS`` per probe, in the order they ran (``unplaced``: scheduled
    arrivals with neither a record nor a drop count — lost, or sent without a record)."""
    rows = []
    for p in probes:
        counts = p.get("counts") or {}
        att = p.get("attainment") or {}
        ttft = p.get("ttft_ms") or {}
        itl = p.get("itl_ms") or {}
        rows.append([
            str(p.get("index", "")), str(p.get("phase", "")), _num(p.get("rate")),
            _num(p.get("achieved_qps")), *(_num(counts.get(n), "d") for n in COUNTS),
            str(unplaced(counts)) if counts else "–", _pct(att.get("estimate")),
            f"{_pct(att.get('low'))}–{_pct(att.get('high'))}", _num(ttft.get("p50"), ".1f"),
            _num(ttft.get("p99"), ".1f"), _num(itl.get("p50"), ".1f"),
            _num(itl.get("p99"), ".1f"), str(p.get("verdict", "?")), str(p.get("reason", "")),
        ])  # fmt: skip
    return rows


def _facts(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    spec = data.get("spec") or {}
    ans = data.get("answer") or {}
    low, high = ans.get("bracket") or (None, None)
    plan = data.get("plan")
    rule = f"{spec.get('criterion', '?')}"
    if plan:
        rule = (f"exact binomial test: ≥ {plan['needed']} good of {plan['requests']} arrivals; "
                f"a system at {plan['goal'] * 100:g} % passes with ≥ {plan['power']:g}, one at "
                f"{plan['floor'] * 100:g} % with ≤ {1 - plan['confidence']:.3g}")  # fmt: skip
    return [
        ("campaign", str(data.get("campaign", ""))),
        ("target", str(data.get("target", ""))),
        ("SLO", _slo_text(data.get("slo"))),
        ("goal", f"≥ {_num(spec.get('goodput_min'), 'g')} % of arrivals meet every SLO"),
        ("decision rule", rule),
        ("bracket", f"[{_num(low)}, {_num(high)}] QPS (highest pass, lowest fail)"),
        ("verdict", f"{ans.get('status', 'unfinished')} (exit code {ans.get('exit_code', '–')})"),
    ]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def search_markdown(data: Mapping[str, Any]) -> str:
    lines = [f"# Search: {_md_cell(str(data.get('campaign', '')))}", "",
             _md_cell(answer_line(data)), ""]  # fmt: skip
    lines += [f"- **{k}**: {_md_cell(v)}" for k, v in _facts(data)]
    lines += ["", "## Probes, in the order they ran", ""]
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "|".join(" --- " for _ in HEADERS) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |"
              for row in probe_rows(data.get("probes") or [])]  # fmt: skip
    return "\n".join(lines) + "\n"


def _slo_text(slo: Any) -> str:
    if isinstance(slo, Mapping) and slo:
        return ", ".join(f"{name} ≤ {limit:g} ms" for name, limit in slo.items())
    return str(slo or "none")


def probes_chart(data: Mapping[str, Any]) -> Chart | None:
    """Attainment and TTFT p50/p99 against the offered rate, one marker a probe coloured by its
    verdict, the goal as a dashed line and the bracket shaded; None without a measured probe."""
    probes = [p for p in data.get("probes") or [] if isinstance(p.get("rate"), int | float)]
    if not probes:
        return None
    fig = go.Figure()
    for verdict, colour in _VERDICT_COLOURS.items():
        chosen = [p for p in probes if p.get("verdict") == verdict]
        if not chosen:
            continue
        fig.add_trace(go.Scatter(
            x=[p["rate"] for p in chosen],
            y=[None if (a := (p.get("attainment") or {}).get("estimate")) is None else 100 * a
               for p in chosen],
            mode="markers", name=f"attainment % ({verdict})",
            marker={"color": colour, "size": 11, "symbol": "circle"},
            text=[f"probe {p.get('index')}: {p.get('reason', '')}" for p in chosen],
            hovertemplate="%{x:g} QPS: %{y:.1f} %<br>%{text}<extra></extra>",
        ))  # fmt: skip
    # Markers only: a rate probed twice (a generator-limited retry) has two points, not a zigzag.
    for key, name, symbol in (("p50", "TTFT p50 ms", "circle-open"), ("p99", "TTFT p99 ms", "x")):
        fig.add_trace(go.Scatter(
            x=[p["rate"] for p in probes],
            y=[(p.get("ttft_ms") or {}).get(key) for p in probes],
            mode="markers", name=name, yaxis="y2",
            marker={"color": "#555", "size": 8, "symbol": symbol},
        ))  # fmt: skip
    goal = (data.get("spec") or {}).get("goodput_min")
    if isinstance(goal, int | float):
        fig.add_hline(
            y=goal,
            line={"dash": "dash", "color": "#444"},
            annotation_text=f"goal {goal:g} %",
            annotation_position="bottom right",
        )
    low, high = ((data.get("answer") or {}).get("bracket")) or (None, None)
    if isinstance(low, int | float) and isinstance(high, int | float):
        fig.add_vrect(x0=low, x1=high, fillcolor="#2ca02c", opacity=0.12, line_width=0,
                      annotation_text="bracket", annotation_position="top left")  # fmt: skip
    fig.update_layout(
        title="Probes: attainment and TTFT against the offered rate",
        xaxis={"title": "offered QPS", "rangemode": "tozero"},
        yaxis={"title": "attainment %", "range": [0, 105]},
        yaxis2={"title": "TTFT ms", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25}, height=420,
        margin={"l": 60, "r": 60, "t": 50, "b": 40},
    )  # fmt: skip
    return Chart("probes", "Probes", fig, "Each marker is one probe, in the table below by its "
                 "number; the bracket is where the answer lies.")  # fmt: skip


_VERDICT_COLOURS = {"pass": "#2ca02c", "fail": "#d62728", "generator-limited": "#ff7f0e",
                    "interrupted": "#7f7f7f"}  # fmt: skip
_CSS = (
    "<style>tr.pass td{color:#080}tr.fail td{color:#b00}tr.generator-limited td{color:#a60}"
    "td.reason{text-align:left;max-width:26em;font-size:12px}"
    "dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 1.2em}"
    "dl.facts dt{font-weight:600}dl.facts dd{margin:0}</style>"
)


def search_html(data: Mapping[str, Any]) -> str:
    esc = html.escape
    title = f"Search: {data.get('campaign', '')}"
    facts = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in _facts(data))
    head = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
    body = []
    for row in probe_rows(data.get("probes") or []):
        verdict = row[HEADERS.index("verdict")]
        cells = "".join(f"<td>{esc(c)}</td>" for c in row[:-1])
        body.append(
            f'<tr class="{esc(verdict)}">{cells}<td class="reason">{esc(row[-1])}</td></tr>'
        )
    chart = probes_chart(data)
    sections = [
        _CSS,
        f'<section id="verdict"><h2>Answer</h2><p><strong>{esc(answer_line(data))}</strong></p>'
        f'<dl class="facts">{facts}</dl></section>',
    ]
    table = (f"<h2>Probes, in the order they ran</h2><table><thead><tr>{head}</tr></thead>"
             f"<tbody>{''.join(body)}</tbody></table>")  # fmt: skip
    return html_page(title, sections, [chart] if chart is not None else [], [table])


def write_search_report(directory: Path, data: Mapping[str, Any]) -> tuple[Path, Path]:
    """``search.md`` and ``search.html`` into the search's ``directory``."""
    run_dir = RunDir(directory)
    write_atomically(run_dir.search_md, search_markdown(data))
    write_atomically(run_dir.search_html, search_html(data))
    return run_dir.search_md, run_dir.search_html
