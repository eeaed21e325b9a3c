"""The Grafana dashboards and provisioning, checked without a Grafana: one source of truth,
stable uids, the provisioned datasource, and only metrics that exist — ours, and for the engine
dashboard vLLM's, as a real vLLM exposed them (``data/vllm_metrics.txt``, data/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ramplab.metrics.dashboards import DATASOURCE_UID, all_dashboards, render
from ramplab.metrics.dashboards.__main__ import file_name, main, text
from ramplab.metrics.dashboards.engine import UID as ENGINE_UID
from ramplab.metrics.exporter import LoadMetrics, MasterGauges
from ramplab.results.engine import ENGINES
from target_service.metrics import TargetMetrics
from tests.support.processes import REPO

GRAFANA = REPO / "grafana"
UIDS = {
    "ramplab-overview": "Campaign overview",
    "ramplab-latency": "Streaming latency",
    "ramplab-decay": "Token-rate decay",
    "ramplab-decomposition": "Latency decomposition",
    "ramplab-target": "Target internals",
    "ramplab-retries": "Retries and recovery",
    "ramplab-engine": "Inference engine",
}
VLLM_METRICS = Path(__file__).parent / "data" / "vllm_metrics.txt"
SELECTED = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{|label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)")


def committed() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((GRAFANA / "dashboards").glob("*.json")):
        data = json.loads(path.read_text())
        out[data["uid"]] = data
    return out


def existing_series() -> set[str]:
    """Every series name the exporters, the target and the recording rules produce."""
    names: set[str] = set()
    registry = CollectorRegistry()
    LoadMetrics(registry, "r", "s")
    MasterGauges(registry, "r", "s")
    TargetMetrics(registry)
    for family in registry.collect():
        if family.type == "histogram":
            names.update(f"{family.name}{s}" for s in ("_bucket", "_sum", "_count"))
        elif family.type == "counter":
            names.add(f"{family.name}_total")
        else:
            names.add(family.name)
    rules = yaml.safe_load((REPO / "prometheus" / "rules" / "recording.yml").read_text())
    names.update(rule["record"] for group in rules["groups"] for rule in group["rules"])
    return names


def vllm_series() -> set[str]:
    """Every sample name of the recorded vLLM exposition (``_bucket``, ``_total``, … included)."""
    text = VLLM_METRICS.read_text()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def queries(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_committed_json_is_the_generators_output() -> None:
    dashboards = all_dashboards()
    for dashboard in dashboards:
        path = GRAFANA / "dashboards" / file_name(dashboard)
        assert path.read_text() == text(dashboard), (
            f"{path} is stale: python -m ramplab.metrics.dashboards"
        )
    assert len(list((GRAFANA / "dashboards").glob("*.json"))) == len(dashboards)
    assert main(["--check", str(GRAFANA / "dashboards")]) == 0


def test_check_mode_notices_a_stale_file(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 0
    (tmp_path / "decay.json").write_text("{}\n")
    assert main(["--check", str(tmp_path)]) == 1
    assert "decay.json" in capsys.readouterr().err


def test_seven_dashboards_with_stable_uids_and_the_three_variables() -> None:
    dashboards = committed()
    assert {uid: d["title"].removeprefix("ramplab / ") for uid, d in dashboards.items()} == UIDS
    for dashboard in dashboards.values():
        names = [v["name"] for v in dashboard["templating"]["list"]]
        assert names == ["run", "scenario", "instance"]
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dashboard["panels"]:
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24
            assert panel["targets"], panel["title"]


def test_every_dashboard_uses_the_provisioned_datasource_uid() -> None:
    provisioned = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    (datasource,) = provisioned["datasources"]
    assert datasource["uid"] == DATASOURCE_UID
    assert datasource["type"] == "prometheus"
    for dashboard in committed().values():
        for variable in dashboard["templating"]["list"]:
            assert variable["datasource"]["uid"] == DATASOURCE_UID
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == DATASOURCE_UID
            assert {t["datasource"]["uid"] for t in panel["targets"]} == {DATASOURCE_UID}


def grafana_expanded(path: Path) -> dict[str, Any]:
    """A provisioning file with ``${VAR}`` expanded from compose's Grafana environment."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = compose["services"]["grafana"]["environment"]
    text = path.read_text()
    used = set(re.findall(r"\$\{(\w+)\}", text))
    assert used <= set(env), f"{path.name}: compose does not set {used - set(env)}"
    for name in used:
        text = text.replace("${" + name + "}", str(env[name]))
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_the_file_provider_reads_the_dashboards_compose_mounts() -> None:
    provider = grafana_expanded(GRAFANA / "provisioning" / "dashboards" / "ramplab.yml")
    (entry,) = provider["providers"]
    assert entry["type"] == "file"
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    volumes = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{entry['options']['path']}:ro" in volumes


def test_the_datasource_points_at_the_compose_prometheus() -> None:
    provisioned = grafana_expanded(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")
    (datasource,) = provisioned["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert "prometheus" in compose["services"]


def test_queries_name_only_series_that_exist() -> None:
    ours = existing_series()
    for dashboard in committed().values():
        known = ours | vllm_series() if dashboard["uid"] == ENGINE_UID else ours
        for expr in queries(dashboard) + [v["definition"] for v in dashboard["templating"]["list"]]:
            used = {a or b for a, b in SELECTED.findall(expr)} or {expr}
            assert used <= known, f"{dashboard['uid']}: unknown series in {expr}"


def test_every_load_generator_query_filters_on_the_variables() -> None:
    for dashboard in all_dashboards():
        for target in (t for p in render(dashboard)["panels"] for t in p["targets"]):
            expr = target["expr"]
            if "ramplab_" in expr:
                assert '$run"' in expr, expr
                assert '$scenario"' in expr, expr


def test_the_recorded_vllm_exposition_is_vllms() -> None:
    """The fixture is what it claims: vLLM's names, the ones ramplab's own scrape reads."""
    names = vllm_series()
    wanted = {name for names_ in ENGINES["vllm"].values() for name in names_[:1]}
    histograms = {f"{name}_bucket" for name in wanted if name.endswith("_seconds")}
    counters_and_gauges = {name for name in wanted if not name.endswith("_seconds")}
    assert histograms | counters_and_gauges <= names


def test_the_engine_dashboard_reads_vllm_by_the_names_ramplab_knows() -> None:
    """Its vLLM series are the ones ``results/engine.py`` reads (one list of names to keep up),
    and every panel but the vLLM-only ones falls back to the reference target's."""
    (dashboard,) = [d for d in all_dashboards() if d.uid == ENGINE_UID]
    known = {name for names in ENGINES["vllm"].values() for name in names}
    used = set()
    for panel in dashboard.panels:
        for query in panel.queries:
            used |= {a for a, _ in SELECTED.findall(query.expr) if a.startswith("vllm:")}
    bases = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    assert bases <= known, bases - known
    assert len(bases) == 14  # every figure of vLLM's in ENGINES
    vllm_only = {"KV-cache usage", "End to end: server and client", "Decode time"}
    for panel in dashboard.panels:
        server = [q.expr for q in panel.queries if "vllm:" in q.expr]
        assert server, panel.title
        if panel.title not in vllm_only:
            assert all(" or " in expr and "target_" in expr for expr in server), panel.title
