"""``ramplab container master|worker``: the variables checked before anything starts (exit 2
naming the variable), and a master with remote workers (``master_bind``) on loopback — what the
compose stack runs, without Docker (tests/ops/test_compose_up.py brings the real stack up)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ramplab import data
from ramplab.cli.container import (
    ContainerSettings,
    check_option_variables,
    drop_empty_option_variables,
    settings_from,
)
from ramplab.errors import UsageError
from target_service.embedded_redis import free_port
from tests.support.cli import TINY
from tests.support.processes import REPO
from tests.support.targets import SharedTarget


def test_defaults_are_the_compose_stacks() -> None:
    settings = settings_from({})
    assert settings == ContainerSettings()
    assert (settings.campaign, settings.target_url, settings.workers) == (
        "demo", "http://target:8000", 2,
    )  # fmt: skip
    assert (settings.master_bind, settings.master_host, settings.master_port) == (
        "0.0.0.0:5557", "master", 5557,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RAMPLAB_WORKERS", "abc", "valid integer"),
        ("RAMPLAB_WORKERS", "0", "greater than or equal to 1"),
        ("RAMPLAB_MASTER_BIND", "0.0.0.0", "HOST:PORT"),
        ("RAMPLAB_MASTER_PORT", "70000", "less than or equal to 65535"),
        ("RAMPLAB_TARGET_URL", "target:8000", "http(s)://HOST[:PORT]"),
        ("RAMPLAB_TARGET_URL", "http://target:port", "http(s)://HOST[:PORT]"),
        ("RAMPLAB_CAMPAIGN", "", "at least 1 character"),
        ("RAMPLAB_WEB_PORT", "-1", "greater than or equal to 0"),
    ],
)
def test_a_bad_container_variable_is_named(variable: str, value: str, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        settings_from({variable: value})
    assert caught.value.field == variable
    assert says in str(caught.value)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RAMPLAB_MAX_TOKENS", "0"),
        ("RAMPLAB_MAX_TOKENS", "many"),
        ("RAMPLAB_IGNORE_EOS", "maybe"),
        ("RAMPLAB_SHAPE", "fast"),
        ("RAMPLAB_METRICS_PORT", "99999"),
        ("RAMPLAB_ARRIVALS", "sometimes"),
    ],
)
def test_a_bad_locust_option_variable_is_named(variable: str, value: str) -> None:
    with pytest.raises(UsageError) as caught:
        check_option_variables({variable: value})
    assert caught.value.field == variable


def test_good_option_variables_pass() -> None:
    check_option_variables({
        "RAMPLAB_MAX_TOKENS": "64", "RAMPLAB_IGNORE_EOS": "true", "RAMPLAB_SHAPE": "1,2@5s/1s",
        "RAMPLAB_METRICS_PORT": "9101", "RAMPLAB_METRICS_HOST": "0.0.0.0", "OTHER": "x",
    })  # fmt: skip


def test_an_empty_option_variable_counts_as_unset() -> None:
    """compose's ``${RAMPLAB_X:-}`` with nothing in the shell sets the variable to ''."""
    environ = {"RAMPLAB_MAX_TOKENS": "", "RAMPLAB_SHAPE": "1@5s", "RAMPLAB_GATES": ""}
    drop_empty_option_variables(environ)
    assert environ == {"RAMPLAB_SHAPE": "1@5s", "RAMPLAB_GATES": ""}  # GATES: not an option
    check_option_variables(environ)


def test_shipped_campaigns_are_found_by_name_or_readme_path() -> None:
    demo = data.campaign("demo")
    assert demo is not None
    assert demo.read_bytes() == (REPO / "campaigns" / "demo.yaml").read_bytes()
    assert data.campaign("demo.yaml") == data.campaign("campaigns/demo.yaml") == demo
    for unknown in ("nope", "other/demo.yaml", "/abs/demo.yaml", "a/b/demo.yaml"):
        assert data.campaign(unknown) is None
    assert [p.stem for p in data.campaigns()] == sorted(
        p.stem for p in (REPO / "campaigns").glob("*.yaml")
    )
    assert data.locustfile().is_file()
    assert (data.prometheus_dir() / "prometheus.yml").is_file()
    assert (data.grafana_dir() / "dashboards").is_dir()


def container(role: str, env: dict[str, str], cwd: Path, timeout: float = 60) -> (
    subprocess.CompletedProcess[str]
):  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "ramplab.cli.app", "container", role],
        cwd=cwd, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("role", ["master", "worker"])
def test_a_container_with_a_bad_variable_exits_2_naming_it(role: str, tmp_path: Path) -> None:
    done = container(role, {"RAMPLAB_MAX_TOKENS": "0"}, tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr == "ramplab container: error: RAMPLAB_MAX_TOKENS: must be at least 1, got 0\n"
    )
    done = container(role, {"RAMPLAB_CAMPAIGN": "campaigns/nope.yaml"}, tmp_path)
    assert done.returncode == 2
    assert "RAMPLAB_CAMPAIGN: 'campaigns/nope.yaml' is neither a file nor a shipped campaign" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_master_with_remote_workers_runs_and_reports(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    """The compose master's path on loopback: the master waits for a worker it did not start,
    writes a new run directory with report.html and exits with the run's code."""
    shared_target.reset()
    (tmp_path / "tiny.yaml").write_text(TINY)
    port = free_port()
    env = {"RAMPLAB_CAMPAIGN": "tiny.yaml", "RAMPLAB_TARGET_URL": shared_target.url,
           "RAMPLAB_WORKERS": "1", "RAMPLAB_MASTER_BIND": f"127.0.0.1:{port}",
           "RAMPLAB_RESULTS": str(tmp_path / "results"), "RAMPLAB_MASTER_HOST": "127.0.0.1",
           "RAMPLAB_MASTER_PORT": str(port)}  # fmt: skip
    master = subprocess.Popen(
        [sys.executable, "-m", "ramplab.cli.app", "container", "master"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **env}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        worker = container("worker", env, tmp_path, timeout=120)
        out, _ = master.communicate(timeout=120)
    finally:
        master.kill()
    assert master.returncode == 0, out[-3000:]
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert "waiting for 1 workers to connect" in out
    (run_dir,) = (tmp_path / "results").iterdir()
    assert run_dir.name.startswith("tiny-")
    assert (run_dir / "report.html").is_file()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["exit_code"] == 0
    assert meta["command"] == "ramplab container master"
