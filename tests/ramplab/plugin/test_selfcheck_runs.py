"""The generator self-check on real runs: a master and one worker against the shared target.

Two runs share the assertions: one whose worker a greenlet keeps busy (``starved_locustfile``:
real CPU, real event-loop lag) must be marked ``generator_bound`` and its gate refused (exit 4);
the same short ramp on a normal worker must not be marked and its gate passes (exit 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.processes import REPO, TargetProcess
from tests.support.ramp_runs import RampRun, run_ramp
from tests.support.targets import SharedTarget

pytestmark = pytest.mark.slow

# 20 QPS for 4 s, 1 s warm-up: ~60 measured requests, ~20 in each third for the lateness rule.
ARGS = ["--ramplab-shape", "20@4s/1s", "--ramplab-gate", "error_ratio <= 0.5"]
STARVED = str(REPO / "tests" / "ramplab" / "plugin" / "starved_locustfile.py")


@pytest.fixture
def target(shared_target: SharedTarget) -> TargetProcess:
    return shared_target.reset()


def test_a_starved_worker_is_marked_and_its_gate_refused(
    target: TargetProcess, tmp_path: Path
) -> None:
    starved = run_ramp(tmp_path / "starved", target.url, [*ARGS, "-f", STARVED], workers=1)
    normal = run_ramp(tmp_path / "normal", target.url, ARGS, workers=1)
    _starved(starved)
    _normal(normal)


def _health(run: RampRun) -> dict[str, float]:
    step = run.summary["steps"][0]
    (health,) = step["generator"].values()  # one worker
    return dict(health)


def _starved(run: RampRun) -> None:
    summary = run.summary
    health = _health(run)
    print("starved worker:", health, summary["steps"][0]["generator_reason"])
    assert summary["generator_bound"] is True, run.tail()
    assert summary["steps"][0]["generator_bound"] is True
    # The hog yields every 200 ms: the loop's worst lag is most of that (a timer due at a
    # random point of the hog waits for its end: mean ~100 ms).
    assert health["loop_lag_max_ms"] > 100.0
    # It never idles: runnable ~99 % of the time whatever share of a core the machine gives it.
    assert health["busy_mean"] is None or health["busy_mean"] > 0.9
    assert [g["status"] for g in summary["gates"]] == ["untrusted"]
    assert run.returncode == 4, run.tail()
    assert "load generator was the bottleneck" in run.logs["master"]
    assert "Traceback" not in run.logs["master"]


def _normal(run: RampRun) -> None:
    summary = run.summary
    health = _health(run)
    print("normal worker:", health, summary["steps"][0]["lateness_growth_ms"])
    assert summary["generator_bound"] is False, (health, run.tail())
    assert health["samples"] >= 20  # ten a second over the 3 s measured window
    assert health["cpu_mean"] is not None
    assert health["cpu_mean"] < 0.9
    assert health["busy_mean"] is None or health["busy_mean"] < 0.9
    assert [g["status"] for g in summary["gates"]] == ["pass"]
    assert run.returncode == 0, run.tail()
