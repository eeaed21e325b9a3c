"""A real run's ``report.html`` in a real headless browser (Debian's chromium): it renders,
every chart holds plotly traces with points once the scripts ran, and nothing logs an error.
``ramplab report`` rebuilds the same report from the saved files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ramplab.measure.record import UNFINISHED
from ramplab.report.charts import LabelledRun
from ramplab.report.charts.generator import quiet_sentence
from ramplab.runs.rundir import RunDir
from tests.ramplab.report.test_charts import KEYS, QUIET
from tests.support.browser import CHROMIUM, NO_CHROMIUM, WINDOW, console_errors, render
from tests.support.cli import ramplab

pytestmark = pytest.mark.slow


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_a_real_report_renders_in_chromium_with_data_in_every_chart(
    report_run: Path, tmp_path: Path
) -> None:
    page = report_run / "report.html"
    text = page.read_text(encoding="utf-8")
    assert "<script src" not in text
    assert "<link" not in text  # opens offline: nothing to fetch
    probe, log = render(page, tmp_path)
    assert probe["errors"] == []
    assert not console_errors(log), log[-3000:]
    charts = {c["id"]: c for c in probe["charts"]}
    # A chart with nothing to show is a sentence; every other one is drawn, with points.
    quiet = [key for key in QUIET if f'id="chart-{key}"' not in text]
    assert "dropped" in quiet  # enough users: nothing dropped
    assert "retries" not in quiet  # the injected 429s were retried
    assert quiet_sentence(quiet) in text
    expected = [f"chart-{key}" for key in KEYS if key not in quiet]
    assert sorted(charts) == sorted(expected)
    for chart_id, chart in charts.items():
        assert chart["drawn"], chart_id
        assert chart["svg"] >= 1, chart_id
        assert chart["traces"], chart_id
        assert sum(chart["traces"]) > 0, (chart_id, chart["traces"])


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_verdict_is_in_the_first_viewport(report_run: Path, tmp_path: Path) -> None:
    shot = tmp_path / "first-viewport.png"
    probe, _ = render(report_run / "report.html", tmp_path, screenshot=shot)
    verdict = probe["verdict"]
    assert verdict is not None, "no verdict block in report.html"
    # The window's height less the browser's own bars.
    assert WINDOW[1] / 2 < probe["viewport"] <= WINDOW[1]
    assert 0 <= verdict["top"] < verdict["bottom"] <= probe["viewport"], verdict
    text = verdict["text"]
    for label in ("SLO", "answer", "knee", "trust", "next"):
        assert label in text, text
    assert "ttft_ms ≤" in text  # the run's own SLO, named
    assert shot.stat().st_size > 10_000  # a real picture of the page, kept for a reader


def test_the_real_run_has_retries_recommendations_and_every_percentile(report_run: Path) -> None:
    summary = json.loads((report_run / "summary.json").read_text(encoding="utf-8"))
    for p in (summary["ttft_ms"], summary["itl_ms"], summary["ttlt_ms"]):
        assert p["count"] > 0
        assert p["p50"] <= p["p90"] <= p["p95"] <= p["p99"] <= p["p999"] <= p["max"]
        assert p["min"] <= p["mean"] <= p["max"]
    assert summary["retry_amplification"] > 1.0  # the injected 429s were retried
    recs = json.loads((report_run / "recommendations.json").read_text(encoding="utf-8"))
    fired = {r["rule"] for r in recs["recommendations"]}
    assert "tail_sample_size" in fired  # a few seconds per step: p99 over < 100 requests
    assert "retry_after_ignored" not in fired  # the client honoured Retry-After
    md = (report_run / "report.md").read_text(encoding="utf-8")
    assert "## Where the time goes" in md
    assert "server: prefill" in md  # the target's phases joined with the client's


def test_report_rebuilds_every_file_from_the_saved_results(
    report_run: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(report_run, copy)
    for name in ("report.md", "report.html", "recommendations.json"):
        (copy / name).unlink()
    done = ramplab(["report", str(copy)])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # Same run, same files: only the directory's name differs in the title.
    original = (report_run / "report.md").read_text(encoding="utf-8")
    rebuilt = (copy / "report.md").read_text(encoding="utf-8")
    assert rebuilt.replace("`copy`", "`run`", 1) == original
    assert (copy / "recommendations.json").read_bytes() == (
        report_run / "recommendations.json"
    ).read_bytes()
    assert (copy / "report.html").stat().st_size > 1_000_000


def test_the_real_runs_tokens_requests_in_flight_and_timeline_agree_with_its_records(
    report_run: Path,
) -> None:
    """The digest's new figures, checked on the real run against a plain loop over its records
    (an independent, obvious implementation of the rules in docs/report.md)."""
    run = LabelledRun.load(report_run)
    records = list(RunDir(report_run).records.records())
    origin = run.summary.run_start
    assert origin is not None
    flights = [(r.actual_start, r.intended_start + (r.total_ms or 0.0) / 1000.0)
               for r in records if r.attempts > 0 and r.total_ms is not None]  # fmt: skip
    t = run.digest.timeline
    assert t.sent.sum() == sum(1 for r in records if r.attempts > 0)
    assert t.failed.sum() == sum(1 for r in records if not r.ok and r.error_kind != UNFINISHED)
    assert t.in_flight.sum() == pytest.approx(sum(max(0.0, e - s) for s, e in flights))
    assert np.nanmax(t.ttft_p99_ms) > 0
    for step, d in zip(run.summary.steps, run.digest.steps, strict=True):
        assert d.output_tokens / step.measured_s == pytest.approx(step.output_tokens_per_s)
        assert d.prompt_tokens >= 16 * step.achieved_qps * step.measured_s  # 16-token prompts
        lo = origin + step.start_s + step.warmup_s
        hi = lo + step.measured_s
        inside = [(max(s, lo), min(e, hi)) for s, e in flights if s < hi and e > lo]
        assert d.in_flight_mean == pytest.approx(sum(e - s for s, e in inside) / step.measured_s)
        peak = max(sum(1 for s, e in inside if s <= at < e) for at, _ in inside)
        assert d.in_flight_max == peak
        assert 0 < d.in_flight_mean <= peak <= 40  # max_users
