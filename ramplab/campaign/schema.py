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

Every field is checked by pydantic (its type; unknown keys are refused) and by the check of the
Locust option it sets (``ramplab.options.schema``, which also gives its default and its flag),
so a campaign that validates here starts cleanly there. Every problem is a ``CampaignError``
naming the field the way the file spells it (``steps[2].qps``, ``workload.max_tokens``) — the
CLI exits 2 with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ramplab.campaign.search import SearchSpec
from ramplab.errors import CampaignError, UsageError
from ramplab.load.arrivals.trace import trace_shape
from ramplab.load.plan import Mode
from ramplab.load.shapes import Shape, parse_duration, shape_from_dict
from ramplab.load.trace import parse_trace_spec, trace_spec
from ramplab.options import schema
from ramplab.results.slo import parse_gates
from ramplab.workload.prompts import normalise_rules

__all__ = [
    "EXPERIMENT_KEYS",
    "NAME_RULE",
    "Campaign",
    "CampaignError",
    "is_valid_name",
    "load_campaign",
    "parse_campaign",
    "read_campaign_data",
    "resolve_files",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_RULE = "letters, digits, '.', '_' and '-' only (it names the results dir)"
# Top-level keys of an experiment (``ramplab.campaign.variants``): a campaign with any of them is
# expanded into variants, each of which is a plain campaign without them.
EXPERIMENT_KEYS = ("matrix", "variants", "repeat", "order", "baseline", "fail_if", "study")


def is_valid_name(value: str) -> bool:
    """A campaign or run name: one path component inside the results directory, never '..'."""
    return _NAME.match(value) is not None


class _Strict(BaseModel):
    # strict: no silent coercion of a wrong type (`max_users: true` was 1 user, `seed: "7"` 7).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _default(path: str) -> Any:
    """A campaign field's default: the default of the Locust option it sets."""
    return Field(default_factory=lambda: schema.campaign_default(path))


class Auth(_Strict):
    """How the load generator authenticates (``--auth``); secrets travel by environment."""

    mode: str = _default("workload.auth.mode")
    api_key: str | None = _default("workload.auth.api_key")
    client_id: str | None = _default("workload.auth.client_id")
    client_secret: str | None = _default("workload.auth.client_secret")
    token_path: str = _default("workload.auth.token_path")


class Sessions(_Strict):
    """Multi-turn sessions (``--session-*``): each arrival is a conversation of ``turns``."""

    turns: int = _default("workload.sessions.turns")
    think_time: str | float = _default("workload.sessions.think_time")
    affinity_header: str | None = _default("workload.sessions.affinity_header")


class Workload(_Strict):
    """What each request asks for and how the client sends it: the streaming user's options."""

    model: str | None = _default("workload.model")
    normalise: str | None = _default("workload.normalise")
    tokenizer: str = _default("workload.tokenizer")
    max_tokens: int = _default("workload.max_tokens")
    ignore_eos: bool = _default("workload.ignore_eos")
    chunk_size: int | None = _default("workload.chunk_size")
    needle: dict[str, Any] = _default("workload.needle")  # ramplab/workload/needle.py
    prompt_tokens: int = _default("workload.prompt_tokens")
    prompt_tokens_std: float = _default("workload.prompt_tokens_std")
    prompts_file: Path | None = Field(  # YAML gives a str
        default_factory=lambda: schema.campaign_default("workload.prompts_file"), strict=False
    )
    temperature: float | None = _default("workload.temperature")
    extra_body: dict[str, Any] = _default("workload.extra_body")
    extra_headers: dict[str, str] = _default("workload.extra_headers")
    stream: bool = _default("workload.stream")
    include_usage: bool = _default("workload.include_usage")
    api: str = _default("workload.api")
    api_path: str | None = _default("workload.api_path")
    request_timeout_s: float = _default("workload.request_timeout_s")
    connect_timeout_s: float = _default("workload.connect_timeout_s")
    read_timeout_s: float = _default("workload.read_timeout_s")
    auth: Auth = Auth()
    sessions: Sessions = Sessions()
    verify_tls: bool = _default("workload.verify_tls")
    ca_file: Path | None = Field(
        default_factory=lambda: schema.campaign_default("workload.ca_file"), strict=False
    )
    dns_cache: bool = _default("workload.dns_cache")
    resolver: str | None = _default("workload.resolver")
    reuse_connections: bool = _default("workload.reuse_connections")
    http2: bool = _default("workload.http2")
    h2_window: int | None = _default("workload.h2_window")
    verify_signature: bool = _default("workload.verify_signature")
    verify_text: bool = _default("workload.verify_text")
    jwks_path: str = _default("workload.jwks_path")
    # Datasets, output lengths and shared prefixes (docs/workloads.md).
    dataset: Path | None = Field(
        default_factory=lambda: schema.campaign_default("workload.dataset"), strict=False
    )
    dataset_format: str = _default("workload.dataset_format")
    dataset_tokenizer: str = _default("workload.dataset_tokenizer")
    dataset_seed: int = _default("workload.dataset_seed")
    dataset_sample: int | None = _default("workload.dataset_sample")
    dataset_prompt_tokens: str = _default("workload.dataset_prompt_tokens")
    dataset_output_tokens: str = _default("workload.dataset_output_tokens")
    output_lengths: str = _default("workload.output_lengths")
    shared_prefix: dict[str, int] = _default("workload.shared_prefix")
    prefix_salt: str | None = _default("workload.prefix_salt")

    @field_validator("normalise")
    @classmethod
    def _normalise(cls, value: str | None) -> str | None:
        try:
            normalise_rules(value)
        except UsageError as exc:
            raise ValueError(_reason(exc)) from None
        return value


class TraceReplay(_Strict):
    """A trace replayed as the schedule (``--ramplab-trace*``); with a file, no shape is given."""

    file: Path | None = Field(  # YAML gives a str
        default_factory=lambda: schema.campaign_default("trace.file"), strict=False
    )
    speed: float = _default("trace.speed")
    loop: int = _default("trace.loop")
    limit: int = _default("trace.limit")

    def spec(self) -> str | None:
        """The arrivals spec every Locust process builds from the flags; None without a file."""
        if self.file is None:
            return None
        return trace_spec(self.file, self.speed, self.loop, self.limit)


class Step(_Strict):
    """A stage of the ``steps`` form: ``qps`` held for ``hold``, its first ``warmup`` unmeasured."""

    qps: float = Field(ge=0)
    hold: float | str
    warmup: float | str = 0


class DnsStack(_Strict):
    """A slow DNS server on loopback (``ramplab/stack/dns.py``): the target is reached by
    ``name``, which the load generator resolves through it (``--resolver``)."""

    delay_ms: float = Field(default=20.0, ge=0, le=10_000)
    name: str = Field(default="target.ramplab.test", pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]*$")


class StackSettings(_Strict):
    """The local stack's processes (ignored with ``--target``)."""

    workers: int = Field(default=2, ge=1, le=64)
    health_timeout_s: float = Field(default=60.0, gt=0)
    dns: DnsStack | None = None


class Preflight(_Strict):
    """Checks of a ``--target`` server before the ramp (``ramplab.stack.probe``)."""

    models: bool = True  # GET /v1/models lists workload.model (skipped on a 404)
    request: bool = True  # one real streaming request succeeds


class TargetSettings(_Strict):
    """The reference target started by the local stack."""

    workers: int = Field(default=1, ge=1, le=64)
    redis_url: str | None = None
    # configs/app.toml keys, nested as in the file; sent as APP_* variables (APP_LATENCY__ITL_MS).
    settings: dict[str, Any] = Field(default_factory=dict)

    @property
    def generates_tls(self) -> bool:
        """The target serves HTTPS with a certificate it makes at start (no cert/key given)."""
        tls = self.settings.get("tls")
        return (
            isinstance(tls, Mapping)
            and tls.get("enabled") is True
            and tls.get("cert_file") is None
            and tls.get("key_file") is None
        )

    @property
    def serves_tls(self) -> bool:
        tls = self.settings.get("tls")
        return isinstance(tls, Mapping) and tls.get("enabled") is True

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
    mode: Mode = _default("mode")
    arrivals: str = _default("arrivals")
    seed: int = _default("seed")
    overflow: str = _default("overflow")
    max_users: int = _default("max_users")
    headroom: float = _default("headroom")
    drain_s: float = _default("drain_s")
    # The server's own Prometheus figures (ramplab/results/engine.py): auto, off or a URL.
    engine_metrics: str = _default("engine_metrics")
    retry: dict[str, Any] | str | None = _default("retry")
    slo: dict[str, float] | None = _default("slo")
    # START+DURATION in run time: an outage window the master sets on the reference target.
    outage: str | None = _default("outage")
    gates: list[str] = Field(default_factory=list)
    workload: Workload = Workload()
    stack: StackSettings = StackSettings()
    target: TargetSettings = TargetSettings()
    trace: TraceReplay = TraceReplay()
    # The max-rate search (``ramplab search``); with it, shape and steps may be left out.
    search: SearchSpec | None = None
    preflight: Preflight = Preflight()
    # A run whose error ratio passes this (or whose every request failed) exits 3.
    max_error_ratio: float = Field(default=0.5, ge=0, le=1)

    @field_validator("engine_metrics", mode="before")
    @classmethod
    def _engine_metrics(cls, value: Any) -> Any:
        # YAML reads a bare off/on as a boolean: `engine_metrics: off` means what it says.
        if value is False:
            return "off"
        if value is True:
            return "auto"
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_valid_name(value):
            raise ValueError(NAME_RULE)
        return value

    @property
    def load_shape(self) -> Shape:
        return _shape(self)

    @property
    def arrival_spec(self) -> str:
        """What the Locust processes schedule by: the trace replay's spec, else ``arrivals``."""
        return self.trace.spec() or self.arrivals

    def shape_text(self) -> str:
        """The shape in the compact syntax every Locust process parses (``--ramplab-shape``)."""
        stages = self.load_shape.stages
        return "custom:" + ",".join(f"{s.rate!r}@{s.duration_s!r}s/{s.warmup_s!r}s" for s in stages)

    def value_at(self, path: str) -> Any:
        """The value of the field at the dotted ``path`` (``workload.auth.mode``)."""
        if path == "shape":  # the shape or steps form, as the one text every process parses
            return self.shape_text()
        value: Any = self
        for name in path.split("."):
            value = getattr(value, name)
        return value

    def locust_args(self) -> list[str]:
        """The Locust options shared by the master and every worker (secrets excluded)."""
        return schema.campaign_arguments(self.value_at)[0]

    def locust_env(self) -> dict[str, str]:
        """Secrets as the ``RAMPLAB_*`` variables Locust reads, so they never show in ``ps``."""
        return schema.campaign_arguments(self.value_at)[1]


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
    replay = campaign.trace.spec()
    if replay is not None and campaign.shape is None and campaign.steps is None:
        try:
            return trace_shape(parse_trace_spec(replay, "trace.file"))
        except UsageError as exc:
            raise CampaignError("trace.file", _reason(exc)) from None
    try:
        if campaign.steps is None:
            if campaign.shape is None:
                raise CampaignError(
                    "shape", "none given: this campaign only searches (ramplab search CAMPAIGN)"
                )
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
    for key in EXPERIMENT_KEYS:
        if key in data:
            raise CampaignError(
                key,
                "a campaign with variants is an experiment: `ramplab run` expands it "
                "(docs/cli.md, Experiments)",
            )
    try:
        campaign = Campaign.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise CampaignError(_location(first["loc"]), first["msg"]) from None
    if campaign.shape is not None and campaign.steps is not None:
        raise CampaignError("shape", "give exactly one of 'shape' or 'steps'")
    replaying = campaign.trace.file is not None
    if replaying and (campaign.shape is not None or campaign.steps is not None):
        raise CampaignError("trace.file", "a trace replay takes its shape from the trace: "
                            "leave out 'shape' and 'steps'")  # fmt: skip
    if replaying and campaign.mode == "closed":
        raise CampaignError("mode", "a trace replay is an open-loop schedule: use open")
    if campaign.workload.sessions.turns > 1 and (replaying or campaign.mode == "closed"):
        why = "a trace replay sends single requests" if replaying else "sessions arrive open-loop"
        raise CampaignError("workload.sessions.turns", why)
    if campaign.search is not None:
        try:
            campaign.search.check("search")
        except UsageError as exc:
            raise CampaignError(exc.field, _reason(exc)) from None
    if campaign.shape is None and campaign.steps is None and not replaying:
        if campaign.search is None:
            raise CampaignError("shape", "give exactly one of 'shape' or 'steps'")
        # A search campaign: each probe gets its own shape; validate the options on one.
        shape = campaign.search.shape_text(campaign.search.start_qps)
        campaign = campaign.model_copy(update={"shape": shape})
        searching_only = True
    else:
        searching_only = False
    if not replaying:  # a trace's path is resolved (load_campaign) before it is read
        campaign.load_shape  # noqa: B018 - validates the shape now, naming the field
    try:
        for opt in schema.campaign_options():
            if opt.campaign == "shape":
                continue  # validated above (a trace's, once its path is resolved)
            # The option's own check, on the field's path: what validates here starts there.
            given = campaign.value_at(opt.campaign or "")
            if given is not None:
                opt.kind.check(given, opt.campaign or "")
        parse_gates(campaign.gates, field="gates")
    except UsageError as exc:
        raise CampaignError(exc.field, _reason(exc)) from None
    if searching_only:
        campaign = campaign.model_copy(update={"shape": None})
    return campaign


def read_campaign_data(path: Path) -> object:
    """The parsed YAML of a campaign file; unreadable or invalid YAML is a ``CampaignError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CampaignError("", f"cannot read campaign {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CampaignError("", f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise CampaignError("", f"{path}: not valid YAML{where}") from None


def resolve_files(campaign: Campaign, base_dir: Path) -> Campaign:
    """The campaign with its relative file paths resolved from ``base_dir`` (the campaign
    file's folder, like any include, not wherever the CLI runs)."""
    files = {
        name: base_dir / given
        for name in ("prompts_file", "ca_file", "dataset")
        if (given := getattr(campaign.workload, name)) is not None and not given.is_absolute()
    }
    trace = campaign.trace.file
    if trace is not None and not trace.is_absolute():
        replay = campaign.trace.model_copy(update={"file": base_dir / trace})
        campaign = campaign.model_copy(update={"trace": replay})
    if not files:
        return campaign
    workload = campaign.workload.model_copy(update=files)
    return campaign.model_copy(update={"workload": workload})


def load_campaign(path: Path) -> Campaign:
    """Read and validate a campaign file; every failure is a ``CampaignError``."""
    campaign = resolve_files(parse_campaign(read_campaign_data(path), str(path)), Path(path).parent)
    if campaign.trace.file is not None:
        campaign.load_shape  # noqa: B018 - a trace is read now that its path is resolved
    return campaign
