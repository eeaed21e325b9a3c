"""The server's own Prometheus figures: parsed per engine, joined to the steps, and — through a
real run against the reference target — its counters equal to the client's own sums."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ramplab.results.engine import (
    EngineSample,
    Histogram,
    detect,
    parse,
    read_samples,
    run_totals,
    window_figures,
    write_sample,
)
from ramplab.runs.rundir import RunDir

# vLLM's exposition as its v1 engine writes it (names, label sets, histogram form); two label
# sets of the same figure are summed.
VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 1000.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 640.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 7.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 800.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 200.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="tiny"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="tiny"} 9.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 2.0
"""


def test_vllm_names_are_read_and_label_sets_summed() -> None:
    assert detect(VLLM) == "vllm"
    sample = parse(VLLM, "vllm", 100.0)
    assert sample.values == {
        "running": 3.0, "waiting": 1.0, "kv_cache_usage": 0.25, "prompt_tokens": 1000.0,
        "generation_tokens": 640.0, "requests": 10.0, "prefix_queries": 800.0,
        "prefix_hits": 200.0,
    }  # fmt: skip
    ttft = sample.histograms["ttft"]
    assert (ttft.count, ttft.sum) == (10.0, 2.0)
    assert ttft.buckets == {0.1: 4.0, 0.5: 9.0, float("inf"): 10.0}


def test_a_text_without_known_names_is_no_engine() -> None:
    assert detect("# TYPE http_requests counter\nhttp_requests_total 3\n") is None


def test_histogram_quantiles_interpolate_inside_the_bucket_as_prometheus_does() -> None:
    hist = Histogram({0.1: 4.0, 0.5: 9.0, float("inf"): 10.0}, 2.0, 10.0)
    assert hist.quantile(0.5) == pytest.approx(0.1 + 0.4 * (5 - 4) / (9 - 4))
    assert hist.quantile(0.2) == pytest.approx(0.1 * 2 / 4)
    assert hist.quantile(0.99) == 0.5  # in the +Inf bucket: its lower bound
    assert Histogram().quantile(0.5) is None


def _sample(t: float, tokens: float, running: float, ttft_n: float) -> EngineSample:
    hist = Histogram({0.1: ttft_n, float("inf"): ttft_n}, 0.05 * ttft_n, ttft_n)
    return EngineSample(t, "vllm", {"generation_tokens": tokens, "running": running},
                        {"ttft": hist})  # fmt: skip


def test_a_window_interpolates_counters_and_brackets_histograms(tmp_path: Path) -> None:
    path = tmp_path / "engine_metrics.jsonl"
    for s in (_sample(10, 0, 0, 0), _sample(11, 100, 4, 10), _sample(12, 300, 6, 30),
              _sample(13, 300, 0, 30)):  # fmt: skip
        write_sample(path, s)
    with path.open("a") as out:
        out.write('{"t": 14, "engine": "vl')  # a master killed mid-write
    samples = read_samples(path)
    assert len(samples) == 4
    figures = window_figures(samples, 10.5, 11.5)
    assert figures is not None
    assert figures["generation_tokens"] == pytest.approx(200 - 50)  # 50 at 10.5, 200 at 11.5
    assert figures["running"] == {"mean": 4.0, "max": 4.0}  # the one scrape inside
    assert figures["ttft_ms"]["count"] == 30  # from the scrape at 10 to the one at 12
    assert figures["ttft_ms"]["mean"] == pytest.approx(50.0)
    assert window_figures(samples, 9.0, 9.5) is not None  # no counter before: none given
    assert "generation_tokens" not in (window_figures(samples, 9.0, 9.5) or {})
    totals = run_totals(samples)
    assert totals is not None
    assert totals["generation_tokens"] == 300


@pytest.mark.slow
def test_a_real_run_joins_the_targets_figures_and_its_counters_equal_the_clients(
    report_run: Path,
) -> None:
    summary = json.loads(RunDir(report_run).summary.read_text(encoding="utf-8"))
    totals = summary["engine"]
    assert totals["engine"] == "ramplab-target"
    client = totals["client"]
    assert client["generation_tokens"] > 0
    # Exact: the server's counters moved by what the client's records say it received.
    assert totals["generation_tokens"] == client["generation_tokens"]
    assert totals["prompt_tokens"] == client["prompt_tokens"]
    assert totals["requests"] == client["requests"]
    for step in summary["steps"]:
        engine = step["engine"]
        assert engine["engine"] == "ramplab-target"
        assert engine["scrapes"] >= 2
        assert engine["running"]["max"] >= 0  # short streams: a scrape may see none running
        assert engine["ttft_ms"]["count"] > 0
    report = (report_run / "report.md").read_text(encoding="utf-8")
    assert "## The server's own figures" in report
    assert "output tokens" in report
    assert "≠" not in report.split("## The server's own figures")[1].split("##")[0]
