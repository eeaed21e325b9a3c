"""``docker-compose.yml`` and ``Dockerfile``, checked statically (no Docker engine here).

The schema is the Compose Specification's JSON schema (compose-spec/compose-spec,
``schema/compose-spec.json``, Apache-2.0) as shipped in Debian's ``docker-compose`` 1.29.2
package (``compose/config/compose_spec.json``), vendored as ``data/compose-spec.json``.
Where a ``docker`` CLI exists, ``docker compose config`` checks the file too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import configargparse
import jsonschema
import pytest
import yaml

from ramplab.load.shapes import parse_shape
from ramplab.options import register_ramp_options, register_stream_options, schema
from ramplab.stack.campaign import load_campaign
from tests.support.processes import REPO

COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
SCHEMA = Path(__file__).parent / "data" / "compose-spec.json"
PINNED = re.compile(r"^[\w./-]+:(?!latest$)v?\d[\w.-]*$")


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def schema_errors(document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft201909Validator(json.loads(SCHEMA.read_text()))
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(document)]


def test_compose_file_matches_the_compose_specification() -> None:
    assert schema_errors(compose()) == []


def test_the_schema_check_catches_a_mistake() -> None:
    broken = compose()
    broken["services"]["target"]["healthcheck"]["intervall"] = "5s"
    broken["services"]["worker"]["depends_on"]["master"]["condition"] = 7
    assert len(schema_errors(broken)) == 2


def has_compose() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not has_compose(), reason="no `docker compose` on this machine")
def test_docker_compose_config_accepts_it() -> None:
    done = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"],
        env={**os.environ, "GRAFANA_ADMIN_PASSWORD": "test"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_services_the_issue_asks_for() -> None:
    assert set(services()) == {
        "redis", "target", "master", "worker", "prometheus", "grafana", "jaeger",
    }  # fmt: skip
    assert services()["jaeger"]["profiles"] == ["tracing"]
    assert "profiles" not in services()["prometheus"]


def test_every_service_has_a_healthcheck_and_a_pinned_image() -> None:
    for name, service in services().items():
        assert "test" in service.get("healthcheck", {}), f"{name} has no healthcheck"
        assert PINNED.match(service["image"]), f"{name}: image {service['image']!r} is not pinned"


def test_dependencies_wait_for_health() -> None:
    for name, service in services().items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition == {"condition": "service_healthy"}, f"{name} -> {dependency}"
    assert set(services()["master"]["depends_on"]) == {"target", "prometheus"}
    assert set(services()["target"]["depends_on"]) == {"redis"}


def test_ports_are_published_on_loopback_only() -> None:
    published = 0
    for name, service in services().items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port}"
            published += 1
    assert published == 5  # target, Locust UI, Prometheus, Grafana, Jaeger UI
    assert "ports" not in services()["worker"]  # scaled replicas cannot share a host port
    assert "container_name" not in services()["worker"]


def test_target_is_limited_to_four_cpus_and_checks_readyz() -> None:
    target = services()["target"]
    assert float(target["cpus"]) == 4
    assert any("/readyz" in part for part in target["healthcheck"]["test"])
    assert target["environment"]["APP_REDIS_URL"] == "redis://redis:6379/0"


def test_master_runs_the_campaign_with_its_ui_and_the_ports_prometheus_scrapes() -> None:
    master, worker = services()["master"]["command"], services()["worker"]["command"]
    assert "--autostart" in master
    assert "--headless" not in master
    assert master[master.index("--master-metrics-port") + 1] == "9100"
    assert worker[worker.index("--metrics-port") + 1] == "9101"
    prometheus = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    assert jobs["master"]["static_configs"][0]["targets"] == ["master:9100"]
    assert jobs["worker"]["dns_sd_configs"][0]["port"] == 9101
    assert "./results:/app/results" in services()["master"]["volumes"]


def test_campaign_variables_are_real_locust_options() -> None:
    known = {option.env for option in schema.OPTIONS}
    for name in ("master", "worker"):
        assert set(services()[name]["environment"]) <= known


DEMO = REPO / "campaigns" / "demo.yaml"
DEFAULTED = re.compile(r"^\$\{\w+:-(.*)\}$")
# Labels, the exporter's bind address and where traces go: compose's own business, not the
# campaign's.
COMPOSE_ONLY = {option.dest for option in schema.options_of("metrics")} | {"otlp_endpoint"}


def registered_parser() -> configargparse.ArgumentParser:
    parser = configargparse.ArgumentParser()
    register_stream_options(parser)
    register_ramp_options(parser)
    return parser


def resolved(environment: dict[str, Any]) -> dict[str, str]:
    """Compose's ``${VAR:-default}`` values as compose resolves them with ``VAR`` unset."""
    return {k: DEFAULTED.sub(r"\1", str(v)) for k, v in environment.items()}


def campaign_mismatches(environment: dict[str, str]) -> set[str]:
    """Options on which Locust, reading ``environment``, differs from ``campaigns/demo.yaml``."""
    parser = registered_parser()
    campaign = load_campaign(DEMO)
    local = parser.parse_args(campaign.locust_args(), env_vars=campaign.locust_env())
    composed = parser.parse_args([], env_vars=environment)
    stages = [(s.rate, s.duration_s, s.warmup_s) for s in campaign.load_shape.stages]
    differ = {
        dest for dest, value in vars(local).items()
        if dest not in COMPOSE_ONLY | {"ramplab_shape"} and getattr(composed, dest) != value
    }  # fmt: skip
    shape = parse_shape(composed.ramplab_shape)
    if [(s.rate, s.duration_s, s.warmup_s) for s in shape.stages] != stages:
        differ.add("ramplab_shape")
    return differ


def test_compose_runs_the_demo_campaign() -> None:
    """``docker compose up`` and ``make demo`` run the same ramp with the same requests against
    a target with the same latency model (only the CPUs and the number of workers differ)."""
    master = resolved(services()["master"]["environment"])
    assert master == resolved(services()["worker"]["environment"])
    assert campaign_mismatches(master) == set()
    target = resolved(services()["target"]["environment"])
    demo = load_campaign(DEMO)
    expected = demo.target.environment()
    assert {k: target.get(k) for k in expected} == expected
    command = services()["master"]["command"]
    expect = DEFAULTED.sub(r"\1", command[command.index("--expect-workers") + 1])
    assert int(expect) == services()["worker"]["deploy"]["replicas"] == demo.stack.workers


def test_a_campaign_mismatch_would_be_caught() -> None:
    master = resolved(services()["master"]["environment"])
    assert campaign_mismatches({**master, "RAMPLAB_MAX_TOKENS": "64"}) == {"max_tokens"}
    assert campaign_mismatches({**master, "RAMPLAB_SHAPE": "1,2,5@20s/5s"}) == {"ramplab_shape"}
    assert "ignore_eos" in campaign_mismatches(
        {k: v for k, v in master.items() if k != "RAMPLAB_IGNORE_EOS"}
    )


# Locust's own parser with ours registered, as a container builds it; in a subprocess because
# importing locust monkey-patches this test process (gevent).
LOCUST_PARSE = """
import json, sys
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from ramplab.options import register_ramp_options, register_stream_options
parser = get_empty_argument_parser(default_config_files=[])
setup_parser_arguments(parser)
register_stream_options(parser)
register_ramp_options(parser)
args, env = json.loads(sys.stdin.read())
print(json.dumps(vars(parser.parse_args(args, env_vars=env)), default=str))
"""


def locust_parse(args: list[str], environment: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", LOCUST_PARSE], input=json.dumps([args, environment]),
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def test_compose_command_lines_parse_as_the_demo_campaign() -> None:
    """Each container's whole ``locust`` command line and environment, read by Locust's parser
    with ours registered: every flag is known, and ours hold demo.yaml's values."""
    campaign = load_campaign(DEMO)
    expected = json.loads(
        json.dumps(vars(registered_parser().parse_args(campaign.locust_args())), default=str)
    )
    for name in ("master", "worker"):
        command = [DEFAULTED.sub(r"\1", part) for part in services()[name]["command"]]
        assert command[0] == "locust"
        parsed = locust_parse(command[1:], resolved(services()[name]["environment"]))
        for option in schema.campaign_options():
            if option.dest != "ramplab_shape":
                assert parsed[option.dest] == expected[option.dest], (name, option.flag)
    assert parsed["metrics_port"] == 9101
    assert parsed["run_id"] == "compose-demo"


def test_the_image_holds_the_campaigns() -> None:
    copied = [args.split()[0] for op, args in dockerfile() if op == "COPY"]
    assert "campaigns" in copied


def test_grafana_is_provisioned_read_only_for_visitors() -> None:
    grafana = services()["grafana"]
    env = grafana["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    home = Path(env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]).name
    assert (REPO / "grafana" / "dashboards" / home).is_file()


def test_every_mounted_path_exists() -> None:
    for name, service in services().items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith("./"), f"{name}: {volume} (bind mounts only)"
            assert (REPO / source).exists(), f"{name} mounts missing {source}"


def dockerfile() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_dockerfile_is_slim_pinned_and_non_root() -> None:
    instructions = dockerfile()
    bases = [args.split()[0] for op, args in instructions if op == "FROM"]
    assert bases
    assert all(PINNED.match(base) and "slim" in base for base in bases)
    users = [args for op, args in instructions if op == "USER"]
    assert users, "no USER: the image would run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    for op, args in instructions:
        if op == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert (REPO / source).exists(), f"COPY {source}: missing"
    assert {"8000", "8089", "9100", "9101"} <= set(
        next(args for op, args in instructions if op == "EXPOSE").split()
    )


README = REPO / "README.md"
URL_ROW = re.compile(r"^\| (http://[^ ]+) \| (.*) \|$", re.MULTILINE)


def readme_compose_section(text: str | None = None) -> str:
    text = README.read_text() if text is None else text
    start = text.index("## docker compose")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def published_ports() -> dict[str, str]:
    """``host:port`` published on the host → the service publishing it."""
    found: dict[str, str] = {}
    for name, service in services().items():
        for port in service.get("ports", []):
            host, published, _ = str(port).rsplit(":", 2)
            found[f"{host}:{published}"] = name
    return found


def readme_mismatches(section: str) -> list[str]:
    """Claims of the README's docker compose section that the compose file does not back."""
    problems: list[str] = []
    ports = published_ports()
    rows = URL_ROW.findall(section)
    if not rows:
        problems.append("no URL table")
    listed = set()
    for url, what in rows:
        address = url.removeprefix("http://").rstrip("/")
        listed.add(address)
        service = ports.get(address)
        if service is None:
            problems.append(f"{url}: no service publishes {address}")
            continue
        profile = re.search(r"profile `(\w+)`", what)
        profiles = services()[service].get("profiles", [])
        if (profile.group(1) if profile else None) not in (profiles or [None]):
            problems.append(f"{url}: {service} has profiles {profiles}, the README says {what!r}")
    problems += [f"{address} is published but not in the table" for address in set(ports) - listed]
    compose_text = COMPOSE.read_text()
    for variable in sorted(set(re.findall(r"\b((?:RAMPLAB|GRAFANA)_[A-Z_]+)=", section))):
        if "${" + variable not in compose_text:
            problems.append(f"the README sets {variable}, the compose file never reads it")
    for profile in re.findall(r"--profile (\w+)", section):
        if not any(profile in s.get("profiles", []) for s in services().values()):
            problems.append(f"--profile {profile}: no such profile")
    for service in re.findall(r"--scale (\w+)=", section):
        if service not in services():
            problems.append(f"--scale {service}: no such service")
    shape = DEFAULTED.sub(r"\1", services()["master"]["environment"]["RAMPLAB_SHAPE"])
    if f"`{shape}`" not in section:
        problems.append(f"the README does not quote the compose ramp {shape!r}")
    return problems


def test_the_readme_compose_section_matches_the_compose_file() -> None:
    assert readme_mismatches(readme_compose_section()) == []


def test_a_readme_mismatch_would_be_caught() -> None:
    section = readme_compose_section()
    wrong_port = section.replace("http://127.0.0.1:16686", "http://127.0.0.1:16687")
    assert readme_mismatches(wrong_port) == [
        "http://127.0.0.1:16687: no service publishes 127.0.0.1:16687",
        "127.0.0.1:16686 is published but not in the table",
    ]
    no_profile = section.replace("(profile `tracing`)", "")
    assert len(readme_mismatches(no_profile)) == 1
    unknown = section.replace("RAMPLAB_EXPECT_WORKERS=4", "RAMPLAB_WORKERS=4")
    assert readme_mismatches(unknown) == [
        "the README sets RAMPLAB_WORKERS, the compose file never reads it"
    ]
    assert len(readme_mismatches(section.replace("@20s/5s", "@30s/5s"))) == 1


# What each image has to run its healthcheck with — checked here because no engine runs them.
# prom/prometheus builds on busybox; grafana/grafana and jaegertracing/all-in-one 1.x on Alpine
# (jaeger's docker/base image; not scratch or distroless), so busybox wget is in all three.
HEALTHCHECK_TOOL = {
    "redis": "redis-cli",
    "prom/prometheus": "wget",
    "grafana/grafana": "wget",
    "jaegertracing/all-in-one": "wget",
    "ramplab": "python",  # our own image: python only, no wget or curl
}


def test_every_healthcheck_runs_a_tool_its_image_has() -> None:
    for name, service in services().items():
        test = service["healthcheck"]["test"]
        image = service["image"].rsplit(":", 1)[0]
        assert test[0] == "CMD", f"{name}: exec form, no shell needed"
        assert test[1] == HEALTHCHECK_TOOL[image], f"{name}: {image} has no {test[1]}"
