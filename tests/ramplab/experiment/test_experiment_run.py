"""An experiment on the local stack: real target, real Locust master and worker, bounded runs.

One experiment serves every check (each run starts a whole stack): two variants that really
differ (the target's ITL 2 ms vs 20 ms per token), two repeats planned, SIGINT once the third run
starts. The two finished runs are kept and compared, ``ramplab report`` rebuilds from what
exists, and ``compare --fail-if`` exits by the condition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import RAMPLAB, ramplab, run_meta, wait_gone
from tests.support.processes import REPO

# One worker for the module: its tests share one run (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("experiment-run")]

CAMPAIGN = """\
name: itl
shape: {kind: stepped, rates: [6], hold: 3s, warmup: 1s}
seed: 3
max_users: 20
drain_s: 10
workload: {max_tokens: 8, ignore_eos: true, chunk_size: 1, prompt_tokens: 16}
stack: {workers: 1}
target: {settings: {latency: {itl_ms: 2, itl_jitter_ms: 0, prefill_overhead_ms: 5}}}
matrix:
  target.settings.latency.itl_ms: [2, 20]
repeat: 2
order: abba
"""


def manifest(directory: Path) -> dict[str, Any]:
    path = directory / "experiment.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    return data


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    tmp = tmp_path_factory.mktemp("experiment")
    campaign = tmp / "itl.yaml"
    campaign.write_text(CAMPAIGN)
    directory = tmp / "exp"
    proc = subprocess.Popen(
        [*RAMPLAB, "run", str(campaign), "--results-dir", str(tmp), "--run-name", "exp"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            runs = manifest(directory).get("runs", [])
            if len(runs) == 4 and runs[2]["status"] == "running":
                break
            time.sleep(0.2)
        else:
            out = proc.communicate(timeout=30)[0] if proc.poll() is not None else ""
            pytest.fail(f"the third run never started (exit {proc.poll()}): {out[-3000:]}")
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode, out, directory


def test_an_interrupted_experiment_keeps_its_finished_runs(
    interrupted: tuple[int, str, Path],
) -> None:
    code, out, directory = interrupted
    assert code == 130, out[-4000:]
    assert "Traceback" not in out
    data = manifest(directory)
    assert data["status"] == "interrupted"
    assert data["exit_code"] == 130
    statuses = [(r["variant"], r["status"]) for r in data["runs"]]
    # abba: A B | B A — the first block ran whole; the third run was cut, the fourth never ran.
    assert statuses == [("itl_ms=2", "done"), ("itl_ms=20", "done"),
                        ("itl_ms=20", "interrupted"), ("itl_ms=2", "skipped")]  # fmt: skip
    assert [r["seed"] for r in data["runs"]] == [3, 3, 4, 4]
    for entry in data["runs"][:2]:
        run_dir = directory / entry["dir"]
        assert run_meta(run_dir)["exit_code"] == 0
        assert json.loads((run_dir / "summary.json").read_text())["requests"] > 0
        saved = (run_dir / "campaign.yaml").read_text()
        assert "matrix" not in saved  # each run keeps its own complete campaign
        assert f"itl_ms: {entry['variant'].split('=')[1]}" in saved
    for entry in data["runs"][:3]:
        meta = run_meta(directory / entry["dir"])
        assert not wait_gone(list(meta.get("processes", {}).values())), "processes left behind"
    assert not (directory / data["runs"][3]["dir"]).exists()
    comparison = json.loads((directory / "comparison.json").read_text())
    assert [v["name"] for v in comparison["variants"]] == ["itl_ms=2", "itl_ms=20"]
    assert any("interrupted" in note for note in comparison["notes"])
    # The experiment's own report covers what finished and says how the rest ended.
    report = (directory / "report.md").read_text()
    assert "- status: `interrupted`" in report
    assert "| 4 | 04-itl_ms-2-r2 | itl_ms=2 | 2 | 4 | skipped |" in report
    assert (directory / "report.html").is_file()


def test_the_comparison_shows_the_difference(interrupted: tuple[int, str, Path]) -> None:
    _, _, directory = interrupted
    comparison = json.loads((directory / "comparison.json").read_text())
    (point,) = comparison["steps"]
    assert point["x"] == 6
    fast = point["variants"]["itl_ms=2"]["itl_ms.p50"]["mean"]
    slow = point["variants"]["itl_ms=20"]
    # The target paces tokens 2 ms vs 20 ms apart: a tenfold ITL, whatever the machine's noise.
    assert slow["itl_ms.p50"]["mean"] > 5 * fast
    # The delta in ms, not relative: on a loaded machine the 2 ms variant's median gap can read 0
    # (the target, starved of CPU, flushes several events into one packet), and a relative delta
    # against 0 is undefined.
    assert slow["itl_ms.p50"]["delta"]["absolute"] > 10
    assert slow["ttlt_ms.p50"]["mean"] > slow["ttft_ms.p50"]["mean"] + 7 * 15


def test_report_rebuilds_from_what_exists_and_compare_follows_fail_if(
    interrupted: tuple[int, str, Path],
) -> None:
    _, _, directory = interrupted
    data = manifest(directory)
    for entry in data["runs"][:2]:
        (directory / entry["dir"] / "report.md").unlink()
    (directory / "comparison.json").unlink()
    done = ramplab(["report", str(directory)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for entry in data["runs"][:2]:
        assert (directory / entry["dir"] / "report.md").is_file()
    assert json.loads((directory / "comparison.json").read_text())["baseline"] == "itl_ms=2"
    holds = ramplab(["compare", str(directory), "--fail-if", "itl_ms.p50 > 2 * baseline"])
    assert holds.returncode == 3, holds.stdout[-3000:] + holds.stderr
    assert "HOLDS" in holds.stdout
    passes = ramplab(["compare", str(directory), "--fail-if", "itl_ms.p50 > 50 * baseline"])
    assert passes.returncode == 0, passes.stdout[-3000:] + passes.stderr
    swapped = ramplab(["compare", str(directory), "--baseline", "itl_ms=20",
                       "--fail-if", "itl_ms.p50 < 0.5 * baseline"])  # fmt: skip
    assert swapped.returncode == 3
