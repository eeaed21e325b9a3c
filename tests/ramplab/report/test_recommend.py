"""Each recommendation rule on hand-built runs: one that fires it (and the sentence cites the
figure and the threshold) and one that does not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ramplab.report import recommend as rules
from ramplab.report.recommend import (
    RULES,
    Evidence,
    Recommendation,
    Rule,
    Thresholds,
    recommend,
    write_recommendations,
)
from ramplab.results.slo import RequestSlo
from tests.ramplab.results.handmade import SERVER, Run, failed, full, rec, steady

TH = Thresholds()


def fire(rule: Rule, run: Run) -> Recommendation | None:
    summary, digest = run.evidence()
    return rule(Evidence(summary, digest), TH)


def test_every_rule_is_applied_and_documented() -> None:
    names = [rule.__name__ for rule in RULES]
    assert len(set(names)) == len(names)
    doc = (Path(__file__).parents[3] / "docs" / "report.md").read_text(encoding="utf-8")
    for name in names:
        assert f"`{name}`" in doc, name


def test_lock_wait_fires_from_the_step_where_it_dominates() -> None:
    locked = {**SERVER, "lock_wait": 60.0, "decode": 135.0}
    run = Run((2, 8), [full(2, 0), full(8, 1, server_timing_ms=locked, ttlt_ms=160.0)])
    got = fire(rules.signing_lock_wait, run)
    assert got is not None
    assert got.message.startswith("lock wait is 38 % of TTLT at ≥ 8 QPS (threshold 20 %)")
    assert "parallel" in got.message
    assert got.value == pytest.approx(60 / 160)
    assert got.steps == (1,)


def test_lock_wait_stays_silent_when_small_or_not_reported() -> None:
    assert (
        fire(rules.signing_lock_wait, steady(server_timing_ms={**SERVER, "lock_wait": 5.0})) is None
    )
    assert fire(rules.signing_lock_wait, steady()) is None
    assert fire(rules.signing_lock_wait, steady(server_timing_ms={})) is None  # another server


def test_connection_setup_fires_on_the_slowest_requests() -> None:
    slow = {"dns": 0.0, "connect": 40.0, "tls": 0.0, "send": 0.2, "wait": 30.0,
            "first_token": 1.0, "stream": 67.5}  # fmt: skip
    run = Run((10,), [[*full(10, 0)[:99], rec(0, 99, 100, phases_ms=slow, ttlt_ms=140.0)]])
    got = fire(rules.connection_setup, run)
    assert got is not None
    assert got.message.startswith("connection set-up is 29 % of the slowest 1 %'s TTLT")
    assert "threshold 10 %" in got.message
    assert "keep-alive" in got.message


def test_connection_setup_names_dns_when_dns_is_the_cost() -> None:
    slow = {"dns": 30.0, "connect": 1.0, "send": 0.2, "wait": 30.0, "stream": 67.5}
    run = Run((10,), [[*full(10, 0)[:99], rec(0, 99, 100, phases_ms=slow, ttlt_ms=130.0)]])
    got = fire(rules.connection_setup, run)
    assert got is not None
    assert "--no-dns-cache" in got.message


def test_connection_setup_silent_with_keep_alive() -> None:
    assert fire(rules.connection_setup, steady()) is None


def test_generator_lateness_judges_a_small_step_at_p90_not_at_its_maximum() -> None:
    # 80 requests: p99 is about the largest value; two late sends of 80 do not flag the step.
    few_late = [*full(8, 1)[:78], *full(8, 1, lateness_ms=300.0)[78:]]
    assert fire(rules.generator_lateness, Run((2, 8), [full(2, 0), few_late])) is None
    mostly_late = Run((2, 8), [full(2, 0), full(8, 1, lateness_ms=120.0)])
    got = fire(rules.generator_lateness, mostly_late)
    assert got is not None
    assert got.message.startswith("lateness p90 120 ms at ≥ 8 QPS")
    # Fewer than ten sent requests are not judged on lateness at all.
    assert fire(rules.generator_lateness, Run((0.5,), [full(0.5, 0, lateness_ms=500.0)])) is None


def dropping(**facts: Any) -> Run:
    """20 of the 500 arrivals at 50 QPS dropped; ``facts`` as the worker reported them."""
    run = steady((10, 50))
    run.steps[1] = run.steps[1][:480]
    run.dropped = (0, 20)
    for name, value in facts.items():
        setattr(run, name, value)
    return run


def test_dropped_arrivals_cites_the_worst_step() -> None:
    got = fire(rules.dropped_arrivals, dropping())
    assert got is not None
    assert got.message.startswith("dropped arrivals 4 % at 50 QPS (20 of 500 scheduled; "
                                  "threshold 1 %)")  # fmt: skip
    assert (got.rule, got.severity, got.figure, got.steps) == (
        "dropped_arrivals",
        "distrust",
        "drop_ratio",
        (1,),
    )
    assert got.value == pytest.approx(0.04)
    # A summary without the users cannot say which limit: both are named.
    assert "the cap or the sizing" in got.message
    assert "--ramplab-max-users" in got.message
    assert fire(rules.dropped_arrivals, steady((10, 50))) is None


def test_dropped_arrivals_at_the_cap_says_raise_max_users() -> None:
    got = fire(rules.dropped_arrivals, dropping(peak_users=(12, 64), max_users=64))
    assert got is not None
    assert "every user the cap allows at ≥ 50 QPS (peak 64 users of the 64 cap)" in got.message
    assert "raise --ramplab-max-users" in got.message
    assert "starved" not in got.message
    assert "sizing" not in got.message


def test_dropped_arrivals_of_a_starved_generator_says_add_workers() -> None:
    run = dropping(peak_users=(12, 64), max_users=64, cpu_mean=(0.3, 0.97))
    got = fire(rules.dropped_arrivals, run)
    assert got is not None
    assert "the generator was starved at ≥ 50 QPS (worker w0: CPU 97.0%" in got.message
    assert "add workers" in got.message
    assert "--ramplab-max-users" not in got.message  # more users would starve it further


def test_dropped_arrivals_below_the_cap_blames_the_sizing() -> None:
    got = fire(rules.dropped_arrivals, dropping(peak_users=(12, 20), max_users=64))
    assert got is not None
    assert "users fell short of the cap at ≥ 50 QPS (peak 20 users of the 64 cap)" in got.message
    assert "--ramplab-max-users" not in got.message


def test_generator_lateness_marks_results_from_that_load_up() -> None:
    run = Run((2, 20), [full(2, 0), full(20, 1, lateness_ms=120.0, ttlt_ms=220.0)])
    got = fire(rules.generator_lateness, run)
    assert got is not None
    assert got.message.startswith("lateness p99 120 ms at ≥ 20 QPS (threshold 20 ms")
    assert "results at 20 QPS and above describe a later load than asked" in got.message
    assert got.severity == "distrust"
    assert fire(rules.generator_lateness, steady()) is None


def retry_after_run(retry: object) -> Run:
    n = 100
    step = full(10, 0)
    for i in range(0, n, 10):
        step[i] = failed(0, i, n, 429, retry_after_s=1.0)
    return Run((10,), [step], retry=retry)


def test_retry_after_ignored_fires_only_without_a_retry_policy() -> None:
    got = fire(rules.retry_after_ignored, retry_after_run(None))
    assert got is not None
    assert got.message.startswith(
        "10 requests (10 %) failed with a Retry-After (429×10) and the retry policy is none"
    )
    assert "goodput lost" in got.message
    assert fire(rules.retry_after_ignored, retry_after_run("none")) is not None
    assert fire(rules.retry_after_ignored, retry_after_run({"policy": "none"})) is not None
    assert fire(rules.retry_after_ignored, retry_after_run("retry_after")) is None
    assert fire(rules.retry_after_ignored, steady()) is None


def test_server_queueing_needs_growth_while_the_offered_rate_was_achieved() -> None:
    queued = {**SERVER, "queue": 60.0}
    run = Run((2, 8), [full(2, 0), full(8, 1, ttft_ms=95.0, ttlt_ms=165.0,
                                          server_timing_ms=queued)])  # fmt: skip
    got = fire(rules.server_queueing, run)
    assert got is not None
    assert got.message.startswith(
        "TTFT p99 (from the send) grows 3.2× from 2 QPS (29 ms) to 8 QPS (94 ms) while "
        "achieved = offered"
    )
    assert "threshold 2×" in got.message
    assert "queue p99 went 0.5 → 60.0 ms: requests queue at the server" in got.message
    # Regression (make demo): TTFT grew while the server's queue stayed flat; the rule blamed
    # the server's queue anyway, against its own figure.
    flat = Run((2, 8), [full(2, 0), full(8, 1, ttft_ms=95.0, ttlt_ms=165.0)])
    got = fire(rules.server_queueing, flat)
    assert got is not None
    assert "queue p99 went 0.5 → 0.5 ms: the server's queue explains less than half" in got.message
    assert "requests queue at the server" not in got.message
    # Growth that is only the generator's lateness (TTFT from the send stays flat) is not queueing.
    late = Run((2, 8), [full(2, 0), full(8, 1, ttft_ms=95.0, lateness_ms=66.0)])
    assert fire(rules.server_queueing, late) is None
    # The same growth when the generator did not deliver the rate is not the server's queue.
    short = Run((2, 8), [full(2, 0), full(8, 1, ttft_ms=95.0)[:40]])
    assert fire(rules.server_queueing, short) is None
    assert fire(rules.server_queueing, steady()) is None


def test_retry_amplification_names_what_was_retried() -> None:
    n = 80
    retried = [rec(1, i, n, attempts=2, attempt_log=[
        *failed(1, i, n, 503, retry_after_s=1.0).attempt_log,
        *rec(1, i, n).attempt_log]) for i in range(n)]  # fmt: skip
    got = fire(rules.retry_amplification, Run((2, 8), [full(2, 0), retried]))
    assert got is not None
    assert got.message.startswith("retries multiply the load 2.00× at 8 QPS")
    assert "threshold 1.2×; retried on 503×80" in got.message
    assert fire(rules.retry_amplification, steady()) is None


def test_errors_by_status() -> None:
    step = full(8, 1)
    for i in range(0, 80, 8):
        step[i] = failed(1, i, 80, 503)
    got = fire(rules.errors, Run((2, 8), [full(2, 0), step]))
    assert got is not None
    assert got.message.startswith("errors are 12 % of requests at 8 QPS (503×10 at ≥ 8 QPS; "
                                  "threshold 1 %)")  # fmt: skip
    assert "503: the target was full or unavailable" in got.message
    assert fire(rules.errors, steady()) is None


def test_tail_sample_size() -> None:
    got = fire(rules.tail_sample_size, steady((2, 10)))
    assert got is not None
    assert got.message.startswith("p99 at 2 QPS is over as few as 20 successful requests "
                                  "(threshold 100)")  # fmt: skip
    assert got.severity == "note"
    assert fire(rules.tail_sample_size, steady((10, 20))) is None


def test_tokenizer_fallback() -> None:
    got = fire(rules.tokenizer_fallback, steady(output_tokens_source="tokenizer"))
    assert got is not None
    assert got.message.startswith("output tokens of 100 % of requests were counted with")
    assert fire(rules.tokenizer_fallback, steady()) is None


def test_slo_misses_when_requests_succeed_too_slowly() -> None:
    run = steady(ttft_ms=300.0)
    run.slo = RequestSlo(ttft_ms=250)
    got = fire(rules.slo_misses, run)
    assert got is not None
    assert got.message.startswith("100 % of requests at 2 QPS succeeded but missed the SLO")
    assert fire(rules.slo_misses, steady(ttft_ms=100.0)) is None
    assert fire(rules.slo_misses, steady(ttft_ms=300.0)) is None  # no SLO: nothing to miss


def test_recommend_orders_by_severity_and_writes_json(tmp_path: Path) -> None:
    run = Run((2, 8), [full(2, 0), full(8, 1, lateness_ms=120.0, ttlt_ms=220.0,
                                          output_tokens_source="tokenizer")])  # fmt: skip
    summary, digest = run.evidence()
    fired = recommend(summary, digest)
    assert next(r.rule for r in fired) == "generator_lateness"  # distrust first
    assert [r.severity for r in fired] == sorted(
        (r.severity for r in fired), key=["distrust", "act", "note"].index
    )
    path = write_recommendations(tmp_path, fired)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [r["rule"] for r in data["recommendations"]] == [r.rule for r in fired]
    assert data["recommendations"][0]["threshold"] == 20.0
    assert data["thresholds"]["lateness_p99_ms"] == 20.0
    assert data["rules"] == [rule.__name__ for rule in RULES]


def bursts(zeros_of_four: int) -> list[float]:
    """19 gaps in groups of four: ``zeros_of_four`` gaps ≈ 0 (events that arrived together),
    the rest the wait between bursts; 70 ms in all, like the records' TPOT × 19."""
    group = [0.0] * zeros_of_four + [1.0] * (4 - zeros_of_four)
    gaps = (group * 5)[:19]
    scale = 70.0 / sum(gaps)
    return [g * scale for g in gaps]


def test_bursting_server_fires_when_itl_p50_is_far_below_tpot_with_many_zero_gaps() -> None:
    run = Run((2, 8), [full(2, 0), full(8, 1, itl_ms=bursts(3))])
    got = fire(rules.bursting_server, run)
    assert got is not None
    assert got.severity == "distrust"
    assert got.steps == (1,)
    assert got.value == pytest.approx(15 / 19)  # 15 of the 19 gaps are 0
    assert got.message.startswith(
        "the server delivered tokens in bursts at ≥ 8 QPS: ITL p50 0.00 ms vs TPOT p50 3.68 ms, "
        "79 % of gaps ≈ 0 (< 0.05 ms) at 8 QPS"
    )
    assert "ITL percentiles describe the bursts, use TPOT" in got.message


def test_bursting_server_stays_silent_on_a_steady_stream_or_a_few_zero_gaps() -> None:
    assert fire(rules.bursting_server, steady()) is None  # every gap 3.68 ms = TPOT
    # One gap in four ≈ 0: 5 of 19 (26 %), below the 30 % threshold, and ITL p50 ≈ TPOT.
    assert fire(rules.bursting_server, steady(itl_ms=bursts(1))) is None
    # Half the gaps ≈ 0 but ITL p50 (the middle gap of 19) is still a real wait: no fire
    # unless ITL p50 < 25 % of TPOT.
    half = [0.0] * 9 + [70.0 / 10] * 10
    assert fire(rules.bursting_server, steady(itl_ms=half)) is None
