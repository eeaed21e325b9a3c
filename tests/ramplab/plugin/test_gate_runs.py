"""SLO gates decide a real ``locust`` exit code: 0 pass, 3 missed, 2 bad gate, 4 no run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.processes import TargetProcess
from tests.support.ramp_runs import run_ramp
from tests.support.records import record_count
from tests.support.targets import SharedTarget

pytestmark = pytest.mark.slow

SHAPE = ["--ramplab-shape", "5@3s"]


@pytest.fixture
def target(shared_target: SharedTarget) -> TargetProcess:
    return shared_target.reset()


def test_gates_pass_exit_0(target: TargetProcess, tmp_path: Path) -> None:
    # No timing gate here: on a busy machine a pass on TTFT may be untrusted (exit 4, by
    # results/trust.py's rule, held in tests/ramplab/results/test_trust.py).
    gates = "error_ratio < 0.01; achieved_qps > 0; steps[*].requests > 0"
    run = run_ramp(tmp_path, target.url, [*SHAPE, "--ramplab-gate", gates])
    assert run.returncode == 0, run.tail()
    assert run.logs["master"].count("PASS") >= 3  # the printed table, one row per gate
    assert run.summary["error_ratio"] == 0.0


def test_gate_missed_exit_3(target: TargetProcess, tmp_path: Path) -> None:
    # No stream has its first token within a microsecond: the gate must fail.
    gates = "error_ratio < 0.01; ttft_ms.p50 < 0.001"
    run = run_ramp(tmp_path, target.url, [*SHAPE, "--ramplab-gate", gates])
    assert run.returncode == 3, run.tail()
    assert "FAIL" in run.logs["master"]
    assert run.summary["ttft_ms"]["p50"] > 0.001  # the numbers are written all the same


def test_malformed_gate_exits_2_at_start(target: TargetProcess, tmp_path: Path) -> None:
    run = run_ramp(tmp_path, target.url, [*SHAPE, "--ramplab-gate", "ttft_ms.p99 << 800"])
    assert run.returncode == 2
    assert "--ramplab-gate" in run.logs["master"]
    assert "Traceback" not in run.logs["master"]
    assert record_count(tmp_path / "run") == 0  # refused before any load


def test_gate_on_a_missing_metric_exits_2(target: TargetProcess, tmp_path: Path) -> None:
    # A typo in the path is a usage error found at the end, not a missed SLO.
    run = run_ramp(tmp_path, target.url, [*SHAPE, "--ramplab-gate", "ttft_msec.p99 < 800"])
    assert run.returncode == 2, run.tail()
    assert "ttft_msec" in run.logs["master"]
    assert "Traceback" not in run.logs["master"]


def test_run_without_requests_exits_4(target: TargetProcess, tmp_path: Path) -> None:
    run = run_ramp(tmp_path, target.url, ["--ramplab-shape", "0@2s", "--ramplab-gate",
                                          "error_ratio < 0.01"])  # fmt: skip
    assert run.returncode == 4, run.tail()
    assert "no request records" in run.logs["master"]
