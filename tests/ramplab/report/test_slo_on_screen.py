"""The run's SLO is on screen: stated above the per-step table, each step's attainment in it —
the same in the terminal, report.md and report.html, and absent when the run had none."""

from __future__ import annotations

import io

from rich.console import Console

from ramplab.report.markdown import RunMeta, render_markdown
from ramplab.report.run import print_steps
from ramplab.report.tables import COLUMNS, step_columns
from ramplab.results.digest import digest_records
from ramplab.results.slo import RequestSlo
from tests.ramplab.results.handmade import Run, rec

N = 20


def run(slo: RequestSlo) -> Run:
    # Step 0: every request meets a 25 ms TTFT; step 1: half of them do.
    fast = [rec(0, i, N, ttft_ms=20.0) for i in range(N)]
    half = [rec(1, i, N, ttft_ms=20.0 if i % 2 else 30.0) for i in range(N)]
    return Run(rates=(2.0, 2.0), steps=[fast, half], slo=slo)


def test_the_table_shows_each_steps_attainment_and_states_the_slo() -> None:
    hand = run(RequestSlo(ttft_ms=25.0))
    summary = hand.summary()
    assert summary.slo == {"ttft_ms": 25.0}
    columns = step_columns(summary)
    assert ("SLO met", "goodput_ratio", "{:.1%}") in columns
    out = io.StringIO()
    print_steps(summary, Console(file=out, width=200, color_system=None))
    printed = out.getvalue()
    assert "SLO: ttft_ms ≤ 25 ms" in printed
    assert "100.0%" in printed
    assert "50.0%" in printed
    digest = digest_records(hand.records, summary)
    markdown = render_markdown("r", RunMeta(), summary, digest, ())
    assert "ttft_ms ≤ 25 ms" in markdown
    assert "| SLO met |" in markdown
    assert "50.0%" in markdown


def test_without_an_slo_the_table_is_unchanged() -> None:
    summary = run(RequestSlo()).summary()
    assert summary.slo is None
    assert step_columns(summary) == COLUMNS
    out = io.StringIO()
    print_steps(summary, Console(file=out, width=200, color_system=None))
    assert "SLO" not in out.getvalue()
