"""search.md and search.html from a hand-made search.json: every probe in order with its
counts, the bracket and the verdict; the HTML escapes everything; ``ramplab report`` rewrites
both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ramplab.runs.rundir import RunDir
from ramplab.search.report import search_html, search_markdown
from tests.support.cli import ramplab_in_process


def probe(index: int, rate: float, verdict: str, reason: str, **counts: int) -> dict[str, Any]:
    base = {"scheduled": 112, "dispatched": 112, "completed": 112, "failed": 0,
            "unfinished": 0, "dropped": 0, "lost": 0, "unaccounted": 0, "missing": 0}  # fmt: skip
    return {
        "index": index, "phase": "probe", "rate": rate, "achieved_qps": rate * 0.99,
        "counts": {**base, **counts},
        "attainment": {"estimate": 0.98, "low": 0.94, "high": 0.99, "level": 0.95,
                       "method": "wilson"},
        "ttft_ms": {"p50": 15.0, "p99": 40.0}, "itl_ms": {"p50": 10.0, "p99": 11.5},
        "verdict": verdict, "reason": reason,
    }  # fmt: skip


DATA: dict[str, Any] = {
    "campaign": "search <b>",
    "target": "local",
    "slo": {"ttft_ms": 100},
    "spec": {"goodput_min": 90, "criterion": "test"},
    "plan": {
        "goal": 0.9,
        "floor": 0.8,
        "confidence": 0.95,
        "power": 0.9,
        "requests": 112,
        "needed": 97,
    },
    "probes": [
        probe(1, 15, "pass", "112/112 good, 97 needed"),
        probe(2, 21, "fail", "<script>alert(1)</script> | stopped", scheduled=114, missing=2),
        probe(3, 18, "pass", "110/112 good"),
    ],
    "answer": {
        "status": "found",
        "rate": 18,
        "bracket": [18, 21],
        "reason": "within 10 %",
        "exit_code": 0,
    },
}


def test_markdown_lists_the_probes_in_order_with_their_counts() -> None:
    text = search_markdown(DATA)
    rows = [line for line in text.splitlines() if line.startswith("| 1 ") or
            line.startswith("| 2 ") or line.startswith("| 3 ")]  # fmt: skip
    assert [row.split("|")[3].strip() for row in rows] == ["15", "21", "18"]
    assert "| 114 |" in rows[1]  # scheduled
    assert "\\| stopped" in rows[1]  # a pipe in a reason does not split the cell
    assert "[18, 21] QPS" in text
    assert "found" in text
    assert "≥ 97 good of 112 arrivals" in text
    assert "| 10.0 | 11.5 |" in rows[0]  # ITL p50, p99


def test_html_escapes_everything() -> None:
    page = search_html(DATA)
    # The page has plotly's own scripts; the campaign's text never reaches it as markup — in
    # the table it is HTML-escaped, in the chart's data JSON-escaped (\u003c).
    assert "<script>alert(1)" not in page
    assert "alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "search &lt;b&gt;" in page
    assert "search <b>" not in page


def test_html_charts_every_probe_against_its_rate() -> None:
    page = search_html(DATA)
    assert 'id="chart-probes"' in page
    assert '"x":[15,18]' in page  # the passing probes' rates, in the order they ran
    assert '"x":[21]' in page  # the failing one


def test_report_rewrites_the_search_report(tmp_path: Path) -> None:
    (tmp_path / RunDir.SEARCH).write_text(json.dumps(DATA), encoding="utf-8")
    done = ramplab_in_process(["report", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / RunDir.SEARCH_MD).read_text(encoding="utf-8") == search_markdown(DATA)
    assert (tmp_path / RunDir.SEARCH_HTML).read_text(encoding="utf-8") == search_html(DATA)
    assert "2!" in done.stdout  # the probe with unplaced arrivals is marked in the table
