"""Campaign files: one YAML document that says what to run, validated before anything starts.

A campaign names the load (``shape`` or ``steps``, ``mode``, ``arrivals``), the client's
behaviour (``retry``, ``workload``), the verdict (``slo``, ``gates``) and, for the local stack
only, the reference target's settings (``target.settings``, sent as ``APP_*`` variables)::

    name: demo
    shape: {kind: stepped, rates: [1, 2, 5, 10], hold: 20s, warmup: 5s}
    # or: steps: [{qps: 1, hold: 20s, warmup: 5s}, {qps: 2, hold: 20s}]
    arrivals: poisson
    retry: retry_after
    workload: {max_tokens: 32, ignore_eos: true, chunk_size: 4, prompt_tokens: 64}
    slo: {ttft_ms: 800}
    gates: ["steps[*].error_ratio <= 0.01"]
    stack: {workers: 2}
    target: {settings: {latency: {itl_ms: 5}}}

Every field is checked by pydantic (unknown keys are refused) and by the parsers the Locust
processes use themselves (``parse_shape``, ``parse_retry``, ``parse_gates``), so a campaign that
validates here starts cleanly there. Every problem is a ``CampaignError`` naming the field the
way the file spells it (``steps[2].qps``, ``workload.max_tokens``) — the CLI exits 2 with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ramplab.errors import UsageError
from ramplab.load.arrivals.schedule import make_process
from ramplab.load.shapes import Shape, parse_duration, shape_from_dict
from ramplab.results.slo import parse_gates, parse_request_slo
from ramplab.retry.config import parse_retry

__all__ = [
    "NAME_RULE",
    "Campaign",
    "CampaignError",
    "is_valid_name",
    "load_campaign",
    "parse_campaign",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_RULE = "letters, digits, '.', '_' and '-' only (it names the results dir)"


def is_valid_name(value: str) -> bool:
    """A campaign or run name: one path component inside the results directory, never '..'."""
    return _NAME.match(value) is not None


class CampaignError(UsageError):
    """A campaign file that cannot be run; ``field`` is the path inside the file."""


class _Strict(BaseModel):
    # strict: no silent coercion of a wrong type (`max_users: true` was 1 user, `seed: "7"` 7).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Auth(_Strict):
    """How the load generator authenticates (``--auth``); secrets travel by environment."""

    mode: Literal["none", "api-key", "jwt"] = "none"
    api_key: str | None = None
    client_id: str | None = None
    client_secret: str | None = None


class Workload(_Strict):
    """What each request asks for: the streaming user's options."""

    model: str | None = None
    max_tokens: int = Field(default=128, ge=1)
    ignore_eos: bool = False
    chunk_size: int | None = Field(default=None, ge=1)
    prompt_tokens: int = Field(default=128, ge=1)
    prompt_tokens_std: float = Field(default=0.0, ge=0)
    prompts_file: Path | None = Field(default=None, strict=False)  # YAML gives a str
    temperature: float | None = Field(default=None, ge=0)
    stream: bool = True
    include_usage: bool = True
    request_timeout_s: float = Field(default=600.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)
    auth: Auth = Auth()


class Step(_Strict):
    """A stage of the ``steps`` form: ``qps`` held for ``hold``, its first ``warmup`` unmeasured."""

    qps: float = Field(ge=0)
    hold: float | str
    warmup: float | str = 0


class StackSettings(_Strict):
    """The local stack's processes (ignored with ``--target``)."""

    workers: int = Field(default=2, ge=1, le=64)
    health_timeout_s: float = Field(default=60.0, gt=0)


class TargetSettings(_Strict):
    """The reference target started by the local stack."""

    workers: int = Field(default=1, ge=1, le=64)
    redis_url: str | None = None
    # configs/app.toml keys, nested as in the file; sent as APP_* variables (APP_LATENCY__ITL_MS).
    settings: dict[str, Any] = Field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        """The ``APP_*`` variables of these settings."""
        env: dict[str, str] = {}
        _flatten(self.settings, "APP_", env)
        if self.redis_url:
            env["APP_REDIS_URL"] = self.redis_url
        return env


class Campaign(_Strict):
    """A validated campaign; ``load_shape`` is the parsed ramp."""

    name: str = "campaign"
    description: str = ""
    shape: dict[str, Any] | str | None = None
    steps: list[Step] | None = None
    mode: Literal["open", "closed"] = "open"
    arrivals: str = "poisson"
    seed: int = 1
    overflow: Literal["drop", "queue"] = "drop"
    max_users: int = Field(default=1000, ge=1)
    headroom: float = Field(default=1.5, ge=1)
    drain_s: float = Field(default=30.0, ge=0)
    retry: dict[str, Any] | str | None = None
    slo: dict[str, float] | None = None
    gates: list[str] = Field(default_factory=list)
    workload: Workload = Workload()
    stack: StackSettings = StackSettings()
    target: TargetSettings = TargetSettings()

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_valid_name(value):
            raise ValueError(NAME_RULE)
        return value

    @property
    def load_shape(self) -> Shape:
        return _shape(self)

    def shape_text(self) -> str:
        """The shape in the compact syntax every Locust process parses (``--ramplab-shape``)."""
        stages = self.load_shape.stages
        return "custom:" + ",".join(f"{s.rate!r}@{s.duration_s!r}s/{s.warmup_s!r}s" for s in stages)

    def locust_args(self) -> list[str]:
        """The Locust options shared by the master and every worker (secrets excluded)."""
        w = self.workload
        args = [
            "--ramplab-shape", self.shape_text(),
            "--ramplab-mode", self.mode,
            "--ramplab-arrivals", self.arrivals,
            "--ramplab-seed", str(self.seed),
            "--ramplab-overflow", self.overflow,
            "--ramplab-max-users", str(self.max_users),
            "--ramplab-headroom", repr(self.headroom),
            "--ramplab-drain", repr(self.drain_s),
            "--max-tokens", str(w.max_tokens),
            "--prompt-tokens", str(w.prompt_tokens),
            "--prompt-tokens-std", repr(w.prompt_tokens_std),
            "--request-timeout", repr(w.request_timeout_s),
            "--read-timeout", repr(w.read_timeout_s),
            "--auth", w.auth.mode,
        ]  # fmt: skip
        if self.retry is not None:
            spec = self.retry if isinstance(self.retry, str) else json.dumps(self.retry)
            args += ["--ramplab-retry", spec]
        if self.slo:
            args += ["--ramplab-slo", ",".join(f"{k}<={v:g}" for k, v in self.slo.items())]
        if w.model:
            args += ["--model", w.model]
        if w.ignore_eos:
            args.append("--ignore-eos")
        if w.chunk_size is not None:
            args += ["--chunk-size", str(w.chunk_size)]
        if w.prompts_file is not None:
            args += ["--prompts-file", str(w.prompts_file)]
        if w.temperature is not None:
            args += ["--temperature", repr(w.temperature)]
        if not w.stream:
            args.append("--no-stream")
        if not w.include_usage:
            args.append("--no-usage")
        if w.auth.client_id:
            args += ["--client-id", w.auth.client_id]
        return args

    def locust_env(self) -> dict[str, str]:
        """Secrets as the ``RAMPLAB_*`` variables Locust reads, so they never show in ``ps``."""
        env: dict[str, str] = {}
        if self.workload.auth.api_key:
            env["RAMPLAB_API_KEY"] = self.workload.auth.api_key
        if self.workload.auth.client_secret:
            env["RAMPLAB_CLIENT_SECRET"] = self.workload.auth.client_secret
        return env


def _flatten(value: Mapping[str, Any], prefix: str, out: dict[str, str]) -> None:
    for key, item in value.items():
        name = f"{prefix}{str(key).upper()}"
        if isinstance(item, Mapping):
            _flatten(item, name + "__", out)
        elif isinstance(item, str):
            out[name] = item
        else:
            # pydantic-settings parses complex values (lists, booleans) from JSON.
            out[name] = json.dumps(item)


def _shape(campaign: Campaign) -> Shape:
    try:
        if campaign.steps is None:
            assert campaign.shape is not None
            return shape_from_dict(campaign.shape, "shape")
        stages = [
            {
                "rate": step.qps,
                "hold": parse_duration(step.hold, f"steps[{i}].hold"),
                "warmup": parse_duration(step.warmup, f"steps[{i}].warmup"),
            }
            for i, step in enumerate(campaign.steps)
        ]
        return shape_from_dict({"kind": "custom", "stages": stages}, "steps")
    except UsageError as exc:
        # The custom form says stages[i] where the file says steps[i]; a shape string's
        # errors may lack the "shape" prefix.
        field = re.sub(r"^(steps\.)?stages", "steps", exc.field)
        if campaign.steps is None and not field.startswith("shape"):
            field = f"shape.{field}"
        raise CampaignError(field, _reason(exc)) from None


def _reason(exc: UsageError) -> str:
    return str(exc).removeprefix(f"{exc.field}: ")


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def parse_campaign(data: object, source: str = "campaign") -> Campaign:
    """A ``Campaign`` from parsed YAML; raises ``CampaignError`` naming the first bad field."""
    if not isinstance(data, Mapping):
        raise CampaignError("", f"{source}: expected a mapping at the top level, got {data!r}")
    try:
        campaign = Campaign.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise CampaignError(_location(first["loc"]), first["msg"]) from None
    if (campaign.shape is None) == (campaign.steps is None):
        raise CampaignError("shape", "give exactly one of 'shape' or 'steps'")
    campaign.load_shape  # noqa: B018 - validates the shape now, naming the field
    try:
        make_process(campaign.arrivals, field="arrivals")
        if campaign.retry is not None:
            parse_retry(campaign.retry, field="retry")
        parse_request_slo(campaign.slo, field="slo")
        parse_gates(campaign.gates, field="gates")
    except UsageError as exc:
        raise CampaignError(exc.field, _reason(exc)) from None
    return campaign


def load_campaign(path: Path) -> Campaign:
    """Read and validate a campaign file; every failure is a ``CampaignError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CampaignError("", f"cannot read campaign {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CampaignError("", f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise CampaignError("", f"{path}: not valid YAML{where}") from None
    campaign = parse_campaign(data, str(path))
    prompts = campaign.workload.prompts_file
    if prompts is not None and not prompts.is_absolute():
        # Relative to the campaign file, like any include, not to wherever the CLI runs.
        workload = campaign.workload.model_copy(
            update={"prompts_file": Path(path).parent / prompts}
        )
        campaign = campaign.model_copy(update={"workload": workload})
    return campaign
