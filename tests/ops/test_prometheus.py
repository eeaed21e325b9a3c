"""The shipped Prometheus config and rules, and the local stack's generated config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry

from ramplab.metrics.exporter import LoadMetrics, serve
from ramplab.metrics.promconfig import PromConfigError, local_config, shipped_rule_files
from tests.ops.exporter_worker import records
from tests.ops.prom import PROMETHEUS, PROMTOOL, PrometheusProcess
from tests.support.processes import REPO
from tests.support.scrape import wait_for
from tests.support.tiny_server import Reply, TinyServer

needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool missing (make system-deps)")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus missing (make system-deps)"
)
PROM_DIR = REPO / "prometheus"


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


@needs_promtool
def test_compose_config_and_its_rules_pass_promtool() -> None:
    result = promtool("check", "config", PROM_DIR / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 rule files found" in result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize("name", ["recording.yml", "alerts.yml"])
def test_rule_files_pass_promtool(name: str) -> None:
    result = promtool("check", "rules", PROM_DIR / "rules" / name)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_rules_compute_what_they_claim() -> None:
    result = promtool("test", "rules", Path(__file__).parent / "data" / "rules_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_config_finds_workers_by_dns() -> None:
    config = yaml.safe_load((PROM_DIR / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["target"]["static_configs"][0]["targets"] == ["target:8000"]
    assert jobs["worker"]["dns_sd_configs"][0]["names"] == ["worker"]
    assert config["rule_files"] == ["rules/*.yml"]


@needs_promtool
def test_generated_local_config_passes_promtool(tmp_path: Path) -> None:
    path = tmp_path / "prometheus.yml"
    path.write_text(
        local_config(
            [("target", "127.0.0.1:8000"), ("worker", "127.0.0.1:9101"),
             ("worker", "127.0.0.1:9102"), ("master", "localhost:9100")],
            rule_files=shipped_rule_files(),
        )
    )  # fmt: skip
    result = promtool("check", "config", path)
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load(path.read_text())
    jobs = {
        job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]
    }
    assert jobs == {
        "target": ["127.0.0.1:8000"],
        "worker": ["127.0.0.1:9101", "127.0.0.1:9102"],
        "master": ["localhost:9100"],
    }
    assert len(config["rule_files"]) == 2


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ([("worker", "10.0.0.5:9101")], "loopback only"),
        ([("worker", "example.com:9101")], "loopback only"),
        ([("worker", "127.0.0.1")], "expected host:port"),
        ([("worker", "127.0.0.1:99999")], "expected host:port"),
        ([("bad job", "127.0.0.1:1")], "job name"),
        ([], "no targets"),
    ],
)
def test_local_config_rejects_what_it_cannot_hold(
    targets: list[tuple[str, str]], message: str
) -> None:
    with pytest.raises(PromConfigError, match=message):
        local_config(targets)


@needs_prometheus
@pytest.mark.timeout(90)
def test_real_prometheus_scrapes_an_exporter_with_the_generated_config(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = LoadMetrics(registry, run="local", scenario="smoke")
    for record in records(5, 20):
        metrics.observe(record)
    port = serve(registry, 0)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        local_config(
            [("worker", f"127.0.0.1:{port}")],
            rule_files=shipped_rule_files(),
            scrape_interval_s=0.5,
        )
    )
    with PrometheusProcess(config, log_path=tmp_path / "prometheus.log") as prom:

        def scraped() -> bool:
            body = prom.query('sum(ramplab_requests_total{run="local"})').json()
            return bool(body["data"]["result"])

        wait_for(scraped, timeout_s=30, what="Prometheus to scrape the exporter")
        body = prom.query('sum(ramplab_requests_total{run="local",job="worker"})').json()
        assert float(body["data"]["result"][0]["value"][1]) == 20
        rules = httpx.get(prom.url + "/api/v1/rules", timeout=10).json()
        names = {rule["name"] for group in rules["data"]["groups"] for rule in group["rules"]}
        assert "run_scenario:ramplab_ttft_seconds:p99_1m" in names
        assert "RamplabArrivalsDropped" in names


def test_compose_config_scrapes_the_engines_named_in_engines_dir() -> None:
    config = yaml.safe_load((PROM_DIR / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["engine"]["file_sd_configs"] == [
        {"files": ["engines/*.yml"], "refresh_interval": "5s"}
    ]
    assert (PROM_DIR / "engines" / "README.md").is_file()


@needs_prometheus
@pytest.mark.timeout(90)
def test_a_file_in_engines_points_the_compose_prometheus_at_an_engine(tmp_path: Path) -> None:
    """The compose config as shipped, run for real: with no file the engine job has no target and
    every other job is as before; a file naming an endpoint with vLLM's exposition (the recorded
    one) is picked up without a restart and scraped as job ``engine``."""
    vllm_text = (Path(__file__).parent / "data" / "vllm_metrics.txt").read_bytes()

    def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        return Reply(200, {"Content-Type": "text/plain; version=0.0.4"}, [vllm_text])

    config = tmp_path / "prometheus.yml"
    config.write_text((PROM_DIR / "prometheus.yml").read_text())
    (tmp_path / "engines").mkdir()
    with TinyServer(handler) as engine, PrometheusProcess(config, tmp_path / "prom.log") as prom:

        def jobs() -> dict[str, int]:
            body = httpx.get(prom.url + "/api/v1/targets", timeout=10).json()
            found: dict[str, int] = {}
            for target in body["data"]["activeTargets"]:
                job = target["labels"]["job"]
                found[job] = found.get(job, 0) + 1
            return found

        wait_for(lambda: {"target", "master", "prometheus"} <= set(jobs()), timeout_s=30)
        assert "engine" not in jobs()
        (tmp_path / "engines" / "vllm.yml").write_text(
            f'- targets: ["127.0.0.1:{engine.port}"]\n  labels: {{server: vllm}}\n'
        )

        def scraped() -> bool:
            body = prom.query('vllm:generation_tokens_total{job="engine", server="vllm"}').json()
            return bool(body["data"]["result"])

        wait_for(scraped, timeout_s=40, what="Prometheus to find and scrape the engine")
        assert jobs()["engine"] == 1
