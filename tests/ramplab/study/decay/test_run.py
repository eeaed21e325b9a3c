"""The decay study on the local stack: real target (JWT, Redis pool, rate limiter, the signing
lock), real Locust master and worker, a shortened ramp; one experiment serves every check.

Two variants: ``locked`` with a heavy critical section (``work_factor`` 160: ~50 ms of RSA per
response on a quiet core — 36 ms on a quiet CI machine —, 100–250 ms when other jobs load this
shared 2-core machine, so the lock saturates somewhere between ~4 and ~28 QPS), ramped 2 → 40 QPS
in steps ~20 % apart (the
tolerance below is relative too); ``off`` on a shorter ramp to the same top. Past its knee the
locked run is abandoned after ``drain_s`` 3 s: the last steps only have to stay low.
Arrivals are ``constant``: without Poisson bursts a lock queues only past its capacity (D/D/1),
so the knee sits at the capacity rather than somewhat below it.

The margin, stated: the capacity computed from the low-load sign phase (every stream of the
steps before the knee) must lie inside the knee's interval widened by one step spacing (the
interval's width) on each side. What moves the two apart is the machine: the sign phase is wall
time of a thread that shares two cores with the event loop, the load generator and other
engineers' jobs, and it was seen to vary 2–4× within one run (52 ms at 2 QPS, 213 ms at 10 QPS,
54 ms at 22 QPS in one run, as other jobs came and went). Pooling every pre-knee step keeps the
estimate within one step of the knee in the runs seen here; a failure on a loaded machine should
be re-run once before concluding (the per-step ``sign_ms_p50`` in ``study.json`` shows it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import ramplab

# One worker for the module: its tests share one run (tests/conftest.py).
pytestmark = [pytest.mark.timing, pytest.mark.slow, pytest.mark.xdist_group("decay-run")]

CAMPAIGN = """\
name: decay
study: decay
arrivals: constant
seed: 3
max_users: 200
drain_s: 3
workload:
  max_tokens: 64
  ignore_eos: true
  chunk_size: 4
  prompt_tokens: 64
  auth: {mode: jwt, client_id: ramplab, client_secret: ramplab-demo-secret}
stack: {workers: 1}
target:
  settings:
    auth: {mode: jwt}
    ratelimit: {client_limit: 1000000, global_limit: 1000000, period_s: 60}
    latency: {itl_ms: 10, itl_jitter_ms: 0, slowdown_per_seq: 0}
    signing: {work_factor: 160, threads: 64}
variants:
  - name: locked
    target.settings.signing.mode: locked
    shape: "2,3,4,5,6,8,10,12,15,18,22,27,33,40@2s/0.5s"
  - name: "off"
    target.settings.signing.mode: "off"
    shape: "2,3,4,10,40@2s/0.5s"
order: fixed
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("decay")
    campaign = tmp / "decay.yaml"
    campaign.write_text(CAMPAIGN)
    done = ramplab(["run", str(campaign), "--results-dir", str(tmp), "--run-name", "exp"],
                   timeout=150)  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    data: dict[str, Any] = json.loads((Path(tmp) / "exp" / "study.json").read_text())
    return data


def variant(study: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(v for v in study["data"]["variants"] if v["name"] == name)
    return found


def test_the_locked_knee_lies_where_the_lock_saturates(study: dict[str, Any]) -> None:
    knee = variant(study, "locked")["knee"]
    expected = study["data"]["expected"]
    assert knee["found"], study["conclusions"]
    low, high = knee["interval_qps"]
    spacing = high - low
    capacity = expected["capacity_qps"]
    assert expected["work_factor"] == 160
    assert low - spacing <= capacity <= high + spacing, (knee, expected)


def test_there_is_no_knee_without_signing(study: dict[str, Any]) -> None:
    off = variant(study, "off")
    assert off["knee"]["found"] is False, off["steps"]
    assert off["knee"]["plateau_tokens_per_s"] > 50  # 10 ms per token paced: ~100 tokens/s


def test_the_lock_wait_is_the_measured_cause_at_the_knee(study: dict[str, Any]) -> None:
    cause = study["data"]["attribution"]
    assert cause is not None, study["notes"]
    assert cause["cause"] == "lock_wait", cause["added_ms"]
    assert any("the dominant cause is lock wait" in c for c in study["conclusions"])
