"""``deploy/kubernetes/ramplab.yaml``, checked offline (no cluster, no helm binary installs here).

Validated: every document against Kubernetes' own OpenAPI-derived JSON schemas in strict mode
(unknown fields refused), as vendored by the ``kubernetes-validate`` package for each release;
then the fields that make the stack work, which a schema cannot know: selectors that match their
pods, Services pointing at named container ports, probes on every container and on a declared
port, requests and limits on every container, the headless worker Service, the master as a Job
that is not retried, the RAMPLAB_* variables passing the entry points' own checks, and the
campaign ConfigMap equal to campaigns/demo.yaml. Not validated: anything only a cluster decides
(scheduling the 4-CPU target, storage classes, image pulls, DNS).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ramplab.cli.container import check_option_variables, settings_from
from tests.support.processes import REPO

MANIFESTS = REPO / "deploy" / "kubernetes" / "ramplab.yaml"
KUBERNETES = "1.33"


def documents(path: Path = MANIFESTS) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def by_name(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in documents() if d["kind"] == kind}


def schema_errors(docs: list[dict[str, Any]]) -> list[str]:
    errors = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(
                f"{doc['kind']}/{doc['metadata']['name']} {list(exc.path)}: {exc.message}"
            )
    return errors


def test_every_document_matches_the_kubernetes_schema() -> None:
    assert schema_errors(documents()) == []


def test_the_schema_check_catches_mistakes() -> None:
    """A wrong type and an unknown (misspelt) field, in two documents (the first error of each
    is reported)."""
    docs = copy.deepcopy(documents())
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    deployments["ramplab-worker"]["spec"]["replicas"] = "two"
    (target,) = deployments["target"]["spec"]["template"]["spec"]["containers"]
    target["readinessProbe"]["periodSecond"] = 5
    errors = schema_errors(docs)
    assert len(errors) == 2
    assert "'two' is not of type 'integer'" in errors[1]


def pod_templates() -> dict[str, dict[str, Any]]:
    found = {}
    for kind in ("Deployment", "Job"):
        for name, doc in by_name(kind).items():
            found[f"{kind}/{name}"] = doc["spec"]["template"]
    return found


def test_every_container_has_probes_and_resources() -> None:
    for where, template in pod_templates().items():
        for container in template["spec"]["containers"]:
            ports = {p["name"] for p in container.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe"):
                assert probe in container, f"{where}: no {probe}"
                handler = container[probe].get("httpGet") or container[probe].get("tcpSocket")
                if handler is not None:
                    assert handler["port"] in ports, f"{where} {probe}: port {handler['port']}"
            for part in ("requests", "limits"):
                assert set(container["resources"][part]) == {"cpu", "memory"}, (where, part)


def test_services_select_pods_and_named_ports() -> None:
    templates = pod_templates()
    for name, service in by_name("Service").items():
        selector = service["spec"]["selector"]
        pods = [
            t for t in templates.values() if selector.items() <= t["metadata"]["labels"].items()
        ]
        assert len(pods) == 1, f"Service/{name} selects {len(pods)} pod templates"
        declared = {p["name"] for c in pods[0]["spec"]["containers"] for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in declared, f"Service/{name}: {port['targetPort']}"
    for kind in ("Deployment",):
        for name, doc in by_name(kind).items():
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert doc["spec"]["selector"]["matchLabels"].items() <= labels.items(), name


def test_workers_are_found_by_a_headless_service_and_scale() -> None:
    service = by_name("Service")["ramplab-worker"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"][0]["port"] == 9101
    workers = by_name("Deployment")["ramplab-worker"]
    master = by_name("Job")["ramplab-master"]
    env = {
        e["name"]: e["value"] for e in master["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert int(env["RAMPLAB_WORKERS"]) == workers["spec"]["replicas"]


def container_env(kind: str, name: str) -> dict[str, str]:
    (container,) = by_name(kind)[name]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container.get("env", [])}


@pytest.mark.parametrize(("kind", "name"), [("Job", "ramplab-master"),
                                            ("Deployment", "ramplab-worker")])  # fmt: skip
def test_the_variables_pass_the_entry_points_checks(kind: str, name: str) -> None:
    env = container_env(kind, name)
    settings_from(env)
    check_option_variables(env)
    assert env["RAMPLAB_CAMPAIGN"] == "campaigns/campaign.yaml"


def test_the_master_is_a_job_run_once_with_its_exit_code() -> None:
    job = by_name("Job")["ramplab-master"]
    assert job["spec"]["backoffLimit"] == 0
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["containers"][0]["command"] == ["ramplab", "container", "master"]
    assert container_env("Deployment", "ramplab-worker")["RAMPLAB_MASTER_HOST"] in by_name(
        "Service"
    )


def test_the_campaign_and_the_target_are_the_demos() -> None:
    campaign = by_name("ConfigMap")["ramplab-campaign"]["data"]["campaign.yaml"]
    assert campaign == (REPO / "campaigns" / "demo.yaml").read_text()
    demo = yaml.safe_load(campaign)
    env = container_env("Deployment", "target")
    assert float(env["APP_LATENCY__ITL_MS"]) == demo["target"]["settings"]["latency"]["itl_ms"]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    for name, service in (("redis", "redis"), ("target", "target")):
        (container,) = by_name("Deployment")[name]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == compose[service]["image"], name


def test_ramplab_runs_as_the_images_user() -> None:
    for where, template in pod_templates().items():
        if template["spec"]["containers"][0]["image"].startswith("ramplab:"):
            assert template["spec"]["securityContext"]["runAsNonRoot"] is True, where
            assert template["spec"]["securityContext"]["runAsUser"] == 10001, where
