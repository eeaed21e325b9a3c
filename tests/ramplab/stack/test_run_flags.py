"""``ramplab run`` without a campaign file, against a real target on loopback: the flags' steps
and model reach the summary, the API key reaches the server and no file, and ``--concurrency``
runs a closed loop. Steps of 2 s keep each run to seconds."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import ramplab, records, run_meta
from tests.support.processes import TargetProcess

pytestmark = pytest.mark.slow

API_KEY = "sk-ramplab-flags-test"
MODEL = "ramplab-sim-1"
SHORT = ["--step", "2s", "--warmup", "0.5s", "--max-tokens", "8", "--prompt-tokens", "16",
         "--workers", "1"]  # fmt: skip


@pytest.fixture(scope="module")
def keyed_target() -> Iterator[TargetProcess]:
    """The reference target refusing any request without the test's API key."""
    env = {"APP_AUTH__MODE": "api_key", "APP_AUTH__API_KEYS": json.dumps([API_KEY]),
           "APP_LATENCY__ITL_MS": "2", "APP_LATENCY__PREFILL_OVERHEAD_MS": "2"}  # fmt: skip
    with TargetProcess(env) as target:
        yield target


def test_rates_without_a_file_run_the_steps_with_the_model(
    tmp_path: Path, keyed_target: TargetProcess
) -> None:
    done = ramplab(
        ["run", "--target", keyed_target.url, "--rates", "4,8", "--model", MODEL,
         "--api-key-env", "FLAGS_TEST_KEY", *SHORT, "--results-dir", str(tmp_path),
         "--run-name", "flags"],
        env={**os.environ, "FLAGS_TEST_KEY": API_KEY},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "open loop (poisson arrivals), 2 steps of 2 s (warm-up 0.5 s) at 4, 8 QPS" in done.stdout
    run_dir = tmp_path / "flags"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [s["target_qps"] for s in summary["steps"]] == [4, 8]
    assert summary["model"] == MODEL
    lines = records(run_dir)
    assert lines
    assert all(r["ok"] for r in lines)  # the key was accepted
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert API_KEY not in path.read_text(errors="replace"), path
    assert API_KEY not in done.stdout + done.stderr
    # The run directory's campaign.yaml is the --print-campaign text: it runs the same again.
    assert "--rates 4,8" in (run_dir / "campaign.yaml").read_text()
    assert run_meta(run_dir)["target"] == keyed_target.url


def test_concurrency_without_a_file_runs_a_closed_loop(
    tmp_path: Path, keyed_target: TargetProcess
) -> None:
    done = ramplab(
        ["run", "--target", keyed_target.url, "--concurrency", "1,3", "--api-key-env",
         "FLAGS_TEST_KEY", *SHORT, "--results-dir", str(tmp_path), "--run-name", "closed"],
        env={**os.environ, "FLAGS_TEST_KEY": API_KEY},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "closed loop, 2 steps of 2 s (warm-up 0.5 s) at 1, 3 users" in done.stdout
    run_dir = tmp_path / "closed"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["mode"] == "closed"
    assert [s["target_users"] for s in summary["steps"]] == [1, 3]
    assert "mode: closed" in (run_dir / "campaign.yaml").read_text()
    lines = records(run_dir)
    assert lines
    assert all(r["ok"] for r in lines)
