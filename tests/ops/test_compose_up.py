"""``docker-compose up`` for real: the image built from the local Debian base (no registry), the
stack brought up (Redis, the target, Prometheus, the master through ``ramplab container master``
and two workers via ``--scale worker=2``; Grafana left out by ``docker-compose.nografana.yml``,
its image needing a registry), a shortened demo campaign run, and everything removed.

Needs root (the fixture starts Debian's dockerd through ``scripts/docker-engine.sh`` when no engine
answers) and Debian's ``docker.io``, ``docker-compose`` (1.29) and ``mmdebstrap``
(``make system-deps``). The image is rebuilt only when its inputs change (``scripts/image.sh``
labels it with their hash); a cold build takes minutes (docs/deploy.md), hence the timeout.
Containers talk on the compose project's own bridge network; the host reaches Prometheus on the
published 127.0.0.1 port only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.processes import REPO

# A cold image build (base and project) takes minutes: the timeout covers it (docs/deploy.md).
# One xdist group: both tests share one stack (and its fixed host ports).
pytestmark = [
    pytest.mark.deploy, pytest.mark.slow, pytest.mark.timeout(1800),
    pytest.mark.xdist_group("compose_up"),
]  # fmt: skip

# No Grafana: its image comes from a registry only (docker-compose.nografana.yml).
COMPOSE = ["docker-compose", "-f", str(REPO / "docker-compose.yml"),
           "-f", str(REPO / "docker-compose.local.yml"),
           "-f", str(REPO / "docker-compose.nografana.yml")]  # fmt: skip
PROMETHEUS = "http://127.0.0.1:9090"
IMAGE_UID = 10001  # the image's user (Dockerfile), who writes the results bind mount
UP_TIMEOUT_S = 240.0
RUN_TIMEOUT_S = 180.0


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def image() -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root: starts dockerd and builds images (make e2e runs it as root)")
    missing = [
        t for t in ("docker", "dockerd", "docker-compose", "mmdebstrap") if not shutil.which(t)
    ]
    assert not missing, f"missing {missing}: make system-deps installs them"
    _run(["bash", "scripts/docker-engine.sh"], timeout=120)
    started = time.monotonic()
    tag = _run(["bash", "scripts/image.sh"], timeout=1500).strip().splitlines()[-1]
    print(f"image {tag} ready in {time.monotonic() - started:.1f} s")
    return tag


def short_demo(directory: Path) -> None:
    """campaigns/demo.yaml with a ~15 s ramp: every other field as shipped."""
    campaign: dict[str, Any] = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    campaign["name"] = "demo-short"
    campaign["shape"] = {"kind": "stepped", "rates": [2, 5, 10], "hold": "5s", "warmup": "1s"}
    campaign["drain_s"] = 10
    (directory / "demo-short.yaml").write_text(yaml.safe_dump(campaign, sort_keys=False))


@pytest.fixture(scope="module")
def stack(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The stack brought up and run to the master's exit; torn down (containers, network,
    volumes) whatever happens."""
    campaigns = tmp_path_factory.mktemp("campaigns")
    results = tmp_path_factory.mktemp("results")
    os.chown(results, IMAGE_UID, IMAGE_UID)
    short_demo(campaigns)
    campaigns.chmod(0o755)  # pytest makes it 0700; the containers read it as IMAGE_UID
    project = f"ramplabtest{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "COMPOSE_PROJECT_NAME": project,
        "RAMPLAB_RESULTS_DIR": str(results),
        "RAMPLAB_CAMPAIGNS_DIR": str(campaigns),
        "RAMPLAB_CAMPAIGN": "campaigns/demo-short.yaml",
        "RAMPLAB_WORKERS": "2",
        "RAMPLAB_TARGET_CPUS": str(min(4, os.cpu_count() or 1)),
    }
    found: dict[str, Any] = {"results": results, "project": project}
    try:
        started = time.monotonic()
        _run([*COMPOSE, "up", "-d", "--scale", "worker=2"], UP_TIMEOUT_S, env)
        found["up_s"] = time.monotonic() - started  # `up -d` returns once the master is healthy
        containers = {
            name: _run(["docker-compose", *COMPOSE[1:], "ps", "-q", name], 60, env).split()
            for name in ("redis", "target", "prometheus", "master", "worker")
        }
        found["containers"] = containers
        found["healthy_s"] = _wait_healthy(containers["worker"], started)
        found["worker_targets"] = _worker_targets_up(len(containers["worker"]))
        (master,) = containers["master"]
        found["master_exit"] = int(_run(["docker", "wait", master], RUN_TIMEOUT_S).strip())
        found["master_log"] = _run(["docker", "logs", master], 60)
        found["worker_up"] = _prometheus('max_over_time(up{job="worker"}[10m])')
        found["master_up"] = _prometheus('max_over_time(up{job="master"}[10m])')
        yield found
    except BaseException:
        logs = subprocess.run(
            [*COMPOSE, "logs", "--no-color", "--tail", "60"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        print(logs.stdout[-12000:])  # pytest shows it with the failure
        raise
    finally:
        subprocess.run(
            [*COMPOSE, "down", "--volumes", "--remove-orphans", "--timeout", "10"],
            cwd=REPO, env=env, capture_output=True, timeout=180, check=False,
        )  # fmt: skip


def _wait_healthy(workers: list[str], started: float) -> float:
    deadline = time.monotonic() + UP_TIMEOUT_S
    while time.monotonic() < deadline:
        states = _run(["docker", "inspect", "--format", "{{.State.Health.Status}}", *workers], 60)
        if states.split() == ["healthy"] * len(workers):
            return time.monotonic() - started
        time.sleep(1)
    raise AssertionError(f"workers not healthy within {UP_TIMEOUT_S:g} s: {states.split()}")


def _worker_targets_up(count: int) -> list[str]:
    """Prometheus's active worker targets, once ``count`` of them are up (DNS discovery, one A
    record per replica, refreshed every 5 s)."""
    deadline = time.monotonic() + 60
    up: list[str] = []
    while time.monotonic() < deadline:
        active = httpx.get(f"{PROMETHEUS}/api/v1/targets?state=active", timeout=5).json()
        up = sorted(
            t["labels"]["instance"]
            for t in active["data"]["activeTargets"]
            if t["labels"]["job"] == "worker" and t["health"] == "up"
        )
        if len(up) == count:
            return up
        time.sleep(1)
    raise AssertionError(f"Prometheus saw workers {up} up, expected {count}")


def _prometheus(query: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{PROMETHEUS}/api/v1/query", params={"query": query}, timeout=5).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def test_the_master_runs_the_campaign_through_ramplab_and_exits_with_its_code(
    stack: dict[str, Any],
) -> None:
    assert stack["master_exit"] == 0, stack["master_log"][-4000:]
    (run_dir,) = [p for p in stack["results"].iterdir() if p.is_dir()]
    assert run_dir.name.startswith("demo-short-")  # <campaign>-<UTC time>: one per start
    for name in ("report.html", "summary.json", "requests.parquet", "run.json"):
        assert (run_dir / name).is_file(), name
    assert not (run_dir / "requests.arrows").exists()  # folded into the Parquet file at the end
    assert "2 workers connected" in stack["master_log"]
    assert "Traceback" not in stack["master_log"]


def test_prometheus_sees_every_worker_up(stack: dict[str, Any]) -> None:
    assert len(stack["worker_targets"]) == 2
    assert len(set(stack["worker_targets"])) == 2  # two replicas, two addresses
    assert [s["value"][1] for s in stack["worker_up"]] == ["1", "1"]
    assert [s["value"][1] for s in stack["master_up"]] == ["1"]
    print(f"up -d {stack['up_s']:.1f} s, all healthy {stack['healthy_s']:.1f} s")
