"""The generator self-check's rule, on hand-made samples and records through the real producer."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ramplab.exitcodes import ExitCode
from ramplab.load.shapes import parse_shape
from ramplab.report.charts import LabelledRun, run_charts
from ramplab.report.run import write_report
from ramplab.results.digest import digest_records
from ramplab.results.outcome import exit_code
from ramplab.results.producer import EngineCounts, RunFacts, summarize
from ramplab.results.selfcheck import (
    HealthAccumulator,
    health_from_reports,
    judge,
    lateness_growth_ms,
    loop_thread_ns,
)
from ramplab.results.slo import parse_gates
from ramplab.results.summary import RunSummary, WorkerHealth
from ramplab.runs.rebuild import rebuild_summary
from ramplab.runs.rundir import RunDir
from tests.ramplab.results.handmade import T0, full, rec
from tests.ramplab.results.test_producer import CAMPAIGN
from tests.ramplab.results.test_producer import T0 as T0_PRODUCER
from tests.ramplab.results.test_producer import records as producer_records

SHAPE = parse_shape("2,8@10s/0s")


def health(cpu: float, lag: float = 1.0) -> WorkerHealth:
    return WorkerHealth(
        samples=100, cpu_max=cpu, cpu_mean=cpu, loop_lag_max_ms=lag, loop_lag_mean_ms=lag
    )


def test_the_accumulator_files_samples_by_stage_and_skips_warm_ups() -> None:
    acc = HealthAccumulator(parse_shape("5,10@10s/2s"))  # warm-ups [0, 2) and [10, 12)
    acc.add_cpu(1.0, 0.99)  # warm-up: not counted
    acc.add_cpu(3.0, 0.2)
    acc.add_cpu(5.0, 0.4)
    acc.add_lag(5.0, 3.0)
    acc.add_lag(6.0, 1.0)
    acc.add_cpu(15.0, 0.5)
    acc.add_busy(15.0, 0.75)
    acc.add_lag(25.0, 99.0)  # after the shape: not counted
    per_stage = health_from_reports({"w1": {"health": acc.report()}}, 2)
    assert per_stage is not None
    first, second = per_stage[0]["w1"], per_stage[1]["w1"]
    assert first.cpu_mean == pytest.approx(0.3)
    assert first.cpu_max == pytest.approx(0.4)
    assert first.loop_lag_mean_ms == pytest.approx(2.0)
    assert first.loop_lag_max_ms == 3.0
    assert first.samples == 2
    assert second.cpu_mean == pytest.approx(0.5)
    assert second.loop_lag_max_ms is None
    assert second.samples == 0
    assert second.busy_mean == pytest.approx(0.75)
    assert first.busy_mean is None


def test_reports_without_a_self_check_give_none() -> None:
    assert health_from_reports({"w1": {"dispatched": [1]}}, 1) is None
    assert health_from_reports({}, 1) is None


def test_lateness_growth_compares_the_last_third_with_the_first() -> None:
    stage = SHAPE.stages[0]
    flat = full(2, 0, lateness_ms=3.0)
    assert lateness_growth_ms(flat, stage, T0) == pytest.approx(0.0)
    growing = [rec(0, i, 30, lateness_ms=2.0 * i) for i in range(30)]
    # thirds hold i = 0..9 and 20..29: p50s 9 and 49 ms
    assert lateness_growth_ms(growing, stage, T0) == pytest.approx(40.0)
    few = [rec(0, i, 6, lateness_ms=10.0 * i) for i in range(6)]  # 2 per third: too few
    assert lateness_growth_ms(few, stage, T0) is None
    unsent = [replace(r, attempts=0) for r in growing]
    assert lateness_growth_ms(unsent, stage, T0) is None


@pytest.mark.parametrize(
    ("cpu", "growth", "bound"),
    [
        (0.50, None, False),
        (0.90, 20.0, False),  # both limits are strict
        (0.91, None, True),
        (0.50, 20.5, True),
        (None, 50.0, True),  # a worker that measured no CPU is judged on lateness
    ],
)
def test_the_rule(cpu: float | None, growth: float | None, bound: bool) -> None:
    h = WorkerHealth(samples=5, cpu_max=cpu, cpu_mean=cpu, loop_lag_max_ms=1.0,
                     loop_lag_mean_ms=1.0)  # fmt: skip
    got, reason = judge({"w1": h}, growth)
    assert got is bound
    assert (reason is not None) is bound


def test_a_loop_waiting_for_a_cpu_is_busy_even_at_half_a_core() -> None:
    # A shared machine: the loop never idled but got half a core.
    h = WorkerHealth(samples=5, cpu_max=0.5, cpu_mean=0.5, loop_lag_max_ms=150.0,
                     loop_lag_mean_ms=100.0, busy_max=1.0, busy_mean=0.98)  # fmt: skip
    bound, reason = judge({"w1": h}, None)
    assert bound is True
    assert reason is not None
    assert "runnable 98.0%" in reason
    assert judge({"w1": h.model_copy(update={"busy_mean": 0.6})}, None)[0] is False


def test_the_loop_thread_schedstat_is_read(tmp_path: Path) -> None:
    path = tmp_path / "schedstat"
    path.write_text("650000000 350000000 12\n")
    assert loop_thread_ns(path) == 1_000_000_000
    assert loop_thread_ns(tmp_path / "missing") is None
    path.write_text("garbage")
    assert loop_thread_ns(path) is None


def test_old_reports_without_busy_still_read() -> None:
    per_stage = health_from_reports({"w1": {"health": [[2, 1.0, 0.6, 3, 3.0, 2.0]]}}, 1)
    assert per_stage is not None
    assert per_stage[0]["w1"].busy_mean is None
    assert per_stage[0]["w1"].cpu_mean == 0.5


def test_no_self_check_is_null_not_a_guess() -> None:
    assert judge({}, 500.0) == (None, None)
    assert judge(None, None) == (None, None)


def summary(cpus: tuple[float, float], gates: tuple[str, ...] = ()) -> RunSummary:
    facts = RunFacts(
        shape=SHAPE, run_start=T0, mode="open", scheduled=[20, 80],
        counts=EngineCounts([20, 80], [0, 0]),
        health=[{"w1": health(cpus[0]), "w2": health(0.1)}, {"w1": health(cpus[1])}],
        gates=parse_gates(gates),
    )  # fmt: skip
    return summarize(full(2, 0) + full(8, 1), facts)


def test_a_generator_bound_step_marks_the_run_and_untrusts_its_gates() -> None:
    s = summary((0.3, 0.97), ("error_ratio <= 0.01", "ttft_ms.p50 > 1000"))
    assert [st.generator_bound for st in s.steps] == [False, True]
    assert s.steps[1].generator_reason is not None
    assert "w1" in s.steps[1].generator_reason
    assert s.steps[0].generator["w2"].cpu_mean == 0.1
    assert s.generator_bound is True
    assert [v.status for v in s.gates] == ["untrusted", "fail"]
    assert "step 1" in s.gates[0].detail
    assert exit_code(s) == ExitCode.RUN_FAILED
    assert RunSummary.from_json(s.to_json()) == s  # round trip through summary.json


def test_a_healthy_run_passes() -> None:
    s = summary((0.3, 0.5), ("error_ratio <= 0.01",))
    assert s.generator_bound is False
    assert [v.status for v in s.gates] == ["pass"]
    assert exit_code(s) == ExitCode.OK


def test_a_plain_run_reports_null() -> None:
    s = summarize([rec(0, i, 40, lateness_ms=5.0 * i) for i in range(40)], RunFacts())
    assert s.steps[0].generator_bound is None
    assert s.steps[0].lateness_growth_ms is None
    assert s.generator_bound is None
    assert s.steps[0].generator == {}


def test_a_ramp_without_self_check_reports_null() -> None:
    facts = RunFacts(shape=SHAPE, run_start=T0, mode="open")
    s = summarize([rec(0, i, 30, lateness_ms=2.0 * i) for i in range(30)], facts)
    assert s.steps[0].lateness_growth_ms == pytest.approx(40.0)  # shown, but not judged
    assert s.generator_bound is None


def test_the_report_warns_and_marks_the_bound_step_on_per_step_charts(tmp_path: Path) -> None:
    records = full(2, 0) + full(8, 1)
    s = summary((0.3, 0.97), ("error_ratio <= 0.01",))
    writer = RunDir(tmp_path).open_writer()
    for r in records:
        writer.write(r)
    writer.close()
    charts = {
        c.key: c.figure
        for c in run_charts([LabelledRun("a", s, digest_records(iter(records), s))])
        if c.figure is not None
    }
    for key in ("throughput", "ttft", "lateness"):
        lines = [sh for sh in charts[key].layout.shapes if sh.type == "line"]
        assert [line.x0 for line in lines] == [8.0], key  # step 1's offered load, not step 0's
    assert not charts["ttft_cdf"].layout.shapes  # not a per-step chart
    md = write_report(tmp_path, s, s.gates).markdown.read_text(encoding="utf-8")
    assert "WARNING: the load generator was the bottleneck (step 1: worker w1: CPU 97.0%" in md
    assert "| error_ratio <= 0.01 | 0 | untrusted |" in md
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert '<p class="warning"><strong>WARNING: the load generator was the bottleneck' in html


def test_a_healthy_report_has_no_warning_nor_marker(tmp_path: Path) -> None:
    records = full(2, 0) + full(8, 1)
    s = summary((0.3, 0.5))
    digest = digest_records(iter(records), s)
    charts = run_charts([LabelledRun("a", s, digest)])
    assert all(not c.figure.layout.shapes for c in charts if c.figure is not None and c.per_step)
    RunDir(tmp_path).open_writer().close()
    assert "WARNING" not in write_report(tmp_path, s).markdown.read_text(encoding="utf-8")


def test_a_rebuilt_summary_keeps_the_self_check_from_progress_json(tmp_path: Path) -> None:
    writer = RunDir(tmp_path).open_writer()
    for r in producer_records():
        writer.write(r)
    writer.close()
    (tmp_path / "campaign.yaml").write_text(CAMPAIGN)
    acc = HealthAccumulator(parse_shape("2,4@10s/2s"))
    acc.add_cpu(5.0, 0.3)
    acc.add_busy(15.0, 0.99)  # stage 1: the loop never idled
    progress = {"run_start": T0_PRODUCER, "time": T0_PRODUCER + 21, "dispatched": [20, 40],
                "dropped": [0, 0], "health": {"w1": acc.report()}}  # fmt: skip
    (tmp_path / "progress.json").write_text(json.dumps(progress))
    rebuilt = rebuild_summary(tmp_path)
    assert [st.generator_bound for st in rebuilt.steps] == [False, True]
    assert rebuilt.generator_bound is True
    progress.pop("health")
    (tmp_path / "progress.json").write_text(json.dumps(progress))
    assert rebuild_summary(tmp_path).generator_bound is None  # an older snapshot: unknown
