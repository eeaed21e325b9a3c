"""``LocalStack`` directly: its extension seams, a given target, a target that is not there."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from ramplab.campaign.schema import parse_campaign
from ramplab.stack.local import LocalStack, StackConfig
from ramplab.stack.process import ProcessSpec, free_port
from ramplab.stack.readiness import HttpReady
from ramplab.stack.run import DEFAULT_LOCUSTFILE
from tests.support.cli import TINY, ramplab, records, run_meta, wait_gone
from tests.support.processes import TargetProcess

pytestmark = pytest.mark.slow


class LogfilePerWorker:
    """A worker extension: each worker its own ``--logfile`` (as a metrics port would be)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def worker_args(self, index: int) -> list[str]:
        return ["--logfile", str(self.directory / f"own-{index}.log")]


def test_worker_extensions_and_extra_processes(tmp_path: Path) -> None:
    campaign = parse_campaign(yaml.safe_load(TINY))
    extra_port = free_port()
    extra = ProcessSpec(
        "static", [sys.executable, "-m", "http.server", str(extra_port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
    )  # fmt: skip
    stack = LocalStack(
        StackConfig(
            locustfile=DEFAULT_LOCUSTFILE,
            run_dir=tmp_path / "run",
            locust_args=campaign.locust_args(),
            workers=2,
            target_env=campaign.target.environment(),
            worker_extensions=[LogfilePerWorker(tmp_path)],
            extras=[(extra, HttpReady(f"http://127.0.0.1:{extra_port}/"))],
        )
    )
    steps: list[str] = []
    try:
        stack.start(on_step=steps.append)
        # Extras come up before the master: a Prometheus among them sees the whole ramp.
        assert [p.name for p in stack.processes] == [
            "target", "static", "master", "worker-1", "worker-2"
        ]  # fmt: skip
        assert steps[1] == "static ready"
        code = stack.wait(timeout_s=120)
    finally:
        pids = [p.pid for p in stack.processes]
        codes = stack.stop()
    assert code == 0
    assert codes["master"] == 0
    assert not wait_gone(pids)
    # Each worker got its own argument: its log went to its own file.
    for index in (0, 1):
        assert "worker" in (tmp_path / f"own-{index}.log").read_text().lower()
    assert records(tmp_path / "run")


def test_run_against_a_given_target(tmp_path: Path) -> None:
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(TINY)
    with TargetProcess({"APP_LATENCY__ITL_MS": "5"}) as target:
        done = ramplab(["run", str(campaign), "--target", target.url, "--results-dir",
                        str(tmp_path), "--run-name", "given"])  # fmt: skip
        assert target.process is not None
        assert target.process.poll() is None
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "target settings are unused" in done.stdout
    run_dir = tmp_path / "given"
    meta = run_meta(run_dir)
    assert meta["target"] == target.url
    assert "target" not in meta["processes"]
    assert not (run_dir / "logs" / "target.log").exists()
    assert json.loads((run_dir / "summary.json").read_text())["requests"] > 0


def test_an_unreachable_target_fails_the_run_with_exit_4(tmp_path: Path) -> None:
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(
        TINY.replace("stack: {workers: 1}", "stack: {workers: 1, health_timeout_s: 2}")
    )
    # A port nobody listens on (bound, then released).
    url = f"http://127.0.0.1:{free_port()}"
    done = ramplab(["run", str(campaign), "--target", url, "--results-dir", str(tmp_path)])
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"connection refused on 127.0.0.1:{url.rsplit(':', 1)[1]} (tried for 2 s)" in done.stderr
    assert "Traceback" not in done.stderr
