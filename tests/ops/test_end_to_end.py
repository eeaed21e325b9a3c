"""End to end: every panel of every dashboard has data after a real short ramp.

A real target (with a few injected 429/503 faults and a global rate limit, so the fault panels
have something to show), a real Locust master and two workers with exporters, and a real
Prometheus scraping all four with ``promconfig.local_config`` and the shipped rules. After the
ramp, each panel's queries — variables filled in with this run's values — are evaluated the way
Grafana would (range queries for time series, instant ones for stats and bar gauges) and must
return at least one number that is not NaN.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ramplab.metrics.dashboards import all_dashboards
from ramplab.metrics.dashboards.engine import UID as ENGINE_UID
from ramplab.metrics.promconfig import local_config, shipped_rule_files
from tests.ops import panels
from tests.ops.locust_run import LocustRun
from tests.ops.prom import PROMETHEUS, PrometheusProcess
from tests.support.processes import TargetProcess
from tests.support.records import record_count, run_records
from tests.support.scrape import wait_for

# One worker for the module: its tests share one run (tests/conftest.py).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("ops-end-to-end"),
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus missing (make system-deps)"),
]

RUN_ID = "e2e"
SCENARIO = "llm_ramp"
SHAPE = "4,8@6s/1s"
TARGET_ENV = {
    "APP_LATENCY__ITL_MS": "5",
    "APP_LATENCY__ITL_JITTER_MS": "0",
    # Enough failures that every fault panel has data, few enough that the ramp still runs.
    "APP_FAULTS__RATIO_429": "0.15",
    "APP_FAULTS__RATIO_503": "0.15",
    "APP_FAULTS__RETRY_AFTER_S": "1",
    "APP_RATELIMIT__GLOBAL_LIMIT": "6",
    "APP_RATELIMIT__PERIOD_S": "1",
    # The engine dashboard's prefix-cache panel falls back to the target's: give it lookups.
    "APP_PREFIX_CACHE__ENABLED": "true",
}
# Two attempts: some requests recover on retry (retry panels), some still fail (error panels).
RETRY = '{"policy": "exponential", "base_s": 0.05, "cap_s": 0.2, "max_attempts": 2}'
USER = ["--max-tokens", "8", "--ignore-eos", "--chunk-size", "2", "--ramplab-retry", RETRY]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    out = tmp_path_factory.mktemp("e2e")
    with TargetProcess(TARGET_ENV, log_path=out / "target.log") as target:
        run = LocustRun(target.url, out, SHAPE, run_id=RUN_ID, extra=USER)
        config = out / "prometheus.yml"
        config.write_text(
            local_config(
                [("target", f"127.0.0.1:{target.port}"),
                 ("master", f"127.0.0.1:{run.master_metrics_port}"),
                 *[("worker", f"127.0.0.1:{port}") for port in run.worker_metrics_ports]],
                rule_files=shipped_rule_files(),
                scrape_interval_s=0.5,
            )
        )  # fmt: skip
        with PrometheusProcess(config, log_path=out / "prometheus.log") as prom, run:
            started = time.time()
            wait_for(run.master_finished, timeout_s=90, what="the ramp to end\n" + run.log())
            records = record_count(run.results)

            def scraped_all() -> bool:
                body = prom.query(f'sum(ramplab_requests_total{{run="{RUN_ID}"}})').json()
                return panels.numbers(body) == [records]

            wait_for(scraped_all, timeout_s=30, what="Prometheus to scrape the last requests")
            yield {"prom": prom, "run": run, "start": started, "end": time.time()}


def fill(expr: str, instance: str, range_s: int) -> str:
    return panels.fill(expr, RUN_ID, SCENARIO, instance, range_s)


def worker_instance(prom: PrometheusProcess) -> str:
    body = prom.query(f'count by (instance) (ramplab_requests_total{{run="{RUN_ID}"}})').json()
    instances = sorted(series["metric"]["instance"] for series in body["data"]["result"])
    assert len(instances) == 2
    return instances[0]


def test_the_run_produced_records_with_faults_and_retries(stack: dict[str, Any]) -> None:
    records = run_records(stack["run"].results)
    assert len(records) > 30
    assert any(r["attempts"] > 1 for r in records)
    assert any(not r["ok"] for r in records)


def test_recording_and_alerting_rules_are_loaded_and_healthy(stack: dict[str, Any]) -> None:
    prom: PrometheusProcess = stack["prom"]
    groups = httpx.get(prom.url + "/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert {group["name"] for group in groups} >= {"ramplab_rates", "ramplab_run", "target"}
    assert [r["name"] for r in rules if r["health"] != "ok"] == []
    assert any(r["type"] == "alerting" for r in rules)


def test_the_variables_resolve_to_this_run(stack: dict[str, Any]) -> None:
    prom: PrometheusProcess = stack["prom"]
    instance = worker_instance(prom)
    expected = {"run": RUN_ID, "scenario": SCENARIO, "instance": instance}
    for dashboard in all_dashboards():
        for variable in dashboard.variables:
            metric = fill(variable.metric, instance, 60)
            body = prom.query(f"count by ({variable.label}) ({metric})").json()
            values = {series["metric"][variable.label] for series in body["data"]["result"]}
            assert expected[variable.name] in values, (dashboard.uid, variable.name, values)


def test_every_panel_query_of_every_dashboard_returns_data(stack: dict[str, Any]) -> None:
    prom: PrometheusProcess = stack["prom"]
    instance = worker_instance(prom)
    empty: list[str] = []
    checked = 0
    for dashboard in all_dashboards():
        # The engine dashboard's vLLM-only queries have no data here: tests/engine/
        # test_dashboard.py runs them against vLLM. Those with the target's fallback must.
        wanted = (lambda expr: "target_" in expr) if dashboard.uid == ENGINE_UID else None
        n, missing = panels.empty_panels(
            prom.url, dashboard, run=RUN_ID, scenario=SCENARIO, instance=instance,
            start=stack["start"], end=stack["end"], wanted=wanted,
        )  # fmt: skip
        checked += n
        empty += missing
    assert checked >= 70
    assert empty == [], "\n".join(empty)


def test_a_query_without_data_would_be_caught(stack: dict[str, Any]) -> None:
    """The check above can fail: a panel filtered on another run has no numbers."""
    prom: PrometheusProcess = stack["prom"]
    expr = all_dashboards()[0].panels[0].queries[1].expr.replace("$run", "no-such-run")
    body = prom.query(expr.replace("$scenario", SCENARIO).replace("$instance", ".*")).json()
    assert panels.numbers(body) == []
