"""The digest (one pass, the summary's membership), the phase breakdown's join rule, and the
charts (offered load on x, one run or several overlaid, every chart with data, one plotly.js)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from ramplab.records.schema import batch_of
from ramplab.report.charts import LabelledRun, charts_html, plotly_script, run_charts
from ramplab.report.html import html_page
from ramplab.report.run import write_report
from ramplab.results.breakdown import group_breakdown
from ramplab.results.digest import digest_records, read_digest
from ramplab.runs.rundir import RunDir
from tests.ramplab.results.handmade import PHASES, SERVER, Run, failed, full, rec, steady

# Every chart of a run without sessions, reasoning or a prefix cache, in reading order; those in
# QUIET collapse into one sentence (key ``quiet``) when nothing happened.
KEYS = ["throughput", "pareto", "ttft", "itl", "tpot", "ttlt", "concurrency", "tokens",
        "stream_rate", "errors", "retries", "lateness", "omission", "dropped", "timeline",
        "ttft_cdf", "itl_cdf", "tpot_cdf", "ttlt_cdf", "phases"]  # fmt: skip
QUIET = ("errors", "retries", "dropped")


def drawn(keys: Sequence[str] = QUIET) -> list[str]:
    """``KEYS`` with the charts in ``keys`` collapsed into the ``quiet`` sentence."""
    at = min(KEYS.index(k) for k in keys)
    kept = [k for k in KEYS if k not in keys]
    return [*kept[:at], "quiet", *kept[at:]]


def test_the_digest_counts_exactly_the_records_the_summary_counts() -> None:
    run = steady((2, 8))
    warmup = rec(0, 0, 20)
    warmup.step = None
    warmup.intended_start -= 100  # before the run: in no step, like the summary
    summary = run.summary()
    digest = digest_records(iter([*run.records, warmup]), summary)
    assert digest.records == len(run.records) + 1
    for step, d in zip(summary.steps, digest.steps, strict=True):
        assert d.ttft_ms.size == step.ttft_ms.count
        assert d.itl_ms.size == step.itl_ms.count
        assert len(d.phases) == step.ok
    assert digest.pooled("ttft_ms").size == summary.ttft_ms.count


def test_the_digest_reads_the_journal_as_a_stream_and_skips_a_torn_batch(
    tmp_path: Path,
) -> None:
    run = steady((2,))
    writer = RunDir(tmp_path).open_writer()
    for r in run.records:
        writer.write(r)
    writer.close()
    files = RunDir(tmp_path).records
    torn = batch_of([rec(0, 3, 20)]).serialize().to_pybytes()
    with files.journal.open("ab") as handle:
        handle.write(torn[: len(torn) // 2])  # a crash mid-message
    digest = read_digest(files, run.summary())
    assert digest.records == 20
    assert read_digest(RunDir(tmp_path / "missing").records, run.summary()).records == 0


def test_the_digest_reads_an_old_runs_requests_jsonl_and_skips_a_torn_line(
    tmp_path: Path,
) -> None:
    run = steady((2,))
    with (tmp_path / "requests.jsonl").open("wb") as handle:
        for r in run.records:
            handle.write(orjson.dumps(r.to_dict()) + b"\n")
        handle.write(orjson.dumps(rec(0, 3, 20).to_dict())[:40])  # a crash mid-line
    digest = read_digest(RunDir(tmp_path).records, run.summary())
    assert digest.records == 20


def test_retries_and_retry_after_answers_are_counted_by_status() -> None:
    step = full(10, 0)
    step[0] = failed(0, 0, 100, 429, retry_after_s=2.0, attempts=3)
    d = digest_records(iter(step), Run((10,), [step]).summary()).steps[0]
    assert d.retried == {"429": 2}
    assert d.failed_with_retry_after == {"429": 1}
    assert d.retry_after_answers == 3


def test_join_rule_server_phases_sit_inside_the_clients_window() -> None:
    _summary, digest = steady((10,)).evidence()
    b = group_breakdown(digest.pooled("phases"), "median")
    assert b is not None
    assert b.server is not None
    window = PHASES["wait"] + PHASES["first_token"] + PHASES["stream"]
    # the signature is taken out of decode: nothing counts twice
    assert b.server["decode"] == pytest.approx(SERVER["decode"] - 1.0 - 0.2 - 0.0)
    inside = sum(v for k, v in b.server.items() if k not in ("before", "unseen"))
    assert b.server["unseen"] == pytest.approx(window - inside)
    assert b.server["before"] == pytest.approx(sum(b.client[k] for k in (
        "lateness", "retries", "dns", "connect", "tls", "stall", "send")))  # fmt: skip
    # both views cover the same time
    assert sum(b.server.values()) == pytest.approx(sum(b.client.values()))
    assert b.client["retries"] == pytest.approx(0.0)


def test_join_rule_without_server_timings_keeps_the_client_view_alone() -> None:
    run = steady((10,))
    run.steps[0][50].server_timing_ms = {}
    b = group_breakdown(run.evidence()[1].pooled("phases"), "p99")
    assert b is not None
    assert b.server is None or b.count == 1  # the group holds timed requests only if it can


def test_groups_are_the_median_band_and_the_slowest_one_percent() -> None:
    step = [rec(0, i, 200, ttlt_ms=100.0 + i) for i in range(200)]
    phases = digest_records(iter(step), Run((20,), [step]).summary()).pooled("phases")
    median, tail = group_breakdown(phases, "median"), group_breakdown(phases, "p99")
    assert median is not None
    assert tail is not None
    assert median.count == 20  # TTLT within [p45, p55] = [189.55, 209.45] of 100..299
    assert tail.count == 2  # TTLT ≥ p99: the two slowest
    assert tail.ttlt_ms == pytest.approx((298.0 + 299.0) / 2)


def two_runs() -> list[LabelledRun]:
    a, b = steady((2, 8)), Run((4, 16), [full(4, 0), full(16, 1, ttft_ms=60.0)])
    return [LabelledRun("a", *a.evidence()), LabelledRun("b", *b.evidence())]


def points(trace: object) -> int:
    values = getattr(trace, "x", None) or ()
    return sum(1 for v in values if v is not None)


@pytest.mark.parametrize("count", [1, 2])
def test_every_chart_has_data_on_the_offered_load_axis(count: int) -> None:
    runs = two_runs()[:count]
    charts = run_charts(runs)
    assert [c.key for c in charts] == drawn()  # no errors, retries nor drops: one sentence
    quiet = next(c for c in charts if c.key == "quiet")
    assert quiet.figure is None
    assert quiet.note == "No errors, retries or dropped arrivals at any step (nothing to chart)."
    for chart in charts:
        if chart.figure is None:
            continue
        assert chart.figure.data, chart.key
        assert any(points(t) for t in chart.figure.data), chart.key
    ttft = next(c for c in charts if c.key == "ttft").figure
    assert ttft is not None
    xs = {tuple(t.x) for t in ttft.data}
    assert xs == ({(2.0, 8.0), (4.0, 16.0)} if count == 2 else {(2.0, 8.0)})  # not step numbers
    names = [t.name for t in ttft.data]
    if count == 2:  # overlaid: p50 and p99 only
        assert names == ["a · p50", "b · p50", "a · p99", "b · p99"]
    else:
        assert names == ["p50", "p90", "p99", "p99.9"]


def test_the_phase_chart_joins_client_and_server_bars_per_run_and_group() -> None:
    phases = next(c for c in run_charts(two_runs()) if c.key == "phases").figure
    assert phases is not None
    categories = list(phases.data[0].y)
    # Identical requests tie: every one is in both groups.
    assert categories == [
        "a · median (p45–p55) (n=100) · client", "a · median (p45–p55) (n=100) · server",
        "a · slowest 1 % (n=100) · client", "a · slowest 1 % (n=100) · server",
        "b · median (p45–p55) (n=200) · client", "b · median (p45–p55) (n=200) · server",
        "b · slowest 1 % (n=200) · client", "b · slowest 1 % (n=200) · server",
    ]  # fmt: skip
    names = {t.name for t in phases.data}
    assert {"server: prefill", "server: decode", "wait for response head", "mean TTLT"} <= names
    assert "TLS" not in names  # no request spent time in TLS: no empty segment


def test_a_page_inlines_plotly_once_and_fetches_nothing(tmp_path: Path) -> None:
    charts = run_charts(two_runs())
    page = html_page("a vs b", ["<p>x</p>"], charts)
    script = plotly_script()
    assert page.count(script) == 1
    assert page.count("Plotly.newPlot(") == len(drawn()) - 1
    assert page.count('<p class="chart-collapsed" data-chart="quiet">No errors') == 1
    assert "<script src" not in page
    assert "<link" not in page
    assert charts_html(charts) == charts_html(run_charts(two_runs()))  # deterministic


def test_write_report_writes_all_three_files_and_is_reproducible(tmp_path: Path) -> None:
    run = steady((2, 8))
    summary = run.summary()
    writer = RunDir(tmp_path).open_writer()
    for r in run.records:
        writer.write(r)
    writer.close()
    md = write_report(tmp_path, summary).markdown.read_text(encoding="utf-8")
    for heading in ("## Recommendations", "## Per step", "## Latency percentiles per step",
                    "## What the generator delivered", "## Where the time goes"):  # fmt: skip
        assert heading in md, heading
    assert "| TTFT | 2 QPS | 20 | 30.0 | 30.0 | 30.0 | 30.0 | 30.0 | 30.0 | 30.0 |" in md
    assert "|  | 8 QPS | 80 | 30.0 |" in md  # per step: no percentile pooled over loads
    assert "over all measured windows" not in md.lower()
    assert "Goodput: the requests per second that met every SLO" in md  # beside its figures
    assert "`tail_sample_size`" in md
    recs = orjson.loads((tmp_path / "recommendations.json").read_bytes())
    assert [r["rule"] for r in recs["recommendations"]] == ["tail_sample_size"]
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.count('class="plotly-graph-div"') == len(drawn()) - 1
    assert "goodput: the requests that met every SLO (or succeeded, without an SLO)" in html
    write_report(tmp_path, summary)
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == md


def test_ttft_by_turn_appears_only_with_sessions() -> None:
    records = [
        rec(0, 2 * s + t - 1, 20, session_id=f"s{s}", turn=t, ttft_ms=10.0 * t)
        for s in range(10)
        for t in (1, 2)
    ]
    session_run = LabelledRun("sessions", *Run((2,), [records]).evidence())
    keys = [c.key for c in run_charts([session_run])]
    assert keys == [*drawn()[:6], "ttft_by_turn", *drawn()[6:]]
    chart = next(c for c in run_charts([session_run]) if c.key == "ttft_by_turn").figure
    assert chart is not None
    p50 = next(t for t in chart.data if t.name == "p50")
    assert (tuple(p50.x), tuple(p50.y)) == ((1.0, 2.0), (10.0, 20.0))
    assert "ttft_by_turn" not in [c.key for c in run_charts(two_runs())]
