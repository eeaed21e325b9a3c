"""A search's report: ``search.md`` and ``search.html`` beside ``search.json``.

Built from ``search.json`` alone, so ``ramplab report SEARCH_DIR`` rewrites both at any time: the
probes in the order they ran (rate offered and achieved, arrivals by fate, attainment with its
interval, TTFT and ITL p50/p99, verdict and reason), the bracket and the answer. The HTML is one
offline file; every value in it is escaped (a reason quotes a campaign's text).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ramplab.runs.rundir import RunDir, write_atomically
from ramplab.search.table import COUNTS, answer_line, unplaced

__all__ = ["HEADERS", "probe_rows", "search_html", "search_markdown", "write_search_report"]

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
        ("SLO", str(data.get("slo", ""))),
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


_CSS = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "td:last-child,td:nth-child(2){text-align:left}.pass{color:#080}.fail{color:#b00}"
)


def search_html(data: Mapping[str, Any]) -> str:
    esc = html.escape
    title = esc(f"Search: {data.get('campaign', '')}")
    facts = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in _facts(data))
    head = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
    body = []
    for row in probe_rows(data.get("probes") or []):
        verdict = row[HEADERS.index("verdict")]
        cells = "".join(f"<td>{esc(c)}</td>" for c in row)
        body.append(f'<tr class="{esc(verdict)}">{cells}</tr>')
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"<style>{_CSS}</style></head><body><h1>{title}</h1><p>{esc(answer_line(data))}</p>"
            f"<dl>{facts}</dl><h2>Probes, in the order they ran</h2><table><thead><tr>{head}"
            f"</tr></thead><tbody>{''.join(body)}</tbody></table></body></html>\n")  # fmt: skip


def write_search_report(directory: Path, data: Mapping[str, Any]) -> tuple[Path, Path]:
    """``search.md`` and ``search.html`` into the search's ``directory``."""
    run_dir = RunDir(directory)
    write_atomically(run_dir.search_md, search_markdown(data))
    write_atomically(run_dir.search_html, search_html(data))
    return run_dir.search_md, run_dir.search_html
