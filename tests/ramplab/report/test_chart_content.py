"""What the charts say, on hand-built runs whose right answer is known: the log axis of a
geometric ramp, throughput vs latency, requests in flight, tokens in and out, the TPOT and TTLT
CDFs, the run second by second, the omission gap, quiet charts collapsed, SLO lines, and an
experiment's repeats drawn as bands."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest

from ramplab.report.charts import Chart, LabelledRun, run_charts
from ramplab.report.charts.base import log_axis
from ramplab.results.digest import digest_records
from ramplab.results.slo import RequestSlo
from tests.ramplab.results.handmade import Run, failed, full, rec, steady


def charts(*runs: LabelledRun) -> dict[str, Chart]:
    return {c.key: c for c in run_charts(runs)}


def figure(chart: Chart) -> go.Figure:
    assert chart.figure is not None, chart.key
    return chart.figure


def trace(chart: Chart, name: str) -> Any:
    return next(t for t in figure(chart).data if t.name == name)


def one(run: Run, label: str = "r") -> LabelledRun:
    return LabelledRun(label, *run.evidence())


@pytest.mark.parametrize(
    ("loads", "log"),
    [
        ((1, 2, 5, 10, 20, 50, 100), True),  # the ramp that squeezed five steps into a fifth
        ((1, 2, 4, 8, 16, 32), True),
        ((10, 20, 30, 40, 50, 60, 70, 80, 90, 100), False),  # linear: stays linear
        ((4, 8), False),  # spans less than 10×
        ((1, 100), True),
        ((0, 10, 100), False),  # 0 has no place on a log axis
    ],
)
def test_a_geometric_ramp_spanning_ten_times_gets_a_log_axis(
    loads: tuple[float, ...], log: bool
) -> None:
    assert log_axis(loads) is log


def test_every_per_step_chart_of_a_geometric_ramp_is_drawn_on_log_x() -> None:
    rates = (1, 2, 5, 10, 20, 50, 100)
    drawn = charts(one(Run(rates, [full(r, i) for i, r in enumerate(rates)])))
    per_step = [c for c in drawn.values() if c.per_step]
    keys = {"throughput", "ttft", "itl", "tpot", "ttlt", "concurrency", "tokens", "omission"}
    assert keys <= {c.key for c in per_step}
    for chart in per_step:
        assert figure(chart).layout.xaxis.type == "log", chart.key
        assert "(log)" in figure(chart).layout.xaxis.title.text
        assert list(figure(chart).layout.xaxis.tickvals) == list(rates)  # a tick per step
    assert figure(drawn["pareto"]).layout.xaxis.type == "log"  # 10 to 2,000 tokens/s
    # y = x stays y = x: a point at every load, not a straight segment from 0 on a log axis
    assert list(trace(drawn["throughput"], "offered (y = x)").x) == [float(r) for r in rates]
    linear = charts(one(steady((2, 8))))
    assert all(figure(c).layout.xaxis.type == "linear" for c in linear.values() if c.per_step)


def test_throughput_vs_latency_puts_each_step_at_its_tokens_per_second() -> None:
    run = Run((2, 8), [full(2, 0), full(8, 1, ttft_ms=60.0)])
    chart = charts(one(run))["pareto"]
    p50 = trace(chart, "TTFT p50")
    assert list(p50.x) == [40.0, 160.0]  # 20 output tokens × 2 and × 8 requests per second
    assert list(p50.y) == [30.0, 60.0]
    assert list(trace(chart, "TTFT p99").text) == ["2 QPS", "8 QPS"]
    itl = trace(chart, "ITL p50 (right axis)")
    assert itl.yaxis == "y2"
    assert itl.y[0] == pytest.approx(70.0 / 19)


def test_requests_in_flight_are_the_time_average_and_the_peak_inside_each_window() -> None:
    slow = full(8, 1, ttlt_ms=300.0, total_ms=300.0)
    first = full(2, 0)
    # The last request of step 0 (sent at 9.751 s) is in flight until 11.75 s: 1.75 s of it
    # lie in step 1's window, where it counts although it belongs to step 0.
    first[-1] = replace(first[-1], ttlt_ms=2000.0, total_ms=2000.0)
    run = one(Run((2, 8), [first, slow]))
    low, high = run.digest.steps
    assert low.in_flight_mean == pytest.approx((19 * 0.099 + 0.249) / 10, rel=1e-6)
    assert low.in_flight_max == 1
    # The last two requests of step 1 run 0.2375 s and 0.1125 s past the window's end: cut off.
    assert high.in_flight_mean == pytest.approx((80 * 0.299 - 0.35 + 1.75) / 10, rel=1e-6)
    assert high.in_flight_max == 4  # three overlapping 0.3 s requests at 8 QPS, and the long one
    chart = charts(run)["concurrency"]
    assert list(trace(chart, "peak in flight").y) == [1.0, 4.0]
    assert trace(chart, "mean in flight").y[1] == pytest.approx(high.in_flight_mean)


def test_tokens_per_second_in_out_and_total_follow_the_summarys_rule() -> None:
    run = Run((2, 8), [full(2, 0, prompt_tokens=100), full(8, 1, prompt_tokens=100)])
    labelled = one(run)
    for step, d in zip(labelled.summary.steps, labelled.digest.steps, strict=True):
        assert d.output_tokens / step.measured_s == pytest.approx(step.output_tokens_per_s)
    chart = charts(labelled)["tokens"]
    assert list(trace(chart, "input (prompt) tokens/s").y) == [200.0, 800.0]
    assert list(trace(chart, "output tokens/s").y) == [40.0, 160.0]
    assert list(trace(chart, "total tokens/s").y) == [240.0, 960.0]


def test_tpot_and_ttlt_have_cdfs_of_their_exact_values() -> None:
    run = Run((2,), [[rec(0, i, 20, ttlt_ms=100.0 + i, tpot_ms=float(i)) for i in range(20)]])
    drawn = charts(one(run))
    tpot, ttlt = trace(drawn["tpot_cdf"], "all steps"), trace(drawn["ttlt_cdf"], "all steps")
    assert (tpot.x[0], tpot.x[-1]) == (0.0, 19.0)
    assert (ttlt.x[0], ttlt.x[-1]) == (100.0, 119.0)
    assert (tpot.y[0], tpot.y[-1]) == (0.0, 1.0)


def test_the_run_second_by_second() -> None:
    step0 = full(2, 0)
    step0[3] = failed(0, 3, 20, 503)  # intended 1.75 s after the start
    # One long request: sent at 0.5 s, done at 3.5 s — in flight ½ + 1 + 1 + ½ s.
    step0[0] = replace(step0[0], actual_start=step0[0].intended_start + 0.25, total_ms=3250.0,
                       ttlt_ms=3250.0, lateness_ms=250.0)  # fmt: skip
    run = one(Run((2, 8), [step0, full(8, 1)]))
    t = run.digest.timeline
    assert t.start_s == 0
    assert t.sent.size == 21  # one value per second (the last request ends in second 20)
    assert list(t.sent[:20]) == [2.0] * 10 + [8.0] * 10
    assert list(t.failed[:3]) == [0.0, 1.0, 0.0]
    two = 0.099 * 2  # a second's two requests, in flight 99 ms each (the failed one too) ...
    assert t.in_flight[0] == pytest.approx(0.5 + 0.099)  # ... but the long one replaced one
    assert t.in_flight[1] == pytest.approx(1.0 + two)
    assert t.in_flight[3] == pytest.approx(0.5 + two)
    assert t.in_flight[12] == pytest.approx(8 * 0.099)
    ok = ~np.isnan(t.ttft_p50_ms[:20])
    assert ok.all()
    assert np.allclose(t.ttft_p50_ms[:20], 30.0, rtol=0.01)  # within the sketch's 1 %
    drawn = charts(run)["timeline"]
    assert {t.name for t in figure(drawn).data} == {"sent/s", "failed/s", "in flight",
                                                     "TTFT p50", "TTFT p99"}  # fmt: skip


def test_the_omission_chart_draws_the_gap_not_two_lines() -> None:
    chart = charts(one(steady((2, 8))))["omission"]
    p50 = trace(chart, "TTFT p50: from intended − from send")
    p99 = trace(chart, "TTFT p99: from intended − from send")
    assert list(p50.y) == pytest.approx([1.0, 1.0])  # the records' 1 ms lateness
    assert list(p99.y) == pytest.approx([1.0, 1.0])
    assert len(figure(chart).data) == 2


def test_charts_with_nothing_to_show_collapse_into_one_sentence() -> None:
    quiet = charts(one(steady((2, 8))))
    assert not {"errors", "retries", "dropped"} & set(quiet)
    assert quiet["quiet"].note == (
        "No errors, retries or dropped arrivals at any step (nothing to chart)."
    )
    step = full(2, 0)
    step[0] = failed(0, 0, 20, 503)
    some = charts(one(Run((2, 8), [step, full(8, 1)], dropped=(0, 3))))
    assert {"errors", "dropped"} <= set(some)
    assert "retries" not in some
    assert some["quiet"].note == "No retries at any step (nothing to chart)."
    assert list(trace(some["errors"], "failed 503").y) == [5.0, 0.0]


def test_the_slo_is_a_labelled_dashed_line_on_its_latency_charts() -> None:
    run = one(Run((2, 8), [full(2, 0), full(8, 1)], slo=RequestSlo(ttft_ms=500.0)))
    drawn = charts(run)
    for key, axis in (("ttft", "y"), ("pareto", "y"), ("ttft_cdf", "x")):
        fig = figure(drawn[key])
        lines = [s for s in fig.layout.shapes if s.line.dash == "dash"]
        assert [getattr(s, f"{axis}0") for s in lines] == [500.0], key
        labels = [a.text for a in fig.layout.annotations]
        assert "SLO TTFT 500 ms" in labels, key
    cdf_label = next(a for a in figure(drawn["ttft_cdf"]).layout.annotations if "SLO" in a.text)
    assert cdf_label.x == pytest.approx(np.log10(500.0))  # an annotation on log x: its log10
    assert not figure(drawn["ttlt"]).layout.shapes  # no SLO on TTLT
    assert not figure(charts(one(steady((2, 8))))["ttft"]).layout.shapes


def test_an_experiments_repeats_are_one_band_per_variant_and_percentile() -> None:
    def repeat(label: str, group: str, ttft: float) -> LabelledRun:
        run = Run((2, 8), [full(2, 0, ttft_ms=ttft), full(8, 1, ttft_ms=ttft)])
        return LabelledRun(label, *run.evidence(), colour="#d62728", group=group)

    runs = [repeat("a r1", "a", 30.0), repeat("a r2", "a", 40.0), repeat("b r1", "b", 50.0),
            repeat("b r2", "b", 56.0)]  # fmt: skip
    ttft = figure(charts(*runs)["ttft"])
    shown = [t.name for t in ttft.data if t.showlegend is not False]
    assert shown == ["a · p50 (2 repeats, min–max)", "b · p50 (2 repeats, min–max)",
                     "a · p99 (2 repeats, min–max)", "b · p99 (2 repeats, min–max)"]  # fmt: skip
    assert len(ttft.data) == 8  # two edges a band: 2 variants × 2 percentiles, not 16 lines
    high, low = ttft.data[0], ttft.data[1]
    assert (list(low.y), list(high.y)) == ([30.0, 30.0], [40.0, 40.0])
    assert low.fill == "tonexty"
    pareto = figure(charts(*runs)["pareto"])
    shown = [t.name for t in pareto.data if t.showlegend is not False]
    assert shown == ["a · TTFT p50", "a · TTFT p99", "b · TTFT p50", "b · TTFT p99"]
    assert [t.opacity for t in pareto.data] == [1.0, 1.0, 0.45, 0.45] * 2  # repeats faint


def test_requests_in_flight_are_unknown_without_records() -> None:
    run = steady((2, 8))
    summary = run.summary()
    alone = digest_records(iter([]), summary)  # a summary whose records are gone
    assert [d.in_flight_mean for d in alone.steps] == [None, None]
    assert [d.in_flight_max for d in alone.steps] == [None, None]
    assert alone.timeline.sent.size == 0
    chart = charts(LabelledRun("r", summary, alone))["concurrency"]
    assert list(trace(chart, "mean in flight").y) == [None, None]  # a gap, not 0
