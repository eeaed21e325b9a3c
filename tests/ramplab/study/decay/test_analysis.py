"""The decay analysis on hand-made inputs: curves with a known knee, a lock with a known sign time.

The knee rule is checked on synthetic curves; the whole analysis on a hand-made experiment
directory whose records come from a simulated FIFO lock (deterministic arrivals, a 40 ms sign
phase, so a capacity of exactly 25 requests/s) written through the real producer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ramplab.campaign.studies import STUDIES, check_study
from ramplab.experiment.study_result import StudyResult
from ramplab.measure.record import RequestRecord
from ramplab.runs.manifest import Manifest, RunEntry, VariantEntry
from ramplab.study.decay.analysis import analyse
from ramplab.study.decay.knee import find_knee, lock_capacity
from ramplab.study.decay.steps import server_phases, stream_rate
from tests.ramplab.results.handmade import STEP_S, Run, rec

RATES = (2, 5, 10, 15, 20, 24, 28, 35)
SIGN_MS = 40.0  # the lock serves 1000 / 40 = 25 requests/s
DECODE_MS = 600.0  # first → last token without the signature
TTFT_MS = 60.0


# --- the knee rule ----------------------------------------------------------------------------


def test_a_cliff_is_found_between_the_two_steps_around_it() -> None:
    x = [1, 5, 10, 15, 20, 25, 30, 40]
    y = [100, 101, 99, 100, 98, 70, 20, 10]
    knee = find_knee(x, y)
    assert knee.found
    assert knee.plateau == 100
    assert knee.threshold == pytest.approx(80)
    assert (knee.low_qps, knee.high_qps) == (20, 25)
    # the straight line 98 → 70 between 20 and 25 QPS crosses 80 at 20 + 5 × 18 / 28
    assert knee.qps == pytest.approx(20 + 5 * 18 / 28)
    assert "between 20 and 25 QPS" in knee.describe()


def test_a_flat_noisy_curve_has_no_knee() -> None:
    x = [1, 5, 10, 20, 40, 60, 80, 100]
    y = [100, 95, 104, 97, 90, 102, 93, 88]  # ±12 %: noise, not a knee
    knee = find_knee(x, y)
    assert not knee.found
    assert knee.qps is None
    assert "no knee within the ramp (up to 100 QPS" in knee.reason


def test_one_step_below_that_recovers_is_a_dip_not_a_knee() -> None:
    x = [1, 5, 10, 20, 40, 60]
    y = [100, 100, 100, 60, 99, 98]
    knee = find_knee(x, y)
    assert not knee.found
    assert knee.dips == (20,)
    assert "no knee within the ramp" in knee.reason
    # ... but a drop at the last step counts: there is no next step to recover at
    last = find_knee(x, [100, 100, 100, 99, 98, 50])
    assert last.found
    assert (last.low_qps, last.high_qps) == (40, 60)


def test_steps_without_enough_streams_are_skipped_and_too_few_steps_find_nothing() -> None:
    knee = find_knee([1, 5, 10, 20, 30], [100, None, 100, 100, 40])
    assert knee.found
    assert (knee.low_qps, knee.high_qps) == (20, 30)
    few = find_knee([1, 5, 10], [100, 100, 40])
    assert not few.found
    assert "too few measured steps (3)" in few.reason


def test_lock_capacity_is_one_over_the_sign_time() -> None:
    assert lock_capacity(40.0) == pytest.approx(25.0)


# --- the per-stream rate and the server phases ------------------------------------------------


def test_the_rate_counts_tokens_after_the_first_event_over_first_to_last_event() -> None:
    r = rec(0, 0, 1, ttft_ms=100.0, ttlt_ms=700.0, output_tokens=64,
            tokens_per_event=[4] * 16)  # fmt: skip
    assert stream_rate(r) == pytest.approx(60 / 0.6)
    assert stream_rate(replace(r, tokens_per_event=[])) == pytest.approx(63 / 0.6)
    assert stream_rate(replace(r, ok=False)) is None
    assert stream_rate(replace(r, output_tokens=4, tokens_per_event=[4])) is None


def test_decode_is_counted_without_the_signature_inside_it() -> None:
    timing = {"queue": 1.0, "decode": 700.0, "sign": 40.0, "lock_wait": 55.0, "sign_queue": 5.0}
    phases = server_phases(rec(0, 0, 1, server_timing_ms=timing))
    assert phases is not None
    assert phases["decode"] == pytest.approx(600.0)
    assert phases["auth"] == 0.0
    assert server_phases(rec(0, 0, 1, server_timing_ms={"ttft": 3.0})) is None


# --- the whole analysis on a simulated lock ---------------------------------------------------


def simulated(locked: bool) -> Run:
    """Evenly spaced arrivals at ``RATES``; each stream asks for the lock after its decode and
    holds it ``SIGN_MS`` (``locked``), FIFO across steps — or signs nothing (``off``)."""
    steps: list[list[RequestRecord]] = []
    free_at = 0.0
    for index, rate in enumerate(RATES):
        n = round(rate * STEP_S)
        records = []
        for i in range(n):
            start = rec(index, i, n).intended_start
            asks = start + (TTFT_MS + DECODE_MS) / 1000
            wait = max(0.0, free_at - asks) * 1000 if locked else 0.0
            sign = SIGN_MS if locked else 0.0
            free_at = asks + (wait + sign) / 1000
            signature = wait + sign
            timing = {"auth": 0.5, "ratelimit": 1.0, "queue": 0.1, "prefill": 20.0,
                      "decode": DECODE_MS + signature, "sign_queue": 0.0, "lock_wait": wait,
                      "sign": sign}  # fmt: skip
            records.append(rec(index, i, n, ttft_ms=TTFT_MS,
                               ttlt_ms=TTFT_MS + DECODE_MS + signature, output_tokens=64,
                               tokens_per_event=[4] * 16, server_timing_ms=timing,
                               target_qps=float(rate)))  # fmt: skip
        steps.append(records)
    return Run(RATES, steps)


def write_experiment(path: Path, modes: tuple[str, ...] = ("locked", "off")) -> Manifest:
    variants, runs = [], []
    for index, mode in enumerate(modes, 1):
        name, run_dir = f"mode={mode}", f"{index:02d}-mode-{mode}-r1"
        variants.append(VariantEntry(name, f"mode-{mode}", {"target.settings.signing.mode": mode}))
        runs.append(RunEntry(index, name, 1, 1, run_dir, "done", 0))
        directory = path / run_dir
        directory.mkdir(parents=True)
        run = simulated(mode == "locked")
        run.summary().write(directory / "summary.json")
        lines = [json.dumps(r.to_dict()) + "\n" for r in run.records]
        (directory / "requests.jsonl").write_text("".join(lines))
        campaign = {"target": {"settings": {"signing": {"mode": mode, "work_factor": 64}}}}
        (directory / "campaign.yaml").write_text(yaml.safe_dump(campaign))
    manifest = Manifest("decay", "decay.yaml", 1, 1, "fixed", "mode=locked", variants, runs,
                        study="decay", status="done")  # fmt: skip
    manifest.write(path)
    return manifest


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> StudyResult:
    path = tmp_path_factory.mktemp("decay")
    return analyse(path, write_experiment(path))


def test_the_knee_of_the_simulated_lock_is_where_it_saturates(result: StudyResult) -> None:
    locked, off = result.data["variants"]
    assert locked["mode"] == "locked"
    assert locked["work_factor"] == 64
    # 25 requests/s: 24 QPS never queues, 28 QPS queues for the rest of the step
    assert locked["knee"]["found"]
    assert locked["knee"]["interval_qps"] == [24, 28]
    assert locked["knee"]["plateau_tokens_per_s"] == pytest.approx(60 / 0.64)
    expected = result.data["expected"]
    assert expected["sign_ms_low_load"] == pytest.approx(SIGN_MS)
    assert expected["capacity_qps"] == pytest.approx(25.0)
    assert expected["capacity_signatures_per_s"] == pytest.approx(25.0 * 64)
    assert off["knee"]["found"] is False


def test_the_lock_wait_is_named_the_cause(result: StudyResult) -> None:
    cause = result.data["attribution"]
    assert cause["step_qps"] == 28
    assert cause["cause"] == "lock_wait"
    assert cause["cause_share_of_added"] == pytest.approx(1.0)
    assert cause["added_ms"]["decode"] == pytest.approx(0.0, abs=1e-6)
    text = " ".join(result.conclusions)
    assert "the dominant cause is lock wait" in text
    assert "lock serves at most 25 requests/s (1600 signatures/s)" in text
    assert "mode=off: no knee up to 35 QPS (gone)" in text


def test_tables_charts_and_json_hold_the_figures(result: StudyResult, tmp_path: Path) -> None:
    knee_table, rate_table, share_table = result.tables
    assert [row[0] for row in knee_table.rows] == ["mode=locked", "mode=off"]
    assert knee_table.rows[0][6] == "[24, 28]"
    assert knee_table.rows[1][6] == "no knee"
    assert [row[0] for row in rate_table.rows] == list(RATES)
    low = share_table.rows[0]  # 2 QPS: decode is the server's time, nothing waits
    assert low[share_table.headers.index("lock wait %")] == 0
    high = share_table.rows[-1]
    lock_share = high[share_table.headers.index("lock wait %")]
    assert isinstance(lock_share, float)
    assert lock_share > 50
    rates_chart, shares_chart = result.charts
    assert len([t for t in rates_chart["data"] if t["mode"] == "lines+markers"]) == 2
    assert shares_chart["layout"]["barmode"] == "stack"
    result.write(tmp_path)  # study.json must serialise: plain floats, lists, no numpy arrays
    assert StudyResult.read(tmp_path).data["attribution"]["cause"] == "lock_wait"


def test_the_study_is_registered() -> None:
    assert check_study("decay") == "decay"
    assert STUDIES["decay"] == "ramplab.study.decay.analysis:analyse"
