"""``ramplab container master|worker``: the entry points of the compose stack (and any cluster).

A container is configured by ``RAMPLAB_*`` variables, so each is read and checked before
anything starts, and a bad one exits 2 naming the variable (``RAMPLAB_WORKERS: ...``): the
container's own settings (``ContainerSettings``) and every Locust option variable of the option
schema that is set (``RAMPLAB_MAX_TOKENS=0`` is refused here, not by a worker half a minute later).

The master is ``ramplab run`` with ``master_bind``: it runs the campaign against the target
service, waits for ``RAMPLAB_WORKERS`` workers from the other containers, writes a new run
directory under ``RAMPLAB_RESULTS`` for every start (``<campaign>-<UTC time>``: a second ``up``
never appends to the first), the report and the gate verdicts, and exits with the run's code.
A worker is ``locust --worker`` with the same campaign's options, so both sides read one file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from urllib.parse import urlsplit

import typer
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from rich.console import Console

from ramplab import data
from ramplab.campaign.schema import Campaign, load_campaign
from ramplab.cli.errors import user_errors
from ramplab.errors import UsageError
from ramplab.options import schema
from ramplab.options.kinds import parse_address
from ramplab.results.slo import parse_gates
from ramplab.stack.run import DEFAULT_LOCUSTFILE, RunRequest, execute

__all__ = [
    "ContainerSettings",
    "check_option_variables",
    "container_app",
    "drop_empty_option_variables",
    "settings_from",
]

PREFIX = "RAMPLAB_"
_SWITCH_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class ContainerSettings(BaseModel):
    """What a master or worker container is told; ``RAMPLAB_<FIELD>`` each."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    campaign: str = Field("demo", min_length=1)  # a path, or a shipped campaign's name
    target_url: str = "http://target:8000"
    workers: int = Field(2, ge=1, le=64)  # the master waits for this many worker containers
    master_bind: str = "0.0.0.0:5557"
    master_host: str = Field("master", min_length=1)
    master_port: int = Field(5557, ge=1, le=65535)
    results: Path = Path("/app/results")
    web_port: int = Field(0, ge=0, le=65535)  # Locust's web UI on the bind host (0: headless)
    gates: str = ""  # extra gates, ';'-separated, as for --gate

    @field_validator("target_url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            raise ValueError("expected http(s)://HOST[:PORT]") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("expected http(s)://HOST[:PORT]")
        return value

    @field_validator("master_bind")
    @classmethod
    def _bind(cls, value: str) -> str:
        try:
            parse_address(value, f"{PREFIX}MASTER_BIND")
        except UsageError as exc:
            raise ValueError(str(exc).removeprefix(f"{exc.field}: ")) from None
        return value


def settings_from(environ: Mapping[str, str]) -> ContainerSettings:
    """The container's settings from ``environ``; a ``UsageError`` naming the variable."""
    values = {
        name: environ[f"{PREFIX}{name.upper()}"]
        for name in ContainerSettings.model_fields
        if f"{PREFIX}{name.upper()}" in environ
    }
    try:
        return ContainerSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = f"{PREFIX}{str(error['loc'][0]).upper()}"
        given = values.get(str(error["loc"][0]))
        message = str(error["msg"]).removeprefix("Value error, ")
        if ", got " not in message:
            message += f", got {given!r}"
        raise UsageError(name, message) from None


def check_option_variables(environ: Mapping[str, str]) -> None:
    """Every Locust option variable set in ``environ``, checked by its option's kind;
    a ``UsageError`` naming the variable."""
    for opt in schema.OPTIONS:
        text = environ.get(opt.env)
        if text is None:
            continue
        if opt.kind.switch is not None:
            if text.strip().lower() not in _SWITCH_WORDS:
                raise UsageError(opt.env, f"expected true or false, got {text!r}")
            continue
        try:
            opt.kind.parse(text, opt.env)
        except UsageError as exc:
            if exc.field == opt.env:
                raise
            raise UsageError(opt.env, str(exc)) from None


def _campaign(settings: ContainerSettings) -> tuple[Path, Campaign]:
    given = Path(settings.campaign)
    path = given if given.exists() else data.campaign(settings.campaign)
    if path is None:
        shipped = ", ".join(p.stem for p in data.campaigns())
        raise UsageError(
            f"{PREFIX}CAMPAIGN",
            f"{settings.campaign!r} is neither a file nor a shipped campaign ({shipped})",
        )
    try:
        return path, load_campaign(path)
    except UsageError as exc:
        raise UsageError(f"{PREFIX}CAMPAIGN", f"{path}: {exc}") from None


def drop_empty_option_variables(environ: MutableMapping[str, str]) -> None:
    """Remove option variables set to the empty string: compose's ``${VAR:-}`` (pass it on when
    the shell has it) means "unset" when the shell has not, and Locust would read it as a value."""
    for opt in schema.OPTIONS:
        if environ.get(opt.env) == "":
            del environ[opt.env]


def _checked(environ: MutableMapping[str, str]) -> tuple[ContainerSettings, Path, Campaign]:
    drop_empty_option_variables(environ)  # the Locust processes inherit ``environ``
    settings = settings_from(environ)
    check_option_variables(environ)
    path, campaign = _campaign(settings)
    return settings, path, campaign


container_app = typer.Typer(
    help="Entry points of the compose stack's master and worker containers (RAMPLAB_* variables; "
    "docs/deploy.md).",
    no_args_is_help=True,
)


@container_app.command()
def master() -> None:
    """Run RAMPLAB_CAMPAIGN against RAMPLAB_TARGET_URL with RAMPLAB_WORKERS workers connecting
    to RAMPLAB_MASTER_BIND; a new run directory under RAMPLAB_RESULTS; the run's exit code."""
    with user_errors("ramplab container"):
        settings, path, campaign = _checked(os.environ)
        gates = parse_gates([g for g in settings.gates.split(";") if g.strip()], field="gates")
        host, port = parse_address(settings.master_bind, f"{PREFIX}MASTER_BIND")
        request = RunRequest(
            campaign=campaign,
            campaign_path=path,
            campaign_text=path.read_text(encoding="utf-8"),
            results_dir=settings.results,
            target_url=settings.target_url,
            workers=settings.workers,
            gates=gates,
            argv=["ramplab", "container", "master"],
            master_bind=(host, port),
            web_ui=settings.web_port > 0,
            web_port=settings.web_port or None,
        )
        code = execute(request, Console(width=160))
    raise typer.Exit(int(code))


def worker_argv(
    settings: ContainerSettings, campaign: Campaign, extra: list[str]
) -> tuple[list[str], dict[str, str]]:
    """The worker's ``locust`` command line and the variables it adds (the campaign's secrets)."""
    argv = [sys.executable, "-m", "locust", "-f", str(DEFAULT_LOCUSTFILE), "--worker",
            "--master-host", settings.master_host, "--master-port", str(settings.master_port),
            *campaign.locust_args(), *extra]  # fmt: skip
    return argv, campaign.locust_env()


@container_app.command(context_settings={"allow_extra_args": True})
def worker(ctx: typer.Context) -> None:
    """``locust --worker`` for RAMPLAB_CAMPAIGN, connecting to RAMPLAB_MASTER_HOST:PORT
    (extra arguments go to Locust)."""
    with user_errors("ramplab container"):
        settings, _, campaign = _checked(os.environ)
    argv, env = worker_argv(settings, campaign, list(ctx.args))
    sys.stdout.flush()
    # exec: Locust becomes the container's process, gets its signals and sets its exit code.
    os.execve(argv[0], argv, {**os.environ, **env})  # noqa: S606 - argv is ours, no shell
