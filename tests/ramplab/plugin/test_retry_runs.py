"""Every retry policy end to end: real ``locust`` ramp runs against the target's seeded faults.

The target injects 429/503 through its admin API (fresh counters at every change), so the
number of refused attempts is exactly predictable (``faults.draw``). Each attempt's planned wait
(``wait_before_ms``) is checked against the policy's formula, and the time really slept — the gap
between one attempt's end and the next one's send, on the records' own clocks — against it.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from target_service.faults import draw
from tests.support.processes import TargetProcess
from tests.support.ramp_runs import RampRun, run_ramp
from tests.support.targets import ADMIN_TOKEN, SharedTarget

pytestmark = pytest.mark.slow

TOKEN = ADMIN_TOKEN
SHAPE = ["--ramplab-shape", "10@5s"]
# gevent's timer may fire up to a loop iteration early; 2 ms covers it on a loaded machine.
SLEEP_TOLERANCE_S = 0.002


@pytest.fixture
def target(shared_target: SharedTarget) -> TargetProcess:
    return shared_target.reset()


def set_faults(target: TargetProcess, **faults: Any) -> None:
    body = {"faults": {"ratio_429": 0.0, "ratio_503": 0.0, "outages": [], **faults}}
    response = httpx.put(
        target.url + "/admin/config", json=body, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 200, response.text


def retry_run(
    target: TargetProcess,
    tmp: Path,
    retry: dict[str, Any] | str,
    *extra: str,
    returncode: int = 0,
) -> RampRun:
    spec = retry if isinstance(retry, str) else json.dumps(retry)
    run = run_ramp(tmp, target.url, [*SHAPE, "--ramplab-retry", spec, *extra])
    assert run.returncode == returncode, run.tail()
    return run


EVERY_REQUEST_FAILED = 3  # the error ceiling: a run where nothing succeeded exits 3


def waits(run: RampRun) -> list[tuple[int, float, dict[str, Any], dict[str, Any]]]:
    """(attempt number, planned wait s, previous attempt, this attempt) for every retry."""
    out = []
    for r in run.records:
        log = r["attempt_log"]
        for prev, this in itertools.pairwise(log):
            out.append((this["attempt"], this["wait_before_ms"] / 1000.0, prev, this))
    return out


def check_slept(run: RampRun) -> None:
    """Every retry was sent no earlier than the previous attempt's end plus the planned wait."""
    for _, wait, prev, this in waits(run):
        gap = this["start"] - (prev["start"] + prev["duration_ms"] / 1000.0)
        assert gap >= wait - SLEEP_TOLERANCE_S, (gap, wait)


def check_refusals_exact(run: RampRun, ratio_429: float, ratio_503: float = 0.0) -> None:
    """The target's n-th draw decides the n-th attempt: the counts are exact, not statistical."""
    attempts = [a for r in run.records for a in r["attempt_log"]]
    draws = [draw(0, "before", n) for n in range(len(attempts))]
    assert sum(a["status"] == 429 for a in attempts) == sum(u < ratio_429 for u in draws)
    expected_503 = sum(ratio_429 <= u < ratio_429 + ratio_503 for u in draws)
    assert sum(a["status"] == 503 for a in attempts) == expected_503


def check_amplification(run: RampRun) -> None:
    summary, records = run.summary, run.records
    attempts = sum(r["attempts"] for r in records)
    assert summary["attempts"] == attempts
    assert summary["requests"] == len(records)
    assert summary["retry_amplification"] == pytest.approx(attempts / len(records))
    assert summary["attempts_per_s"] == pytest.approx(attempts / summary["measured_s"])
    ok = sum(r["ok"] for r in records)
    assert summary["goodput_qps"] == pytest.approx(ok / summary["measured_s"])


def ceiling(base: float, cap: float, failed_attempt: int, mult: float = 2.0) -> float:
    return min(cap, base * mult ** (failed_attempt - 1))


def test_none_makes_one_attempt(target: TargetProcess, tmp_path: Path) -> None:
    set_faults(target, ratio_429=0.3, retry_after_s=0.2)
    run = retry_run(target, tmp_path, "none")
    assert all(r["attempts"] == 1 for r in run.records)
    check_refusals_exact(run, 0.3)
    check_amplification(run)
    assert run.summary["retry_amplification"] == 1.0
    failed = [r for r in run.records if not r["ok"]]
    assert failed
    assert all(r["status"] == 429 for r in failed)


def test_fixed_delay(target: TargetProcess, tmp_path: Path) -> None:
    set_faults(target, ratio_429=0.3, retry_after_s=0.2)
    run = retry_run(target, tmp_path, {"policy": "fixed", "delay_s": 0.08, "max_attempts": 3})
    retries = waits(run)
    assert retries
    assert all(wait == pytest.approx(0.08) for _, wait, _, _ in retries)
    assert all(prev["status"] == 429 for _, _, prev, _ in retries)
    assert max(r["attempts"] for r in run.records) <= 3
    check_slept(run)
    check_refusals_exact(run, 0.3)
    check_amplification(run)
    assert run.summary["retry_amplification"] > 1.0


def test_exponential(target: TargetProcess, tmp_path: Path) -> None:
    set_faults(target, ratio_503=0.5, retry_after_s=0.2)
    spec = {"policy": "exponential", "base_s": 0.02, "cap_s": 0.05, "max_attempts": 4}
    run = retry_run(target, tmp_path, spec)
    retries = waits(run)
    numbers = {n for n, *_ in retries}
    assert {2, 3} <= numbers  # at least a second retry happened (0.5² of requests)
    for number, wait, _, _ in retries:
        assert wait == pytest.approx(ceiling(0.02, 0.05, number - 1))
    check_slept(run)
    check_refusals_exact(run, 0.0, 0.5)
    check_amplification(run)


@pytest.mark.parametrize("jitter", ["full", "equal", "decorrelated"])
def test_jitter_within_bounds(target: TargetProcess, tmp_path: Path, jitter: str) -> None:
    set_faults(target, ratio_503=0.5, retry_after_s=0.2)
    base, cap = 0.02, 0.08
    spec = {"policy": "exponential", "jitter": jitter, "base_s": base, "cap_s": cap}
    run = retry_run(target, tmp_path, spec)
    retries = waits(run)
    assert len(retries) >= 10
    for r in run.records:
        log = r["attempt_log"]
        prev_wait = base
        for attempt in log[1:]:
            wait, failed = attempt["wait_before_ms"] / 1000.0, attempt["attempt"] - 1
            if jitter == "full":
                assert 0.0 <= wait <= ceiling(base, cap, failed)
            elif jitter == "equal":
                v = ceiling(base, cap, failed)
                assert v / 2 <= wait <= v
            else:
                assert base <= wait <= min(cap, 3 * prev_wait) + 1e-12
            prev_wait = wait
    # Jitter: the waits after a first failure are spread, not one value (a 20-draw check).
    first = [wait for number, wait, _, _ in retries if number == 2]
    assert len({round(w, 6) for w in first}) > len(first) // 2
    check_slept(run)
    check_refusals_exact(run, 0.0, 0.5)
    check_amplification(run)


def test_retry_after_is_honoured(target: TargetProcess, tmp_path: Path) -> None:
    set_faults(target, ratio_429=0.2, ratio_503=0.2, retry_after_s=0.15)
    run = retry_run(target, tmp_path, {"policy": "retry_after", "max_attempts": 5})
    retries = waits(run)
    assert retries
    for _, wait, prev, _ in retries:
        assert prev["status"] in (429, 503)
        # retry-after-ms is exact (150); Retry-After alone would say 1 s (whole seconds, up).
        assert prev["retry_after_s"] == pytest.approx(0.15)
        assert wait == pytest.approx(prev["retry_after_s"])
    check_slept(run)
    check_refusals_exact(run, 0.2, 0.2)
    check_amplification(run)


def test_retry_after_capped(target: TargetProcess, tmp_path: Path) -> None:
    set_faults(target, ratio_429=0.3, retry_after_s=0.5)
    spec = {"policy": "retry_after", "retry_after_cap_s": 0.05, "max_attempts": 3}
    run = retry_run(target, tmp_path, spec)
    retries = waits(run)
    assert retries
    for _, wait, prev, _ in retries:
        assert prev["retry_after_s"] == pytest.approx(0.5)
        assert wait == pytest.approx(0.05)
    check_slept(run)


def test_budget_caps_retries(target: TargetProcess, tmp_path: Path) -> None:
    # Every attempt fails: a per-request policy would send 4 attempts per request; a budget of
    # 10 % (no floor) allows ratio × requests retries in any ttl window, a tenth of a request
    # each time a request deposits.
    set_faults(target, ratio_503=1.0, retry_after_s=0.05)
    spec = {
        "policy": "fixed",
        "delay_s": 0.01,
        "max_attempts": 4,
        "budget": {"ratio": 0.1, "min_per_s": 0, "ttl_s": 30},
    }
    run = retry_run(target, tmp_path, spec, returncode=EVERY_REQUEST_FAILED)
    assert "every request failed" in run.logs["master"]
    records = run.records
    retries = sum(r["attempts"] - 1 for r in records)
    assert all(not r["ok"] for r in records)
    # Over a run shorter than ttl_s nothing expires: retries ≤ 0.1 × requests, exactly.
    assert retries <= 0.1 * len(records)
    assert retries >= 0.1 * len(records) - 1  # and the budget was used, not ignored
    check_amplification(run)
    assert run.summary["retry_amplification"] <= 1.1


def test_adaptive_throttle_rejects_locally(target: TargetProcess, tmp_path: Path) -> None:
    # A hard outage: nothing is accepted, so p_reject = requests / (requests + 1) and the
    # client sends ~ Σ 1/(n+1) ≈ ln(N) + 0.58 attempts of N (SRE throttling, K = 2).
    set_faults(target, ratio_503=1.0, retry_after_s=0.05)
    run = retry_run(
        target,
        tmp_path,
        {"policy": "none", "throttle": {"k": 2}},
        returncode=EVERY_REQUEST_FAILED,
    )
    records = run.records
    throttled = [r for r in records if r["error_kind"] == "client_throttled"]
    sent = [r for r in records if r["attempts"] > 0]
    assert len(throttled) + len(sent) == len(records)
    assert all(r["attempts"] == 0 and r["status"] is None for r in throttled)
    # ln(50) + 0.58 ≈ 4.5 expected; 15 is > 5 standard deviations above it.
    assert 1 <= len(sent) <= 15, len(sent)
    assert run.summary["errors"].get("client_throttled", 0) > 0


def test_outage_goodput_and_recovery(target: TargetProcess, tmp_path: Path) -> None:
    # The master schedules a 1.5 s outage at run seconds 2–3.5 of a 6 s step; requests intended
    # inside it fail (no retries), everything else succeeds: the target recovers at once.
    set_faults(target)
    run = run_ramp(
        tmp_path,
        target.url,
        ["--ramplab-shape", "10@6s", "--ramplab-outage", "2s+1.5s",
         "--ramplab-admin-token", TOKEN],
    )  # fmt: skip
    assert run.returncode == 0, run.tail()
    summary, records = run.summary, run.records
    start = summary["run_start"]
    failed = [r["intended_start"] - start for r in records if not r["ok"]]
    assert failed
    assert all(r["status"] == 503 for r in records if not r["ok"])
    # Failures only inside the window (+ the PUT's round trip and a request's send delay).
    assert min(failed) >= 2.0 - 0.05
    assert max(failed) < 3.5 + 0.05
    outage = summary["outage"]
    assert outage["start_s"] == 2.0
    assert outage["end_s"] == 3.5
    assert outage["recovery_s"] is not None
    assert 0.0 <= outage["recovery_s"] <= 0.5
    ok = sum(r["ok"] for r in records)
    assert summary["goodput_qps"] == pytest.approx(ok / summary["measured_s"])
    assert summary["goodput_ratio"] == pytest.approx(ok / len(records))
    assert summary["goodput_ratio"] < 1.0


def test_outage_with_a_wrong_admin_token_exits_2(target: TargetProcess, tmp_path: Path) -> None:
    set_faults(target)
    run = run_ramp(
        tmp_path,
        target.url,
        ["--ramplab-shape", "5@30s", "--ramplab-outage", "1s+1s", "--ramplab-admin-token", "nope"],
    )
    assert run.returncode == 2, run.tail()
    assert "--ramplab-admin-token" in run.logs["master"]
    assert "Traceback" not in run.logs["master"]


def test_retry_after_rides_out_the_outage(target: TargetProcess, tmp_path: Path) -> None:
    # Inside an outage the target's Retry-After is the time left in the window, so a
    # Retry-After-aware client's single retry lands just after the window ends and succeeds.
    set_faults(target)
    spec = {"policy": "retry_after", "max_attempts": 3, "retry_after_cap_s": 5}
    run = run_ramp(
        tmp_path,
        target.url,
        ["--ramplab-shape", "10@6s", "--ramplab-retry", json.dumps(spec),
         "--ramplab-outage", "2s+1.5s", "--ramplab-admin-token", TOKEN],
    )  # fmt: skip
    assert run.returncode == 0, run.tail()
    summary, records = run.summary, run.records
    outage_end = summary["run_start"] + 3.5
    assert all(r["ok"] for r in records)
    retried = [r for r in records if r["attempts"] > 1]
    assert retried
    for r in retried:
        first, second = r["attempt_log"][0], r["attempt_log"][1]
        assert first["status"] == 503
        assert second["wait_before_ms"] == pytest.approx(first["retry_after_s"] * 1000.0)
        # The server said "this long until the window ends": the retry is sent after it (give or
        # take the PUT's round trip that placed the window on the target's clock).
        assert second["start"] >= outage_end - 0.05
        assert r["attempts"] == 2
    assert summary["goodput_ratio"] == 1.0
    assert summary["retry_amplification"] == pytest.approx(
        (len(records) + len(retried)) / len(records)
    )
    assert summary["outage"]["recovery_s"] is not None
