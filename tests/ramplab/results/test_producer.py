"""The one summary producer on hand-made records: every field's value, in every kind of run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from ramplab.campaign.preflight import summary_template
from ramplab.campaign.schema import parse_campaign
from ramplab.errors import UsageError
from ramplab.load.outage import Outage
from ramplab.load.shapes import parse_shape
from ramplab.measure.record import RequestRecord
from ramplab.results.producer import (
    EngineCounts,
    OutageFacts,
    RunFacts,
    scheduled_counts,
    summarize,
)
from ramplab.results.slo import RequestSlo, parse_gates
from ramplab.results.summary import Percentiles, RunSummary, WorkerCounts
from ramplab.runs.rebuild import rebuild_summary
from ramplab.runs.rundir import RunDir

T0 = 1_700_000_000.0


def rec(
    t: float,
    *,
    ok: bool = True,
    status: int | None = 200,
    kind: str | None = None,
    step: int | None = None,
    attempts: int = 1,
    ttft: float | None = 100.0,
    ttlt: float | None = 1000.0,
    tpot: float | None = 10.0,
    itl: list[float] | None = None,
    tokens: int | None = 10,
    ttfb: float | None = 50.0,
    lateness: float = 0.0,
    total_ms: float | None = 1000.0,
) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{t}",
        worker="w",
        intended_start=T0 + t,
        actual_start=T0 + t + lateness / 1000,
        ok=ok,
        status=status,
        error_kind=kind,
        step=step,
        attempts=attempts,
        total_ms=total_ms,
        lateness_ms=lateness,
        ttfb_ms=ttfb,
        ttft_ms=ttft,
        ttft_send_ms=None if ttft is None else ttft - lateness,
        ttlt_ms=ttlt,
        tpot_ms=tpot,
        itl_ms=itl or [],
        output_tokens=tokens,
    )


def records() -> list[RequestRecord]:
    return [
        rec(1.0, ttft=9999),  # warm-up of stage 0: in no figure
        rec(2.0, ttft=100, ttlt=1000, tpot=10, itl=[5, 15], tokens=20, ttfb=50),
        rec(3.0, ttft=300, ttlt=2000, tpot=20, itl=[25], tokens=30, attempts=2, ttfb=60),
        rec(
            4.0,
            ok=False,
            status=503,
            kind="http_status",
            ttft=None,
            tokens=None,
            attempts=3,
            ttfb=10,
        ),
        rec(5.0, ok=False, status=None, kind="timeout", ttft=None, tokens=4, ttfb=None),
        rec(13.0, step=1, ttft=200, ttlt=500, tpot=None, tokens=1, ttfb=20, lateness=40),
        rec(14.5, step=1, ttft=220, ttlt=600, tpot=None, tokens=1, ttfb=30),
    ]


SHAPE = parse_shape("2,4@10s/2s")  # measured windows [2, 10) and [12, 20): 8 s each
REPORTS: dict[str, dict[str, Any]] = {
    "w2": {"dispatched": [7, 18], "dropped": [1, 2], "peak_users": [3, 5], "max_users": 5},
    "w1": {"dispatched": [6, 20], "dropped": [1, 0], "peak_users": [4, 4], "max_users": 5},
}
GATES = parse_gates(["steps[0].goodput_ratio >= 0.25", "ttft_ms.p99 < 250", "nope < 1"])


def open_facts(**changes: Any) -> RunFacts:
    facts: dict[str, Any] = {
        "shape": SHAPE,
        "run_start": T0,
        "mode": "open",
        "shape_text": "2,4@10s/2s",
        "arrivals": "poisson",
        "seed": 5,
        "workers": [(0.0, ["w1", "w2"])],
        "retry": {"policy": "exponential"},
        "slo": RequestSlo(ttft_ms=250),
        "scheduled": [16, 40],
        "counts": EngineCounts.from_reports(REPORTS, 2),
        "outage": OutageFacts(Outage(3.0, 1.0), T0 + 4.0),
        "gates": GATES,
        "max_users": 10,
    }
    return RunFacts(**{**facts, **changes})


def pct(p50: float | None, p90: float | None, p99: float | None, count: int) -> Percentiles:
    return Percentiles(p50=p50, p90=p90, p99=p99, count=count)


def assert_fields(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert set(got) >= set(expected)
    for key, value in expected.items():
        if isinstance(value, float):
            assert got[key] == pytest.approx(value), key
        elif isinstance(value, Percentiles):
            # Only the percentiles the case states by hand (p50/p90/p99/count).
            stated = {k: value.model_dump()[k] for k in ("p50", "p90", "p99", "count")}
            assert {k: got[key][k] for k in stated} == pytest.approx(stated), key
        else:
            assert got[key] == value, key


def test_open_loop_step_every_field() -> None:
    summary = summarize(records(), open_facts())
    s0, s1 = summary.steps
    assert set(s0.model_dump()) == set(type(s0).model_fields)
    assert_fields(
        s0.model_dump(),
        {
            "index": 0, "start_s": 0.0, "duration_s": 10.0, "warmup_s": 2.0, "measured_s": 8.0,
            "target_qps": 2.0, "target_users": None,
            "scheduled": 16, "dispatched": 13, "dropped": 2, "lost": 1,
            "by_worker": {"w1": {"dispatched": 6, "dropped": 1, "peak_users": 4, "max_users": 5},
                          "w2": {"dispatched": 7, "dropped": 1, "peak_users": 3, "max_users": 5}},
            "peak_users": 7, "max_users": 10,
            "requests": 4, "ok": 2, "attempts": 7,
            "offered_qps": 16 / 8, "achieved_qps": 4 / 8,
            # good: only the first ok record (the second misses the 250 ms TTFT SLO)
            "goodput_qps": 1 / 8, "goodput_ratio": 1 / 4,
            "output_tokens_per_s": (20 + 30 + 4) / 8,  # failed streams' tokens count too
            "attempts_per_s": 7 / 8, "retry_amplification": 7 / 4,
            "success_ratio": 2 / 4, "error_ratio": 2 / 4, "drop_ratio": 2 / 16,
            "errors": {"503": 1, "timeout": 1},
            "error_kinds": {"http_status": 1, "timeout": 1},
            "ttft_ms": pct(200.0, 280.0, 298.0, 2),
            "ttft_send_ms": pct(200.0, 280.0, 298.0, 2),
            "itl_ms": pct(15.0, 23.0, 24.8, 3),
            "tpot_ms": pct(15.0, 19.0, 19.9, 2),
            "ttlt_ms": pct(1500.0, 1900.0, 1990.0, 2),
            "ttfb_ms": pct(50.0, 58.0, 59.8, 3),  # every record sent, failed ones too
            "lateness_ms": pct(0.0, 0.0, 0.0, 4),
        },
    )  # fmt: skip
    assert_fields(
        s1.model_dump(),
        {
            "index": 1, "start_s": 10.0, "target_qps": 4.0, "scheduled": 40, "dispatched": 38,
            "dropped": 2, "lost": 0, "requests": 2, "goodput_ratio": 1.0, "peak_users": 9,
            "tpot_ms": pct(None, None, None, 0),  # one-token answers have no TPOT
            "lateness_ms": pct(20.0, 36.0, 39.6, 2),
            "ttft_send_ms": pct(190.0, 214.0, 219.4, 2),  # [200 − 40, 220]
        },
    )  # fmt: skip


def test_open_loop_run_every_field() -> None:
    summary = summarize(records(), open_facts())
    data = summary.to_json()
    assert set(data) == set(RunSummary.model_fields)
    assert_fields(
        data,
        {
            "measured_s": 16.0, "requests": 6, "ok": 4, "attempts": 9,
            "scheduled": 56, "dropped": 4, "drop_ratio": 4 / 56, "offered_qps": 56 / 16,
            "achieved_qps": 6 / 16, "goodput_qps": 3 / 16, "goodput_ratio": 3 / 6,
            "output_tokens_per_s": 56 / 16, "attempts_per_s": 9 / 16,
            "retry_amplification": 9 / 6, "success_ratio": 4 / 6, "error_ratio": 2 / 6,
            "errors": {"503": 1, "timeout": 1},
            "error_kinds": {"http_status": 1, "timeout": 1},
            "ttft_ms": pct(210.0, 276.0, 297.6, 4),
            "mode": "open", "shape": "2,4@10s/2s", "arrivals": "poisson", "seed": 5,
            "run_start": T0, "workers": [[0.0, ["w1", "w2"]]],
            "retry": {"policy": "exponential"},
            # the first 1 s window of successes after T0 + 4 starts at 13.0
            "outage": {"start_s": 3.0, "end_s": 4.0, "recovery_window_s": 1.0,
                       "recovery_threshold": 0.95, "recovery_s": 9.0},
            "rebuilt": False, "stopped_at_s": None,
        },
    )  # fmt: skip
    assert [(v["gate"], v["status"]) for v in data["gates"]] == [
        ("steps[0].goodput_ratio >= 0.25", "pass"),
        ("ttft_ms.p99 < 250", "fail"),
        ("nope < 1", "invalid"),
    ]
    assert data["gates"][1]["observed"] == [["ttft_ms.p99", pytest.approx(297.6)]]
    assert data["gates"][2]["detail"] == "no metric 'nope' in the summary"


def test_plain_run_is_one_step_over_every_record_and_drops_nothing() -> None:
    plain = [
        rec(0.0, total_ms=1500.0),
        rec(1.0, total_ms=3000.0),  # the last end: 4.0 s after the first start
        rec(2.0, ok=False, status=429, kind="http_status", ttft=None, total_ms=5.0),
    ]
    summary = summarize(plain, RunFacts())
    (step,) = summary.steps
    assert_fields(
        step.model_dump(),
        {
            "index": 0, "start_s": 0.0, "duration_s": 4.0, "warmup_s": 0.0, "measured_s": 4.0,
            "target_qps": None, "target_users": None, "scheduled": None, "dispatched": None,
            "lost": None, "by_worker": {}, "dropped": 0, "drop_ratio": None,
            "requests": 3, "ok": 2, "achieved_qps": 3 / 4, "goodput_qps": 2 / 4,
            "errors": {"429": 1},
        },
    )  # fmt: skip
    assert summary.dropped == 0
    assert (summary.mode, summary.run_start, summary.requests) == (None, T0, 3)
    empty = summarize([], RunFacts())
    assert [(s.requests, s.dropped, s.achieved_qps) for s in empty.steps] == [(0, 0, 0.0)]


def test_closed_loop_counts_users_and_drops_nothing() -> None:
    zeros = {"w1": {"dispatched": [0, 0], "dropped": [0, 0]}}
    facts = RunFacts(
        shape=SHAPE, run_start=T0, mode="closed", counts=EngineCounts.from_reports(zeros, 2)
    )
    summary = summarize(records(), facts)
    for step, users in zip(summary.steps, (2.0, 4.0), strict=True):
        assert (step.target_qps, step.target_users) == (None, users)
        assert (step.scheduled, step.dropped, step.drop_ratio, step.lost) == (None, 0, None, None)
        assert step.by_worker == {"w1": WorkerCounts(dispatched=0, dropped=0)}
    assert summary.dropped == 0
    # Without an SLO, good = ok.
    assert summary.steps[0].goodput_ratio == pytest.approx(2 / 4)


CAMPAIGN = """\
name: rebuilt
shape: {kind: stepped, rates: [2, 4], hold: 10s, warmup: 2s}
arrivals: poisson
seed: 5
retry: {policy: exponential}
slo: {ttft_ms: 250}
"""


def test_a_rebuilt_summary_equals_the_masters_for_the_same_records(tmp_path: Path) -> None:
    campaign = parse_campaign(yaml.safe_load(CAMPAIGN))
    writer = RunDir(tmp_path).open_writer()
    for r in records():
        writer.write(r)
    writer.close()
    (tmp_path / "campaign.yaml").write_text(CAMPAIGN)
    counts = EngineCounts.from_reports(REPORTS, 2)
    progress = {"run_start": T0, "time": T0 + 21, "dispatched": list(counts.dispatched),
                "dropped": list(counts.dropped),
                "peak_users": list(counts.peak_users or ()), "max_users": 10}  # fmt: skip
    (tmp_path / "progress.json").write_text(json.dumps(progress))
    # What MasterEngine.facts() gives for this campaign's Locust arguments.
    shape = parse_shape(campaign.shape_text())
    master = summarize(
        records(),
        open_facts(
            shape=shape,
            shape_text=campaign.shape_text(),
            scheduled=scheduled_counts(shape, "poisson", 5, shape),
            outage=None,
        ),
    ).to_json()
    rebuilt = rebuild_summary(tmp_path, gates=GATES).to_json()
    assert rebuilt["rebuilt"] is True
    # Only what the master alone knew: which worker sent what, and the membership epochs.
    for data in (master, rebuilt):
        data.pop("rebuilt")
        data.pop("workers")
        for step in data["steps"]:
            step.pop("by_worker")
    assert rebuilt == master


def test_interrupted_rebuild_covers_what_ran(tmp_path: Path) -> None:
    writer = RunDir(tmp_path).open_writer()
    for r in records():
        writer.write(r)
    writer.close()
    (tmp_path / "campaign.yaml").write_text(CAMPAIGN)
    progress = {"run_start": T0, "time": T0 + 6, "dispatched": [5, 0], "dropped": [1, 0]}
    (tmp_path / "progress.json").write_text(json.dumps(progress))
    summary = rebuild_summary(tmp_path, stopped_at_s=6.0)
    (step,) = summary.steps
    assert (step.measured_s, step.requests, step.dropped, summary.stopped_at_s) == (4.0, 4, 1, 6.0)
    nothing = rebuild_summary(tmp_path, stopped_at_s=1.0)  # stopped in the first warm-up
    assert (nothing.steps, nothing.requests, nothing.stopped_at_s) == ((), 0, 1.0)


def test_summary_json_round_trips_and_a_bad_field_is_named(tmp_path: Path) -> None:
    summary = summarize(records(), open_facts())
    summary.write(tmp_path / "summary.json")
    assert RunSummary.read(tmp_path / "summary.json") == summary
    data = summary.to_json()
    data["steps"][1]["requests"] = "many"
    with pytest.raises(UsageError, match=r"steps\.1\.requests"):
        RunSummary.from_json(data)


def test_the_gate_template_has_the_keys_of_a_real_summary() -> None:
    campaign = parse_campaign(yaml.safe_load(CAMPAIGN))
    template = summary_template(campaign)
    real = summarize(records(), open_facts()).to_json()
    assert set(template) == set(real)
    assert [set(s) for s in template["steps"]] == [set(s) for s in real["steps"]]


def test_percentiles_are_exact_over_the_union_of_every_workers_records() -> None:
    # Two workers with very different tails: the run's p99.9/max/mean are those of all values
    # together, not an average of per-worker figures.
    fast = [replace(rec(2.0 + i * 0.01, ttft=10.0 + i), worker="w1") for i in range(300)]
    slow = [replace(rec(2.0 + i * 0.01, ttft=1000.0 + 7 * i), worker="w2") for i in range(100)]
    summary = summarize([*fast, *slow], RunFacts())  # a plain run: one step, every record
    values = np.array([r.ttft_ms for r in (*fast, *slow)], dtype=np.float64)
    got = summary.ttft_ms
    assert got.count == 400
    for name, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
        assert getattr(got, name) == pytest.approx(float(np.percentile(values, q))), name
    assert (got.min, got.max) == (10.0, 1000.0 + 7 * 99)
    assert got.mean == pytest.approx(float(values.mean()))
    assert summary.steps[0].ttft_ms == got
