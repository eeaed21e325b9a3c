"""``ramplab run --prometheus``: a real Prometheus in the local stack, queried while it lingers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ramplab.stack.monitoring import loopback_address
from tests.support.cli import RAMPLAB, TINY, ramplab, records, run_meta, wait_gone
from tests.support.processes import REPO, reap

PROMETHEUS = shutil.which("prometheus")
# The test ends the linger itself with Ctrl-C; this is only the upper bound.
LINGER_S = 120


def wait_for_meta(run_dir: Path, key: str, cli: subprocess.Popen[str], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cli.poll() is not None:
            break
        try:
            meta = run_meta(run_dir)
        except (OSError, ValueError):  # not written yet, or caught mid-write
            meta = {}
        if key in meta:
            return meta
        time.sleep(0.2)
    out, err = cli.communicate(timeout=60) if cli.poll() is not None else ("", "")
    raise AssertionError(f"run.json never got {key!r} (exit {cli.poll()})\n{out[-3000:]}{err}")


def query(url: str, expr: str) -> list[dict[str, Any]]:
    body = httpx.get(url + "/api/v1/query", params={"query": expr}, timeout=10).json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus missing (make system-deps)")
def test_prometheus_scrapes_the_whole_run_and_stays_up_to_be_queried(tmp_path: Path) -> None:
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(TINY.replace("stack: {workers: 1}", "stack: {workers: 2}"))
    run_dir = tmp_path / "watched"
    cli = subprocess.Popen(
        [*RAMPLAB, "run", str(campaign), "--prometheus", "--linger", str(LINGER_S),
         "--results-dir", str(tmp_path), "--run-name", "watched"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        meta = wait_for_meta(run_dir, "lingering_until", cli, timeout_s=120)
        monitoring = meta["monitoring"]
        url = monitoring["prometheus"]["url"]
        assert monitoring["run_id"] == "watched"
        assert monitoring["scenario"] == "tiny"
        assert set(monitoring["endpoints"]) == {"target", "master", "worker-1", "worker-2"}
        lines = records(run_dir)
        assert lines
        # The CLI waited for a scrape after the ramp: the counts are final, no polling needed.
        total = query(url, 'sum(ramplab_requests_total{run="watched", scenario="tiny"})')
        assert float(total[0]["value"][1]) == len(lines)
        per_worker = query(url, 'sum by (instance) (ramplab_requests_total{run="watched"})')
        assert len(per_worker) == 2
        up = {
            (s["metric"]["job"], s["metric"]["instance"]): s["value"][1]
            for s in query(url, "up")
        }  # fmt: skip
        target_port = monitoring["endpoints"]["target"].split(":")[2].split("/")[0]
        assert up[("target", f"127.0.0.1:{target_port}")] == "1"
        assert sum(1 for job, _ in up if job == "worker") == 2
        served = query(url, "sum(target_output_tokens_total)")
        assert float(served[0]["value"][1]) > 0
        # The master's gauges were scraped during the ramp (it has exited since).
        workers_seen = query(url, 'max_over_time(ramplab_workers{run="watched"}[5m])')
        assert float(workers_seen[0]["value"][1]) == 2
        rules = httpx.get(url + "/api/v1/rules", timeout=10).json()["data"]["groups"]
        assert rules, "the shipped rules are loaded"
        os.kill(cli.pid, signal.SIGINT)  # Ctrl-C ends the linger, not the run
        out, err = cli.communicate(timeout=60)
    finally:
        reap(cli)
    assert cli.returncode == 0, out[-3000:] + err[-3000:]
    assert "Traceback" not in err
    assert f"Prometheus: {url}/graph" in out
    meta = run_meta(run_dir)
    assert meta["exit_code"] == 0
    assert "prometheus" in meta["processes"]
    assert not wait_gone(list(meta["processes"].values()))
    assert (run_dir / "prometheus.yml").is_file()
    assert any((run_dir / "prometheus").iterdir()), "the TSDB is kept in the run directory"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert 0 < summary["requests"] <= len(lines)  # warm-ups excluded from the summary


def test_prometheus_missing_is_a_usage_error(tmp_path: Path) -> None:
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(TINY)
    done = ramplab(["run", str(campaign), "--prometheus", "--results-dir", str(tmp_path)],
                   env={"PATH": str(tmp_path)})  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--prometheus" in done.stderr
    assert "apt-get install prometheus" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == [campaign]  # nothing started, no run directory


def test_linger_needs_something_to_keep_up(tmp_path: Path) -> None:
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(TINY)
    done = ramplab(["run", str(campaign), "--linger", "10", "--results-dir", str(tmp_path)])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--linger" in done.stderr
    assert list(tmp_path.iterdir()) == [campaign]


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000"),
        ("http://localhost:8000/v1", "localhost:8000"),
        ("http://[::1]:9000", "[::1]:9000"),
        ("http://127.0.0.1", "127.0.0.1:80"),
        ("http://10.0.0.5:8000", None),  # not loopback: the local Prometheus leaves it alone
        ("https://127.0.0.1:8443", None),  # the generated config scrapes plain HTTP only
        ("http://api.example.com", None),
    ],
)
def test_which_given_targets_the_local_prometheus_scrapes(url: str, address: str | None) -> None:
    assert loopback_address(url) == address
