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

import httpx
import jsonschema
import pytest
import yaml

from ramplab.campaign.schema import load_campaign
from ramplab.cli.container import (
    ContainerSettings,
    check_option_variables,
    settings_from,
    worker_argv,
)
from ramplab.options import schema
from tests.support.processes import REPO

COMPOSE = REPO / "docker-compose.yml"
LOCAL = REPO / "docker-compose.local.yml"
NOGRAFANA = REPO / "docker-compose.nografana.yml"
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


def compose_environment() -> dict[str, str]:
    """This environment without the variables the compose files read: their defaults apply."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("RAMPLAB_", "GRAFANA_", "COMPOSE_"))}  # fmt: skip


def compose_command() -> list[str] | None:
    """``docker compose`` (v2) where it works, else Debian's ``docker-compose`` (1.29)."""
    if shutil.which("docker") is not None:
        probe = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, timeout=30, check=False
        )
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.mark.skipif(compose_command() is None, reason="no docker compose on this machine")
def test_docker_compose_config_accepts_it() -> None:
    command = compose_command()
    assert command is not None
    for files in ([COMPOSE], [COMPOSE, LOCAL], [COMPOSE, LOCAL, NOGRAFANA]):
        done = subprocess.run(
            [*command, *(f"--file={f}" for f in files), "config", "--quiet"],
            env=compose_environment(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr


def test_the_services_the_issue_asks_for() -> None:
    assert set(services()) == {
        "redis", "target", "master", "worker", "prometheus", "grafana-password", "grafana",
        "jaeger",
    }  # fmt: skip
    assert services()["jaeger"]["profiles"] == ["tracing"]
    for name in ("prometheus", "grafana-password", "grafana"):  # `docker compose up` starts them
        assert "profiles" not in services()[name], name


# Services that run once before another starts (restart "no"): no healthcheck, their dependants
# wait for their successful exit.
ONE_SHOT = {"grafana-password"}


def test_one_shot_services_are_waited_for_to_succeed() -> None:
    for name in ONE_SHOT:
        assert services()[name]["restart"] == "no"
        assert "healthcheck" not in services()[name]
    waited = {dependency for service in services().values()
              for dependency, condition in service.get("depends_on", {}).items()
              if condition == {"condition": "service_completed_successfully"}}  # fmt: skip
    assert waited == ONE_SHOT


def test_every_service_has_a_healthcheck_and_a_pinned_image() -> None:
    for name, service in services().items():
        if name not in ONE_SHOT:
            assert "test" in service.get("healthcheck", {}), f"{name} has no healthcheck"
        assert PINNED.match(service["image"]), f"{name}: image {service['image']!r} is not pinned"


def test_dependencies_wait_for_health() -> None:
    for name, service in services().items():
        for dependency, condition in service.get("depends_on", {}).items():
            if dependency not in ONE_SHOT:
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
    assert float(DEFAULTED.sub(r"\1", str(target["cpus"]))) == 4
    assert any("/readyz" in part for part in target["healthcheck"]["test"])
    assert target["environment"]["APP_REDIS_URL"] == "redis://redis:6379/0"


def test_master_and_workers_run_through_ramplab_on_the_ports_prometheus_scrapes() -> None:
    master, worker = services()["master"], services()["worker"]
    assert master["command"] == ["ramplab", "container", "master"]
    assert worker["command"] == ["ramplab", "container", "worker"]
    assert master["environment"]["RAMPLAB_MASTER_METRICS_PORT"] == "9100"
    assert master["environment"]["RAMPLAB_WEB_PORT"] == "8089"
    assert "127.0.0.1:8089:8089" in master["ports"]
    assert worker["environment"]["RAMPLAB_METRICS_PORT"] == "9101"
    assert worker["environment"]["RAMPLAB_MASTER_HOST"] == "master"
    prometheus = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    assert jobs["master"]["static_configs"][0]["targets"] == ["master:9100"]
    assert jobs["worker"]["dns_sd_configs"][0]["port"] == 9101
    assert "${RAMPLAB_RESULTS_DIR:-./results}:/app/results" in master["volumes"]


def container_variables() -> set[str]:
    return {f"RAMPLAB_{name.upper()}" for name in ContainerSettings.model_fields}


def test_variables_are_locust_options_or_container_settings_never_both() -> None:
    known = {option.env for option in schema.OPTIONS}
    assert not known & container_variables()  # one meaning per variable
    for name in ("master", "worker"):
        assert set(services()[name]["environment"]) <= known | container_variables()


DEMO = REPO / "campaigns" / "demo.yaml"
DEFAULTED = re.compile(r"^\$\{\w+:-(.*)\}$")


def resolved(environment: dict[str, Any]) -> dict[str, str]:
    """Compose's ``${VAR:-default}`` values as compose resolves them with ``VAR`` unset."""
    return {k: DEFAULTED.sub(r"\1", str(v)) for k, v in environment.items()}


def test_compose_runs_the_demo_campaign() -> None:
    """Master and workers read one campaign file, campaigns/demo.yaml by default (what `make
    demo` runs); the target has its latency model (only the CPUs and the workers differ)."""
    master = resolved(services()["master"]["environment"])
    worker = resolved(services()["worker"]["environment"])
    assert master["RAMPLAB_CAMPAIGN"] == worker["RAMPLAB_CAMPAIGN"] == "campaigns/demo.yaml"
    mount = "${RAMPLAB_CAMPAIGNS_DIR:-./campaigns}:/app/campaigns:ro"
    assert mount in services()["master"]["volumes"]
    assert mount in services()["worker"]["volumes"]
    target = resolved(services()["target"]["environment"])
    demo = load_campaign(DEMO)
    expected = demo.target.environment()
    assert {k: target.get(k) for k in expected} == expected
    workers = int(master["RAMPLAB_WORKERS"])
    assert workers == services()["worker"]["deploy"]["replicas"] == demo.stack.workers


def test_the_compose_variables_pass_the_entry_points_checks() -> None:
    for name in ("master", "worker"):
        environment = resolved(services()[name]["environment"])
        settings_from(environment)
        check_option_variables(environment)


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


def test_the_worker_command_line_parses_as_the_demo_campaign() -> None:
    """The worker container's whole ``locust`` command line (``ramplab container worker``) and
    environment, read by Locust's parser with ours registered: every flag is known, and ours
    hold demo.yaml's values."""
    environment = resolved(services()["worker"]["environment"])
    campaign = load_campaign(DEMO)
    argv, secrets = worker_argv(settings_from(environment), campaign, [])
    assert argv[1:3] == ["-m", "locust"]
    parsed = locust_parse(argv[3:], {**environment, **secrets})
    expected = locust_parse(campaign.locust_args(), {})
    for option in schema.campaign_options():
        assert parsed[option.dest] == expected[option.dest], option.flag
    assert parsed["worker"] is True
    assert parsed["master_host"] == "master"
    assert parsed["metrics_port"] == 9101
    assert parsed["metrics_host"] == "0.0.0.0"


def test_the_image_ships_the_data_as_package_data() -> None:
    """Nothing but the target's config is copied beside the venv; the build context admits
    the folders ramplab/data links to (a registry build installs from the source tree)."""
    copied = [args.split()[0] for op, args in dockerfile() if op == "COPY"]
    assert "campaigns" not in copied
    admitted = (REPO / ".dockerignore").read_text().split()
    for link in ("campaigns", "locustfiles", "prometheus", "grafana"):
        assert (REPO / "ramplab" / "data" / link).resolve() == (REPO / link).resolve()
        assert f"!{link}" in admitted


def test_the_local_base_has_what_the_local_override_runs() -> None:
    """docker-compose.local.yml runs Redis and Prometheus from the project image: its base must
    carry them and the tools of their healthchecks."""
    override = yaml.safe_load((REPO / "docker-compose.local.yml").read_text())["services"]
    assert {override[name]["image"] for name in ("redis", "prometheus")} == {
        services()["master"]["image"]
    }
    script = (REPO / "scripts" / "base-image.sh").read_text()
    packages = re.search(r"^packages=(\S+)$", script, re.MULTILINE)
    assert packages is not None
    for package in ("python3", "python3-venv", "redis-server", "prometheus", "wget", "passwd"):
        assert package in packages.group(1).split(",")
    assert services()["redis"]["healthcheck"]["test"][1] == "redis-cli"  # redis-server's Depends
    assert services()["prometheus"]["healthcheck"]["test"][1] == "wget"


def test_grafana_is_provisioned_read_only_for_visitors() -> None:
    grafana = services()["grafana"]
    env = grafana["environment"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env  # never a password in the file: __FILE
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    home = Path(env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]).name
    assert (REPO / "grafana" / "dashboards" / home).is_file()


def test_every_mounted_path_exists() -> None:
    for name, service in services().items():
        for volume in service.get("volumes", []):
            source = DEFAULTED.sub(r"\1", volume.rsplit(":", 2)[0] if volume.endswith(":ro")
                                   else volume.rsplit(":", 1)[0])  # fmt: skip
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
    # FROM ${BASE_IMAGE}: the ARG's default is the registry's base (scripts/image.sh passes the
    # local one).
    (default,) = [args.split("=", 1)[1] for op, args in instructions
                  if op == "ARG" and args.startswith("BASE_IMAGE=")]  # fmt: skip
    bases = [args.split()[0].replace("${BASE_IMAGE}", default) for op, args in instructions
             if op == "FROM"]  # fmt: skip
    assert len(bases) == 2
    assert all(PINNED.match(base) and "slim" in base for base in bases)
    users = [args for op, args in instructions if op == "USER"]
    assert users, "no USER: the image would run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    for op, args in instructions:
        if op == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                if "*" not in source:  # wheelhouse*: present for scripts/image.sh's builds only
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
    campaign = DEFAULTED.sub(r"\1", services()["master"]["environment"]["RAMPLAB_CAMPAIGN"])
    if f"({campaign})" not in section:
        problems.append(f"the README does not link the compose campaign {campaign!r}")
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
    unknown = section.replace("RAMPLAB_WORKERS=4", "RAMPLAB_EXPECT_WORKERS=4")
    assert readme_mismatches(unknown) == [
        "the README sets RAMPLAB_EXPECT_WORKERS, the compose file never reads it"
    ]
    assert len(readme_mismatches(section.replace("(campaigns/demo.yaml)", "(demo)"))) == 1


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
        if name in ONE_SHOT:
            continue
        test = service["healthcheck"]["test"]
        image = service["image"].rsplit(":", 1)[0]
        assert test[0] == "CMD", f"{name}: exec form, no shell needed"
        assert test[1] == HEALTHCHECK_TOOL[image], f"{name}: {image} has no {test[1]}"


def compose_config(*files: Path) -> dict[str, Any]:
    """``docker-compose config`` (1.29, offline) of ``files``: the merged, resolved stack."""
    done = subprocess.run(
        ["docker-compose", *(f"--file={f}" for f in files), "config"],
        cwd=REPO, env=compose_environment(), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = yaml.safe_load(done.stdout)
    return config


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path → host path (relative to the checkout), ``:ro`` kept on the host side."""
    found = {}
    for volume in service["volumes"]:
        host, container, *mode = volume.split(":")
        relative = Path(host).relative_to(REPO).as_posix()
        found[container] = relative + (":ro" if mode == ["ro"] else "")
    return found


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="no docker-compose (1.29)")
def test_docker_compose_up_starts_grafana_provisioned_and_read_only_for_visitors() -> None:
    """The default files, as docker-compose 1.29 resolves them with no variable set: Grafana is
    in the stack (no profile), reads the dashboards and the datasource from grafana/, lets
    visitors in as viewers, and takes its admin password from the git-ignored file the
    password step writes, never from a value in the file."""
    stack = compose_config(COMPOSE)["services"]
    grafana, step = stack["grafana"], stack["grafana-password"]
    assert "profiles" not in grafana
    assert "profiles" not in step
    env = grafana["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env
    seen = mounts(grafana)
    assert seen["/etc/grafana/provisioning"] == "grafana/provisioning:ro"
    assert seen[env["RAMPLAB_DASHBOARDS_DIR"]] == "grafana/dashboards:ro"
    assert Path(env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]).parent == Path(
        env["RAMPLAB_DASHBOARDS_DIR"]
    )
    # The password: the step writes it where Grafana reads it, in a folder git and the image
    # build both leave out.
    secret = Path(env["GF_SECURITY_ADMIN_PASSWORD__FILE"])
    assert seen[secret.parent.as_posix()] == "grafana/secrets:ro"
    assert mounts(step)["/secrets"] == "grafana/secrets"
    assert step["command"][-1] == f"/secrets/{secret.name}"
    assert step["environment"]["GRAFANA_ADMIN_PASSWORD"] == ""  # generated when none is given
    assert grafana["depends_on"]["grafana-password"] == {
        "condition": "service_completed_successfully"
    }
    assert grafana["user"] == step["user"]  # the file is 0600: one owner reads and writes it
    ignored = subprocess.run(
        ["git", "check-ignore", "--quiet", f"grafana/secrets/{secret.name}"], cwd=REPO, check=False
    )
    assert ignored.returncode == 0, "the password file is not git-ignored"
    assert "grafana/secrets" in (REPO / ".dockerignore").read_text().split()


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="no docker-compose (1.29)")
def test_grafanas_datasource_is_the_prometheus_service() -> None:
    """The provisioned datasource's URL (Grafana expands it from its environment) names the
    compose service that runs Prometheus, on the port it listens on; the dashboards name the
    datasource by its uid (tests/ops/test_dashboards.py)."""
    stack = compose_config(COMPOSE)["services"]
    url = httpx.URL(stack["grafana"]["environment"]["RAMPLAB_PROMETHEUS_URL"])
    assert url.host == "prometheus"
    assert "prom/prometheus" in stack[url.host]["image"]
    assert any(str(port).endswith(f":{url.port}/tcp") for port in stack[url.host]["ports"])
    provisioned = yaml.safe_load(
        (REPO / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    (datasource,) = provisioned["datasources"]
    assert datasource["url"] == "${RAMPLAB_PROMETHEUS_URL}"
    assert datasource["type"] == "prometheus"


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="no docker-compose (1.29)")
def test_the_nografana_override_leaves_grafana_out_of_up() -> None:
    """What the compose-up test (and a host without the Grafana image) runs: Grafana and its
    password step behind the profile ``grafana``, everything else unchanged."""
    plain = compose_config(COMPOSE, LOCAL)["services"]
    without = compose_config(COMPOSE, LOCAL, NOGRAFANA)["services"]
    for name in ("grafana", "grafana-password"):
        assert without[name].pop("profiles") == ["grafana"]
    assert without == plain


def test_the_password_step_generates_once_and_lets_the_variable_win(tmp_path: Path) -> None:
    script = REPO / "scripts" / "grafana-password.sh"
    secret = tmp_path / "admin-password"
    env = compose_environment()

    def step(**variables: str) -> str:
        done = subprocess.run(["sh", str(script), str(secret)], env={**env, **variables},
                              capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
        assert secret.read_text() not in done.stdout + done.stderr  # never printed
        return secret.read_text()

    generated = step()
    assert re.fullmatch(r"[A-Za-z0-9]{24}", generated)
    assert secret.stat().st_mode & 0o777 == 0o600
    assert step() == generated  # kept across ups
    assert step(GRAFANA_ADMIN_PASSWORD="") == generated  # compose passes it empty when unset
    assert step(GRAFANA_ADMIN_PASSWORD="given one") == "given one"
    assert secret.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["admin-password"]
