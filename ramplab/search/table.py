"""``search.json`` read back and shown: the probe table and the answer, live and afterwards.

``search.json`` is rewritten after every probe, so the table can be rebuilt at any point of a
search — ``ramplab report SEARCH_DIR`` does exactly that, from the file alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ramplab.errors import UsageError
from ramplab.runs.rundir import RunDir

__all__ = [
    "COUNTS",
    "SEARCH_FILE",
    "answer_line",
    "count_cells",
    "print_search",
    "probe_table",
    "read_search",
    "unplaced",
    "write",
]

SEARCH_FILE = RunDir.SEARCH
_STYLE = {"pass": "green", "fail": "red", "generator-limited": "yellow", "interrupted": "yellow"}


def write(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # an interrupted search never leaves half a file


def read_search(directory: Path) -> dict[str, Any]:
    path = directory / SEARCH_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError("RUN_DIR", f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("probes"), list):
        raise UsageError("RUN_DIR", f"{path}: not a search result (no probes list)")
    return data


def _pct(value: Any) -> str:
    return f"{value * 100:.1f}" if isinstance(value, int | float) else "–"


def _num(value: Any, fmt: str = ".3g") -> str:
    return format(value, fmt) if isinstance(value, int | float) else "–"


def _cpu(shares: Mapping[str, float] | None) -> str:
    if not shares:
        return "–"
    return f"{max(shares.values()) * 100:.0f}"


COUNTS = ("scheduled", "dispatched", "completed", "failed", "dropped", "lost")


def unplaced(counts: Mapping[str, Any]) -> int:
    """Scheduled arrivals with neither a record nor a drop count (lost + unrecorded)."""
    lost = counts.get("lost") or 0
    return max(counts.get("missing") or 0, lost + max(0, counts.get("unaccounted") or 0))


def count_cells(probe: Mapping[str, Any]) -> list[str]:
    """The hold's arrivals by fate; ``lost`` shows every arrival with no record and no drop
    count, marked ``!`` when some were sent (the probe's reason says which)."""
    counts = probe.get("counts") or {}
    cells = [_num(counts.get(name), "d") for name in COUNTS]
    missing = unplaced(counts)
    if missing > (counts.get("lost") or 0):
        cells[-1] = f"{missing}!"
    return cells


def probe_table(probes: Sequence[Mapping[str, Any]], title: str = "search probes") -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("#", "phase", "QPS", "achieved", "sched", "sent", "done", "failed",
                 "dropped", "lost", "windows %", "attain %", "CI %", "late p99 ms", "gen CPU %",
                 "verdict", "reason"):  # fmt: skip
        table.add_column(
            name, justify="left" if name in ("phase", "verdict", "reason") else "right"
        )
    for p in probes:
        att = p.get("attainment") or {}
        windows = " ".join(_pct(w.get("attainment")) for w in p.get("windows", []))
        ci = f"{_pct(att.get('low'))}–{_pct(att.get('high'))}"
        verdict = str(p.get("verdict", "?"))
        table.add_row(
            str(p.get("index", "")),
            str(p.get("phase", "")),
            _num(p.get("rate")),
            _num(p.get("achieved_qps")),
            *(count_cells(p)),
            windows or "–",
            _pct(att.get("estimate")),
            ci,
            _num((p.get("lateness_ms") or {}).get("p99"), ".1f"),
            _cpu(p.get("generator_cpu")),
            f"[{_STYLE.get(verdict, 'white')}]{verdict}[/]",
            escape(str(p.get("reason", ""))),
        )
    return table


def answer_line(data: Mapping[str, Any]) -> str:
    """The answer in one sentence (or where the search stands when it has none yet)."""
    ans = data.get("answer")
    goal = (data.get("spec") or {}).get("goodput_min")
    if not ans:
        return "no answer yet (the search did not finish)"
    low, high = ans.get("bracket") or (None, None)
    status = ans.get("status")
    if status in ("found", "probe-limit", "interrupted") and ans.get("rate") is not None:
        ci = ans.get("attainment") or {}
        return (f"max sustainable rate: {ans['rate']:g} QPS with ≥ {goal:g} % of requests "
                f"meeting every SLO (bracket [{_num(low)}, {_num(high)}] QPS; attainment there "
                f"{_pct(ci.get('estimate'))} %, {ci.get('method', '')} "
                f"{(ci.get('level') or 0) * 100:g} % CI {_pct(ci.get('low'))}–"
                f"{_pct(ci.get('high'))} %) — {status}: {ans.get('reason', '')}")  # fmt: skip
    return f"{status}: {ans.get('reason', '')}"


def print_search(data: Mapping[str, Any], console: Console) -> None:
    console.print(probe_table(data["probes"]))
    console.print(answer_line(data), highlight=False)
