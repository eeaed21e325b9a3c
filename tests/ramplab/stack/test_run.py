"""``ramplab run`` on the local stack: real target, master and worker processes, bounded runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import (
    RAMPLAB,
    TINY,
    ramplab,
    records,
    run_meta,
    table_section,
    wait_gone,
)
from tests.support.processes import REPO, reap
from tests.support.records import record_count

pytestmark = pytest.mark.slow
# The tests of the smoke run on one worker: they share it (tests/conftest.py).
SMOKE_GROUP = pytest.mark.xdist_group("smoke-run")

STEP_KEYS = ("target_qps", "achieved_qps", "dropped", "requests", "errors", "goodput_qps",
             "output_tokens_per_s")  # fmt: skip
LATENCY_KEYS = ("ttft_ms", "itl_ms", "tpot_ms", "ttlt_ms")


@pytest.fixture(scope="module")
def smoke(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    results = tmp_path_factory.mktemp("results")
    done = ramplab(["run", "campaigns/smoke.yaml", "--workers", "2", "--results-dir", str(results),
                    "--run-name", "smoke"])  # fmt: skip
    return done, results / "smoke"


@SMOKE_GROUP
def test_smoke_campaign_with_two_workers_completes(
    smoke: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, run_dir = smoke
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = records(run_dir)
    assert lines
    assert all(r["ok"] for r in lines), {r.get("status") for r in lines if not r["ok"]}
    assert len({r["worker"] for r in lines}) == 2  # both workers measured
    assert len({r["request_id"] for r in lines}) == len(lines)
    assert all(r["output_tokens"] == 16 for r in lines)
    summary = json.loads((run_dir / "summary.json").read_text())
    # The summary counts the measured windows (warm-ups excluded); the file holds every request.
    assert 0 < summary["requests"] == sum(s["requests"] for s in summary["steps"]) <= len(lines)
    assert [s["target_qps"] for s in summary["steps"]] == [2, 5, 10]
    for step in summary["steps"]:
        for key in STEP_KEYS:
            assert key in step, key
        for key in LATENCY_KEYS:
            p = step[key]
            assert p["p50"] is not None
            assert p["p50"] <= p["p90"] <= p["p99"], (key, p)
    logs = sorted(p.name for p in (run_dir / "logs").iterdir())
    assert logs == ["master.log", "target.log", "worker-1.log", "worker-2.log"]
    assert "2 workers connected" in (run_dir / "logs" / "master.log").read_text()
    meta = run_meta(run_dir)
    assert meta["exit_code"] == 0
    assert meta["workers"] == 2
    assert set(meta["processes"]) == {"target", "master", "worker-1", "worker-2"}
    assert not wait_gone(list(meta["processes"].values()))
    assert (run_dir / "campaign.yaml").read_text() == (REPO / "campaigns/smoke.yaml").read_text()
    assert "| step |" in (run_dir / "report.md").read_text()
    page = (run_dir / "report.html").read_text()
    assert page.count('class="plotly-graph-div"') >= 10  # charts, plotly.js inlined
    assert "<script src" not in page
    assert "<link" not in page  # self-contained: nothing to fetch
    assert (run_dir / "recommendations.json").is_file()
    for step in summary["steps"]:
        assert f"<td>{step['achieved_qps']:.2f}</td>" in page
    assert "per-step summary" in done.stdout


@SMOKE_GROUP
def test_report_reproduces_the_table_from_the_saved_run(
    smoke: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, run_dir = smoke
    assert done.returncode == 0
    printed = table_section(done.stdout, "per-step summary", "results:")
    report_md = (run_dir / "report.md").read_text()
    (run_dir / "report.md").unlink()
    again = ramplab(["report", str(run_dir)])
    assert again.returncode == 0, again.stderr
    assert table_section(again.stdout, "per-step summary", "report:") == printed
    assert (run_dir / "report.md").read_text() == report_md


@SMOKE_GROUP
def test_report_rebuilds_a_lost_summary_from_the_records(
    smoke: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    done, run_dir = smoke
    assert done.returncode == 0
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("requests.parquet", "campaign.yaml", "progress.json"):
        (copy / name).write_bytes((run_dir / name).read_bytes())
    again = ramplab(["report", str(copy)])
    assert again.returncode == 0, again.stderr
    original = json.loads((run_dir / "summary.json").read_text())
    rebuilt = json.loads((copy / "summary.json").read_text())
    assert rebuilt["rebuilt"] is True
    # The same records, shape and plan start give the same per-step figures.
    for a, b in zip(original["steps"], rebuilt["steps"], strict=True):
        for key in ("requests", "achieved_qps", "errors", "goodput_qps"):
            assert a[key] == b[key], key
        assert a["ttft_ms"] == b["ttft_ms"]


def plan_start(run_dir: Path) -> float:
    """The plan's start from the master's progress file (infinity until it is written)."""
    try:
        return float(json.loads((run_dir / "progress.json").read_text())["run_start"])
    except (OSError, ValueError, KeyError):
        return float("inf")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_mid_run_exits_130_keeps_results_and_leaves_no_process(
    tmp_path: Path, signum: signal.Signals
) -> None:
    campaign = tmp_path / "long.yaml"
    # Long enough that the interrupt lands mid-run; it stops long before the end.
    campaign.write_text(TINY.replace("hold: 5s", "hold: 120s"))
    proc = subprocess.Popen(
        [*RAMPLAB, "run", str(campaign), "--results-dir", str(tmp_path), "--run-name", "cut",
         "--workers", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    run_dir = tmp_path / "cut"
    try:
        # Mid-run: 10 records and at least 3 s into the first stage's measured window.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if record_count(run_dir) >= 10 and (time.time() > plan_start(run_dir) + 4.0):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no 10 records within 90 s (exit {proc.poll()})")
        os.kill(proc.pid, signum)  # SIGINT: what Ctrl-C sends to the CLI
        out, err = proc.communicate(timeout=120)
    finally:
        reap(proc)
    assert proc.returncode == 130, out[-3000:] + err[-3000:]
    assert "Traceback" not in err
    meta = run_meta(run_dir)
    assert meta["exit_code"] == 130
    assert set(meta["processes"]) == {"target", "master", "worker-1", "worker-2"}
    assert not wait_gone(list(meta["processes"].values())), "processes left behind"
    lines = records(run_dir)
    assert len(lines) >= 10
    summary = json.loads((run_dir / "summary.json").read_text())
    assert 0 < summary["requests"] <= len(lines)
    assert "per-step summary (interrupted after" in out
    assert f"{signum.name}: stopping the stack" in out
    # Rates are over what ran: the one stage, cut at the interrupt, minus its 1 s warm-up.
    stopped = summary["stopped_at_s"]
    assert 1.0 < stopped < 120.0
    (step,) = summary["steps"]
    assert step["measured_s"] == pytest.approx(stopped - 1.0)
    # steps.py: a record's stage is its step, else the stage of its intended start.
    sent = sum(1 for r in lines if r["step"] in (0, None) and r["attempts"] > 0
               and 1.0 <= r["intended_start"] - summary["run_start"] < stopped)  # fmt: skip
    assert step["achieved_qps"] == pytest.approx(sent / (stopped - 1.0))
    assert (run_dir / "summary.master.json").is_file()  # the master's own, kept


def test_a_worker_killed_mid_run_fails_the_run_but_keeps_its_results(tmp_path: Path) -> None:
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(TINY.replace("hold: 5s", "hold: 12s"))
    proc = subprocess.Popen(
        [*RAMPLAB, "run", str(campaign), "--results-dir", str(tmp_path), "--run-name", "lost",
         "--workers", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    run_dir = tmp_path / "lost"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if time.time() > plan_start(run_dir) + 4.0:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the plan did not start within 90 s (exit {proc.poll()})")
        victim = run_meta(run_dir)["processes"]["worker-2"]
        os.killpg(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=180)
    finally:
        reap(proc)
    assert proc.returncode == 4, out[-3000:] + err[-3000:]
    assert "workers died during the run: worker-2" in out
    meta = run_meta(run_dir)
    assert meta["exit_codes"]["worker-2"] == -signal.SIGKILL
    assert not wait_gone(list(meta["processes"].values()))
    lines = records(run_dir)
    # The surviving worker went on measuring after the kill, and its records were kept.
    assert {r["worker"] for r in lines if r["intended_start"] > plan_start(run_dir) + 6.0}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"] > 0
    assert "per-step summary" in out


def test_web_ui_serves_during_a_gated_run_whose_failed_gate_exits_3(tmp_path: Path) -> None:
    # One real run for two claims (each run is a whole stack): the web UI serves while it runs,
    # and a gate that must fail ends it with exit 3, in run.json and again from the saved run.
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(TINY.replace("hold: 5s", "hold: 8s"))
    out_path = tmp_path / "out.txt"
    with out_path.open("w") as out:
        proc = subprocess.Popen(
            [*RAMPLAB, "run", str(campaign), "--results-dir", str(tmp_path), "--run-name", "ui",
             "--web-ui", "--gate", "ttft_ms.p50 < 0.001", "--gate", "requests >= 1"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        url = None
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"web UI on (http://127\.0\.0\.1:\d+)", out_path.read_text())
            url = found.group(1) if found else None
            time.sleep(0.2)
        assert url is not None, out_path.read_text()[-3000:]
        answer = httpx.get(url + "/stats/requests", timeout=10)
        assert answer.status_code == 200
        assert answer.json()["state"] in ("spawning", "running", "ready")
        # The ramplab tab (ramplab/plugin/webui.py): declared in the page, a row per step
        # filled from the master's reports and merged sketches as records come in.
        page = httpx.get(url + "/", timeout=10).text
        assert '"extended_tabs": [{"key": "ramplab", "title": "ramplab"}]' in page
        live: list[dict[str, Any]] = []
        while not live and time.monotonic() < deadline and proc.poll() is None:
            (tab,) = httpx.get(url + "/stats/requests", timeout=10).json()["extended_stats"]
            assert tab["key"] == "ramplab"
            live = [row for row in tab["data"] if row["ttft_p50"] is not None]
            time.sleep(0.5)
        assert live, out_path.read_text()[-3000:]
        assert all(0 < row["ttft_p50"] <= row["ttft_p99"] for row in live)
        proc.wait(timeout=120)
    finally:
        reap(proc)
    printed = out_path.read_text()
    assert proc.returncode == 3, printed[-3000:]
    assert "SLO gates" in printed
    assert "FAIL" in printed
    assert "PASS" in printed
    run_dir = tmp_path / "ui"
    assert run_meta(run_dir)["exit_code"] == 3
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"] > 0
    assert summary["ttft_ms"]["p50"] > 0.001  # the gate failed for the reason it names
    # The saved run gives the same verdict.
    again = ramplab(["report", str(run_dir), "--gate", "ttft_ms.p50 < 0.001"])
    assert again.returncode == 3
    again = ramplab(["report", str(run_dir), "--gate", "ttft_ms.p50 > 0.001"])
    # A pass on a timing figure counts only if the run's stamps vouch for it (results/trust.py):
    # on a busy machine they may not, and the run says so with exit 4.
    assert again.returncode == (4 if summary["untrusted"] else 0), again.stdout[-2000:]
    again = ramplab(["report", str(run_dir), "--gate", "requests >= 1"])
    assert again.returncode == 0
