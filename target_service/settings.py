"""The target's one settings object.

Sources, lowest to highest precedence: the defaults below, the TOML file (``configs/app.toml``, or
the file named by ``APP_CONFIG_FILE``), then ``APP_*`` environment variables, where nested keys use
``__`` (``APP_SCHEDULER__MAX_NUM_SEQS=8``). This mirrors the study's §5 example (Viper: file ``app``
in ``./configs``, prefix ``APP_``). The defaults here equal ``configs/app.toml``; a test keeps
them so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from target_service.errors import SettingsError
from target_service.tokenizer import check_spec

DEFAULT_CONFIG_FILE = Path("configs/app.toml")


class Section(BaseModel):
    model_config = {"extra": "forbid", "validate_assignment": True}


class LatencySettings(Section):
    """Parameters of the inference model (see ``inference.py`` for the formulas)."""

    prefill_overhead_ms: float = Field(20.0, ge=0)
    prefill_per_token_ms: float = Field(0.05, ge=0)
    # Attention's quadratic term: every prompt token attends to all before it (``P² ×`` this).
    prefill_per_token_sq_ms: float = Field(0.0, ge=0)
    # What a prompt token found in the prefix cache costs instead (0: free, like a KV-cache hit).
    prefill_cached_per_token_ms: float = Field(0.0, ge=0)
    itl_ms: float = Field(20.0, ge=0)
    itl_jitter_ms: float = Field(0.0, ge=0)
    # Decode slows by this fraction per extra running sequence: itl × (1 + k × (running − 1)).
    slowdown_per_seq: float = Field(0.005, ge=0)


class PrefixCacheSettings(Section):
    """The prefix-cache model (``prefix_cache.py``): per process, off by default."""

    enabled: bool = False
    # Tokens per hashed block; only whole blocks are cached (vLLM's default block is 16 tokens).
    block_tokens: int = Field(16, ge=1, le=4096)
    # The LRU's bound, in tokens of this process's cache (rounded down to whole blocks).
    max_cached_tokens: int = Field(1_048_576, ge=0)


class ReasoningSettings(Section):
    """``reasoning_content`` deltas before the answer (``reasoning.py``); off while
    ``tokens_mean`` is 0."""

    tokens_mean: float = Field(0.0, ge=0)
    tokens_std: float = Field(0.0, ge=0)
    # Gap between two reasoning tokens (times the decode slowdown, as for the answer's tokens).
    itl_ms: float = Field(10.0, ge=0)


class OutputSettings(Section):
    """Output length when the request does not fix it with ``ignore_eos``."""

    default_max_tokens: int = Field(256, ge=1)
    max_model_len: int = Field(131072, ge=16)
    length_mean: float = Field(128.0, gt=0)
    length_std: float = Field(48.0, ge=0)


class SchedulerSettings(Section):
    kind: Literal["continuous", "static"] = "continuous"
    max_num_seqs: int = Field(64, ge=1)
    max_waiting: int = Field(256, ge=0)
    queue_timeout_s: float = Field(30.0, gt=0)
    # Static batching: how long a new batch stays open for joiners after it forms.
    batch_window_ms: float = Field(5.0, ge=0)
    retry_after_s: float = Field(1.0, gt=0)


class StreamSettings(Section):
    chunk_size: int = Field(1, ge=1, le=4096)
    # A pause after every event that delays all later ones, like the study's 1 ms sleep (§4.3).
    event_sleep_ms: float = Field(0.0, ge=0)
    send_timeout_s: float = Field(10.0, gt=0)
    ping_s: float = Field(15.0, ge=0)


class ClientCredential(Section):
    client_id: str = Field(min_length=1)
    client_secret: SecretStr


class AuthSettings(Section):
    """``off``: anyone may call; ``jwt``: an RS256 bearer token from ``/v1/auth/token``;
    ``api_key``: a static bearer key from ``api_keys``. The token endpoint and JWKS always work."""

    mode: Literal["off", "jwt", "api_key"] = "off"
    issuer: str = "ramplab-target"
    audience: str = "ramplab"
    token_ttl_s: int = Field(300, ge=1)
    jwt_rotation_seconds: int = Field(300, ge=1)
    leeway_s: float = Field(5.0, ge=0, le=60)
    clients: list[ClientCredential] = Field(
        default_factory=lambda: [
            ClientCredential(client_id="ramplab", client_secret=SecretStr("ramplab-demo-secret"))
        ]
    )
    api_keys: list[SecretStr] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ttl_within_overlap(self) -> AuthSettings:
        # The previous key keeps verifying for one period after it stops signing: a token must
        # not outlive that overlap, or a valid token would meet a retired key.
        if self.token_ttl_s > self.jwt_rotation_seconds:
            raise ValueError(
                f"token_ttl_s={self.token_ttl_s} must not exceed "
                f"jwt_rotation_seconds={self.jwt_rotation_seconds}"
            )
        return self


class RedisPoolSettings(Section):
    """Pool sizing; ``redis_pool.py`` explains the maxIdle/maxActive mapping."""

    max_connections: int = Field(32, ge=1, le=10000)
    prewarm: int = Field(16, ge=0)
    wait_timeout_s: float = Field(0.25, gt=0)
    # The capacity rule of the study's checklist: pool × processes ≤ ratio × Redis maxclients.
    capacity_ratio: float = Field(0.7, gt=0, le=1)
    capacity_check: Literal["warn", "refuse", "off"] = "warn"
    # Retry-After sent with the 503 that answers a request when Redis is down or slow.
    retry_after_s: float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _prewarm_fits(self) -> RedisPoolSettings:
        if self.prewarm > self.max_connections:
            raise ValueError(
                f"prewarm={self.prewarm} exceeds max_connections={self.max_connections}"
            )
        return self


class RateLimitSettings(Section):
    """GCRA limits in requests per ``period_s``; 0 switches a limit off."""

    client_limit: int = Field(0, ge=0)
    global_limit: int = Field(0, ge=0)
    period_s: float = Field(60.0, gt=0)


class SigningSettings(Section):
    mode: Literal["locked", "parallel", "ed25519", "off"] = "locked"
    # Threads that compute signatures; in ``locked`` mode they queue on the one lock.
    threads: int = Field(32, ge=1, le=1024)
    # Signatures computed per response: > 1 makes the critical section heavier on purpose.
    work_factor: int = Field(1, ge=1, le=1000)


class Outage(Section):
    start_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)


class FaultSettings(Section):
    """Injected failures; see ``faults.py``. Times are relative to the fault clock's origin."""

    seed: int = 0
    ratio_429: float = Field(0.0, ge=0, le=1)
    ratio_503: float = Field(0.0, ge=0, le=1)
    retry_after_s: float = Field(1.0, gt=0)
    outages: list[Outage] = Field(default_factory=list)
    midstream_ratio: float = Field(0.0, ge=0, le=1)
    midstream_mode: Literal["error_event", "drop"] = "error_event"
    midstream_after_tokens: int = Field(1, ge=0)
    # Shed with 503 when this many requests already wait for a slot (0: never).
    shed_waiting_above: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _ratios_sum(self) -> FaultSettings:
        if self.ratio_429 + self.ratio_503 > 1:
            raise ValueError(f"ratio_429 + ratio_503 = {self.ratio_429 + self.ratio_503} exceeds 1")
        return self


class TracingSettings(Section):
    """OpenTelemetry traces (``tracing.py``): on only when ``otlp_endpoint`` is set."""

    # The OTLP/HTTP collector's base URL (Jaeger: http://jaeger:4318); spans go to /v1/traces.
    otlp_endpoint: str | None = None
    service_name: str = Field("ramplab-target", min_length=1)
    sample_ratio: float = Field(1.0, ge=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_off(cls, data: Any) -> Any:
        # Compose passes an unset variable as "": that means no tracing, not a bad URL.
        if isinstance(data, dict) and data.get("otlp_endpoint") == "":
            data = {**data, "otlp_endpoint": None}
        return data

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint_is_http(cls, value: str | None) -> str | None:
        # A field validator, so the error names tracing.otlp_endpoint and its variable.
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value


class TlsSettings(Section):
    """HTTPS (``tls.py``): a given certificate and key, or a throw-away CA and certificate made at
    start for ``hostnames``, whose CA certificate is written to ``ca_file`` for clients to trust."""

    enabled: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    ca_file: str | None = None  # generated mode: where the CA's certificate is written
    hostnames: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "target.ramplab.test"], min_length=1
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, data: Any) -> Any:
        # Compose passes an unset variable as "": no file, not a file named "".
        if isinstance(data, dict):
            data = {k: (None if k.endswith("_file") and v == "" else v) for k, v in data.items()}
        return data

    @field_validator("cert_file", "key_file")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        # A field validator, so the error names tls.cert_file / tls.key_file and its variable.
        if value is not None and not Path(value).is_file():
            raise ValueError("no such file")
        return value

    @model_validator(mode="after")
    def _both_or_neither(self) -> TlsSettings:
        if (self.cert_file is None) != (self.key_file is None):
            given, missing = (
                ("cert_file", "key_file") if self.key_file is None else ("key_file", "cert_file")
            )
            raise ValueError(f"tls.{given} is set but tls.{missing} is not: give both, or "
                             "neither to generate a certificate at start")  # fmt: skip
        return self


class Settings(BaseSettings):
    """Everything a target process needs, validated at start-up."""

    model_config = SettingsConfigDict(
        env_prefix="APP_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(1, ge=1, le=64)
    # "1.1": uvicorn (httptools); "2": hypercorn, h2 by ALPN over TLS or prior knowledge on
    # cleartext, HTTP/1.1 too (``http2.py``: why the flow-control window is the client's to set).
    http: Literal["1.1", "2"] = "1.1"
    h2_max_frame_bytes: int = Field(16_384, ge=16_384, le=16_777_215)  # RFC 9113 §6.5.2 bounds
    h2_max_streams: int = Field(100, ge=1)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    models: list[str] = Field(default_factory=lambda: ["ramplab-sim-1"], min_length=1)
    seed: int = 0
    max_body_bytes: int = Field(1_048_576, ge=1024)
    redis_url: str | None = None
    redis_timeout_s: float = Field(0.5, gt=0)
    admin_token: SecretStr | None = None
    # Namespace of every Redis key this target writes, so targets (and tests) can share a Redis.
    redis_prefix: str = Field("ramplab:", min_length=1)
    admin_poll_s: float = Field(0.5, gt=0)
    # A multi-turn session's affinity header: echoed on the response, so a client (or a proxy
    # routing on it) can check it reached the target; "" ignores it.
    session_header: str = Field("x-session-id", pattern=r"^[A-Za-z0-9-]*$")
    # How prompt tokens are counted (usage.prompt_tokens, the prefill cost): tokenizer.py.
    tokenizer: str = "approx"

    auth: AuthSettings = Field(default_factory=AuthSettings)
    redis_pool: RedisPoolSettings = Field(default_factory=RedisPoolSettings)
    ratelimit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    signing: SigningSettings = Field(default_factory=SigningSettings)
    faults: FaultSettings = Field(default_factory=FaultSettings)

    latency: LatencySettings = Field(default_factory=LatencySettings)
    prefix_cache: PrefixCacheSettings = Field(default_factory=PrefixCacheSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)
    reasoning: ReasoningSettings = Field(default_factory=ReasoningSettings)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    stream: StreamSettings = Field(default_factory=StreamSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    tls: TlsSettings = Field(default_factory=TlsSettings)

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer(cls, value: str) -> str:
        return check_spec(value)

    @model_validator(mode="after")
    def _one_process_for_h2(self) -> Settings:
        if self.http == "2" and self.workers > 1:
            raise ValueError(f"workers={self.workers} with http=\"2\": the HTTP/2 server "
                             "(hypercorn) runs one process here; use workers=1")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _check_redis_url(self) -> Settings:
        if self.redis_url is not None and not self.redis_url.startswith(
            ("redis://", "rediss://", "unix://")
        ):
            raise ValueError(f"redis_url={self.redis_url!r} must start with redis://, rediss://")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = config_file_path()
        if config_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)

    def masked(self) -> dict[str, Any]:
        """The settings as printed at start: secrets masked, credentials cut from URLs."""
        data = self.model_dump(mode="json")
        if self.admin_token is not None:
            data["admin_token"] = "********"  # noqa: S105 - the mask, not a secret
        if self.redis_url and "@" in self.redis_url:
            scheme, _, rest = self.redis_url.partition("://")
            data["redis_url"] = f"{scheme}://********@{rest.rpartition('@')[2]}"
        return data


def config_file_path() -> Path | None:
    # The one place that reads the file location from the environment: it must be known
    # before the settings themselves can be built.
    named = os.environ.get("APP_CONFIG_FILE")
    if named:
        path = Path(named)
        if not path.is_file():
            raise SettingsError(f"APP_CONFIG_FILE={named!r}: no such file")
        return path
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Build and validate the settings, turning pydantic's report into one readable message."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            parts = [str(part) for part in error["loc"]]
            key = ".".join(parts) or "settings"
            env = "APP_" + "__".join(parts).upper()
            value = error.get("input")
            problems.append(f"{key}={value!r} (env {env}): {error['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None
