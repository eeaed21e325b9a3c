"""The engine dashboard against a real vLLM: every panel's every query has data.

A real Prometheus (the shipped rules, a 0.5 s scrape) scrapes the tier's vLLM as job ``engine``
and a short ramp's Locust master and worker exporters; after the ramp, each query of
``ramplab-engine`` is evaluated as Grafana would and must return a number that is not NaN. The
live vLLM must also still expose every vLLM series the dashboard names (the recorded exposition
``tests/ops/test_dashboards.py`` checks the names against could drift from it).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from bench.engine import server
from ramplab.metrics.dashboards import all_dashboards
from ramplab.metrics.dashboards.engine import UID
from ramplab.metrics.promconfig import local_config, shipped_rule_files
from tests.ops import panels
from tests.ops.locust_run import LocustRun
from tests.ops.prom import PROMETHEUS, PrometheusProcess
from tests.support.records import record_count
from tests.support.scrape import metric, sample_values, wait_for

pytestmark = [
    pytest.mark.engine,
    pytest.mark.xdist_group("engine"),
    pytest.mark.timeout(300),
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus missing (make system-deps)"),
]

RUN_ID = "engine-dashboard"
SCENARIO = "llm_ramp"
SHAPE = "2,4@5s/1s"
USER = ["--max-tokens", "16", "--ignore-eos"]


def test_every_panel_of_the_engine_dashboard_has_data_against_vllm(
    engine: server.Engine, tmp_path: Path
) -> None:
    (dashboard,) = [d for d in all_dashboards() if d.uid == UID]
    exprs = [q.expr for panel in dashboard.panels for q in panel.queries]
    queried = {name for expr in exprs for name in re.findall(r"(vllm:[a-z_:]+)\{", expr)}
    exposed = {name for name, _ in sample_values(f"{engine.url}/metrics")}
    assert queried <= exposed, queried - exposed

    run = LocustRun(engine.url, tmp_path, SHAPE, workers=1, run_id=RUN_ID, extra=USER)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        local_config(
            [("engine", f"127.0.0.1:{engine.port}"),
             ("master", f"127.0.0.1:{run.master_metrics_port}"),
             ("worker", f"127.0.0.1:{run.worker_metrics_ports[0]}")],
            rule_files=shipped_rule_files(),
            scrape_interval_s=0.5,
        )
    )  # fmt: skip
    with PrometheusProcess(config, log_path=tmp_path / "prometheus.log") as prom, run:
        started = time.time()
        wait_for(run.master_finished, timeout_s=60, what="the ramp to end\n" + run.log())
        records = record_count(run.results)
        served = metric(f"{engine.url}/metrics", "vllm:request_success_total")

        def scraped_all() -> bool:
            ours = prom.query(f'sum(ramplab_requests_total{{run="{RUN_ID}"}})').json()
            theirs = prom.query("sum(vllm:request_success_total)").json()
            return panels.numbers(ours) == [records] and panels.numbers(theirs) == [served]

        wait_for(scraped_all, timeout_s=30, what="Prometheus to scrape the last requests")
        end = time.time()
        assert records >= 15, run.log()
        instance = prom.query(f'count by (instance) (ramplab_requests_total{{run="{RUN_ID}"}})')
        (series,) = instance.json()["data"]["result"]
        checked, empty = panels.empty_panels(
            prom.url, dashboard, run=RUN_ID, scenario=SCENARIO,
            instance=series["metric"]["instance"], start=started, end=end,
        )  # fmt: skip
    assert checked == len(exprs) >= 25
    assert empty == [], "\n".join(empty)
