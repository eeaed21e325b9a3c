"""A worker that cannot reach its master exits 4 with one line naming the address it tried
(``--master-timeout``), and a worker that did reach it is not stopped by the watchdog."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from target_service.embedded_redis import free_port
from tests.support.processes import Process, TargetProcess, poll_until, python, stop_all
from tests.support.ramp_runs import LOCUST, STREAM
from tests.support.targets import SharedTarget

pytestmark = pytest.mark.slow

WORKER = [*LOCUST, "--worker", "--ramplab-shape", "1@2s"]


def worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WORKER, *args], capture_output=True, text=True, timeout=60, check=False)


def ramplab_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ramplab:")]


def test_a_master_no_one_runs_ends_the_worker_with_the_address_it_tried() -> None:
    port = free_port()  # free: nothing listens there
    done = worker("--master-host", "127.0.0.1", "--master-port", str(port),
                  "--master-timeout", "1")  # fmt: skip
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    [line] = ramplab_lines(done.stderr)
    assert f"no answer from the Locust master at tcp://127.0.0.1:{port} within 1 s" in line
    assert "--master-timeout" in line


def test_a_master_host_that_does_not_resolve_is_named_as_such() -> None:
    done = worker("--master-host", "no-such-master.invalid", "--master-timeout", "1")
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    [line] = ramplab_lines(done.stderr)
    assert (
        "cannot resolve the host of the Locust master at tcp://no-such-master.invalid:5557" in line
    )


def test_a_bad_timeout_is_a_usage_error_naming_the_option() -> None:
    done = worker("--master-host", "127.0.0.1", "--master-timeout", "0")
    assert done.returncode == 2
    assert "--master-timeout" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_connected_worker_outlives_its_timeout(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    # The master is up first, so the worker connects well within its timeout; the run then
    # lasts over twice the timeout after the connection (2 s lead + 5 s): a watchdog left
    # running would end the worker, and the master would wait for it.
    target: TargetProcess = shared_target.reset()
    port, out = free_port(), tmp_path / "run"
    shape = ["--ramplab-shape", "4@5s/1s", *STREAM]
    master = Process([*LOCUST, "--host", target.url, "--headless", "--master",
                      "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                      "--expect-workers", "1", "--results-dir", str(out), *shape],
                     tmp_path / "master.log")  # fmt: skip
    worker = Process([*LOCUST, "--worker", "--master-host", "127.0.0.1", "--master-port",
                      str(port), "--master-timeout", "3", *shape],
                     tmp_path / "worker.log")  # fmt: skip
    try:
        master.start()
        poll_until(lambda: "Waiting for workers" in master.log(), 30, "the master listens",
                   master.running)  # fmt: skip
        worker.start()
        code = master.wait(90)  # a bound on a hang: ~20 s on a quiet machine
        worker.wait(15)
    finally:
        stop_all([master, worker], grace_s=5)
    assert code == 0, master.log()[-3000:] + worker.log()[-3000:]
    assert worker.returncode == 0, worker.log()[-3000:]
    assert "ramplab: worker:" not in worker.log()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] > 0
    assert len(summary["clocks"]) == 1


def test_a_slow_import_does_not_eat_the_workers_timeout(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    # Regression: the watchdog was armed from the loop's time of before the locustfile's import;
    # an import busy for 4 s made a 3 s timeout fire at once, with the master up and waiting.
    target: TargetProcess = shared_target.reset()
    port, out = free_port(), tmp_path / "run"
    slow = python("-m", "locust", "-f", str(Path(__file__).with_name("slow_import_locustfile.py")))
    shape = ["--ramplab-shape", "4@5s/1s", *STREAM]
    master = Process([*LOCUST, "--host", target.url, "--headless", "--master",
                      "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                      "--expect-workers", "1", "--results-dir", str(out), *shape],
                     tmp_path / "master.log")  # fmt: skip
    worker = Process([*slow, "--worker", "--master-host", "127.0.0.1", "--master-port",
                      str(port), "--master-timeout", "3", *shape],
                     tmp_path / "worker.log", env={"RAMPLAB_TEST_IMPORT_S": "4"})  # fmt: skip
    try:
        master.start()
        poll_until(lambda: "Waiting for workers" in master.log(), 30, "the master listens",
                   master.running)  # fmt: skip
        worker.start()
        code = master.wait(90)
        worker.wait(15)
    finally:
        stop_all([master, worker], grace_s=5)
    assert "ramplab: worker:" not in worker.log(), worker.log()[-3000:]
    assert worker.returncode == 0, worker.log()[-3000:]
    assert code == 0, master.log()[-3000:] + worker.log()[-3000:]
    assert json.loads((out / "summary.json").read_text())["requests"] > 0
