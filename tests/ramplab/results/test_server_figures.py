"""Reasoning-phase and prefix-cache figures of the summary, on hand-made records."""

from __future__ import annotations

import pytest

from ramplab.measure.reasoning import phase_itls
from ramplab.measure.record import RequestRecord
from ramplab.report.charts import LabelledRun, run_charts
from ramplab.results.slo import parse_request_slo
from ramplab.results.steps import measure
from ramplab.results.summary import RunSummary
from tests.ramplab.results.handmade import Run, failed, rec, steady


def reasoning_record(i: int) -> RequestRecord:
    # Events: 3 thoughts of 2 tokens (gaps 4 ms/token), a 30 ms hand-over, 2 answer events of 3.
    itl = [4.0, 4.0, 4.0, 4.0] + [30.0] * 3 + [10.0] * 3
    return rec(0, i, 2, tokens_per_event=[2, 2, 2, 3, 3], itl_ms=itl, reasoning_events=3,
               reasoning_tokens=6, output_tokens=12, ttft_ms=30.0,
               answer_ttft_ms=30.0 + 8 + 30)  # fmt: skip


def test_phase_itls_split_at_the_first_answer_event() -> None:
    thoughts, answer = phase_itls(reasoning_record(0))
    assert thoughts == [4.0] * 4
    assert answer == [10.0] * 3  # the 30 ms hand-over is in neither phase


def test_without_reasoning_every_gap_is_an_answer_gap() -> None:
    plain = rec(0, 0, 1)
    assert phase_itls(plain) == ([], plain.itl_ms)


def test_figures_pool_the_phases_and_leave_failures_out() -> None:
    records = [reasoning_record(0), reasoning_record(1), failed(0, 0, 1, 503)]
    figures = measure(records, 10.0)
    assert figures["reasoning_itl_ms"].count == 8
    assert figures["reasoning_itl_ms"].p50 == 4.0
    assert figures["answer_itl_ms"].count == 6
    assert figures["answer_itl_ms"].p50 == 10.0
    assert figures["answer_ttft_ms"].p50 == 68.0
    assert figures["reasoning_tokens"].mean == 6.0
    assert figures["cached_tokens_ratio"] is None  # no server reported its cache
    assert figures["prefix_hit_ratio"] is None


def test_cache_ratios_count_only_records_that_report_the_field() -> None:
    records = [
        rec(0, 0, 4, prompt_tokens=100, cached_tokens=0),
        rec(0, 1, 4, prompt_tokens=100, cached_tokens=64),
        rec(0, 2, 4, prompt_tokens=200, cached_tokens=96),
        rec(0, 3, 4, prompt_tokens=100),  # this server said nothing about its cache
    ]
    figures = measure(records, 10.0)
    assert figures["cached_tokens_ratio"] == pytest.approx(160 / 400)
    assert figures["prefix_hit_ratio"] == pytest.approx(2 / 3)


def test_a_summary_written_before_these_fields_still_loads() -> None:
    figures = measure([rec(0, 0, 1)], 10.0)
    data = RunSummary(**figures, measured_s=10.0, steps=()).to_json()
    for name in ("answer_ttft_ms", "reasoning_itl_ms", "answer_itl_ms", "reasoning_tokens",
                 "cached_tokens_ratio", "prefix_hit_ratio"):  # fmt: skip
        del data[name]
    old = RunSummary.from_json(data)
    assert old.answer_ttft_ms.count == 0
    assert old.prefix_hit_ratio is None


def test_the_report_draws_reasoning_and_cache_charts_only_for_runs_that_had_them() -> None:
    plain = steady((2, 8))
    assert not {"reasoning", "prefix_cache"} & {
        c.key for c in run_charts([LabelledRun("p", *plain.evidence())])
    }
    thinking = [reasoning_record(i) for i in range(20)]
    cached = [rec(1, i, 80, prompt_tokens=100, cached_tokens=64 * (i % 2)) for i in range(80)]
    for r in thinking:
        r.step = 0
    run = Run((2, 8), [thinking, cached])
    charts = {c.key: c for c in run_charts([LabelledRun("r", *run.evidence())])}
    assert {"reasoning", "reasoning_itl", "answer_itl", "prefix_cache"} <= set(charts)
    first, answer = charts["reasoning"].figure.data[0], charts["reasoning"].figure.data[2]
    assert (first.y[0], answer.y[0]) == (30.0, 68.0)
    hits = charts["prefix_cache"].figure.data[0]
    assert list(hits.y) == [None, 0.5]  # step 0's server said nothing about its cache


def test_a_request_slo_can_bound_the_first_answer_token() -> None:
    slo = parse_request_slo("answer_ttft_ms<=60")
    assert not slo.empty
    assert slo.meets(rec(0, 0, 1, answer_ttft_ms=59.0))
    assert not slo.meets(reasoning_record(0))  # its first answer token came at 68 ms
    assert not slo.meets(rec(0, 0, 1))  # a stream with no answer token misses it
