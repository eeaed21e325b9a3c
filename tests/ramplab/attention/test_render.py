"""The tables, JSON and chart page on a hand-made result."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from rich.console import Console

from ramplab.attention.relevance import Relevance
from ramplab.attention.render import Backtrace, print_backtrace, to_json, write_chart


def backtrace() -> Backtrace:
    values = np.array([0.05, 0.1, 0.6, 0.2, 0.05])
    return Backtrace("tiny", Path("/m"), 512, 6, 12, 5, "key is 7.", "key?",
                     [Relevance(50.0, 2, "7", values, causal=False)])  # fmt: skip


def test_json_holds_every_value_against_its_distance() -> None:
    doc = to_json(backtrace())
    [depth] = doc["depths"]
    assert depth["distance"] == [-2, -1, 0, 1, 2]
    assert depth["relevance"] == [0.05, 0.1, 0.6, 0.2, 0.05]
    assert (depth["peak_distance"], depth["answer_token"], doc["uniform"]) == (0, "7", 0.2)
    assert sum(b["positions"] for b in depth["bins"]) == 5


def test_tables_and_an_offline_page(tmp_path: Path) -> None:
    out = io.StringIO()
    print_backtrace(Console(file=out, width=200), backtrace())
    text = out.getvalue()
    assert "Attention backtrace — tiny" in text
    assert "bidirectional" in text
    assert "0.6000" in text  # relevance at distance 0
    page = tmp_path / "a.html"
    write_chart(backtrace(), page)
    html = page.read_text()
    assert 'data-chart="attention"' in html
    assert "<script src=" not in html
