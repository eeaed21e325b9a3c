"""The streaming user's and the exporter's settings: one object each per process.

Both are built from Locust's parsed options (``ramplab.options.schema``), so Locust's own
machinery also reads them from a config file (``--config``, ``locust.conf``: ``max-tokens = 64``)
and from ``RAMPLAB_*`` environment variables. Their defaults are the schema's; a bad value is a
``UsageError`` naming the option, which stops the process with exit code 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ramplab.errors import UsageError
from ramplab.measure.apis import PATHS, Api
from ramplab.options import schema

__all__ = [
    "AuthMode",
    "MetricsSettings",
    "UserSettings",
    "from_options",
    "metrics_from_options",
    "register",
]

AuthMode = Literal["none", "api-key", "jwt"]

# Kept for callers written before one error type: every bad option is a ``UsageError``.

_USER = schema.setting_defaults("stream")
_METRICS = schema.setting_defaults("metrics")


@dataclass(frozen=True, slots=True)
class UserSettings:
    """The streaming user's settings (``--help`` of each option: ``docs/cli.md``)."""

    model: str | None = _USER["model"]  # None: the first model of GET /v1/models
    prompts_file: Path | None = _USER["prompts_file"]  # JSONL; None: synthetic prompts
    needle: dict[str, Any] = field(default_factory=lambda: dict(_USER["needle"]))  # {}: off
    prompt_tokens: int = _USER["prompt_tokens"]
    prompt_tokens_std: float = _USER["prompt_tokens_std"]
    normalise: str | None = _USER["normalise"]  # rules applied to file prompts; None: as written
    tokenizer: str = _USER["tokenizer"]  # counts output tokens when the server reports none
    max_tokens: int = _USER["max_tokens"]
    ignore_eos: bool = _USER["ignore_eos"]
    chunk_size: int | None = _USER["chunk_size"]  # the target's extension; sent only when set
    temperature: float | None = _USER["temperature"]
    extra_body: dict[str, Any] = field(default_factory=lambda: dict(_USER["extra_body"]))
    extra_headers: dict[str, str] = field(default_factory=lambda: dict(_USER["extra_headers"]))
    stream: bool = _USER["stream"]
    include_usage: bool = _USER["include_usage"]
    api: Api = _USER["api"]
    api_path: str | None = _USER["api_path"]  # None: the API's own path (apis.PATHS)
    request_timeout_s: float = _USER["request_timeout_s"]
    connect_timeout_s: float = _USER["connect_timeout_s"]
    read_timeout_s: float = _USER["read_timeout_s"]
    auth: AuthMode = _USER["auth"]
    api_key: str | None = _USER["api_key"]
    client_id: str | None = _USER["client_id"]
    client_secret: str | None = _USER["client_secret"]
    token_path: str = _USER["token_path"]
    verify_tls: bool = _USER["verify_tls"]
    ca_file: str | None = _USER["ca_file"]
    dns_cache: bool = _USER["dns_cache"]
    resolver: str | None = _USER["resolver"]  # HOST:PORT; None: the system's resolver
    reuse_connections: bool = _USER["reuse_connections"]
    http2: bool = _USER["http2"]
    h2_window: int | None = _USER["h2_window"]  # bytes; None: httpcore's own window
    session_turns: int = _USER["session_turns"]  # 1: every arrival is a single request
    session_think_time: str = _USER["session_think_time"]  # ramplab.load.think's spec
    session_header: str | None = _USER["session_header"]
    results_dir: Path | None = _USER["results_dir"]
    seed: int | None = _USER["seed"]
    # Content integrity (integrity.py): off unless asked for, it relies on a target extension.
    verify_signature: bool = _USER["verify_signature"]
    verify_text: bool = _USER["verify_text"]
    jwks_path: str = _USER["jwks_path"]
    otlp_endpoint: str | None = _USER["otlp_endpoint"]  # None: no tracing code runs
    otlp_service_name: str = _USER["otlp_service_name"]
    trace_sample_ratio: float = _USER["trace_sample_ratio"]
    master_timeout_s: float = _USER["master_timeout_s"]  # a worker's wait for its master
    # Datasets, output lengths and shared prefixes (``ramplab/datasets``).
    dataset: Path | None = _USER["dataset"]
    dataset_format: str = _USER["dataset_format"]
    dataset_tokenizer: str = _USER["dataset_tokenizer"]
    dataset_seed: int = _USER["dataset_seed"]
    dataset_sample: int | None = _USER["dataset_sample"]
    dataset_prompt_tokens: str = _USER["dataset_prompt_tokens"]  # LOW..HIGH; "": any
    dataset_output_tokens: str = _USER["dataset_output_tokens"]
    output_lengths: str = _USER["output_lengths"]
    shared_prefix: dict[str, Any] = field(default_factory=lambda: dict(_USER["shared_prefix"]))
    prefix_salt: str | None = _USER["prefix_salt"]

    @property
    def path(self) -> str:
        """The path requests are sent to."""
        return self.api_path or PATHS[self.api]

    def check(self) -> UserSettings:
        """Cross-option checks (single values are checked by their kinds)."""
        if self.auth == "api-key" and not self.api_key:
            raise UsageError("--api-key", "--auth api-key needs it (or RAMPLAB_API_KEY)")
        if self.auth == "jwt" and not self.client_id:
            raise UsageError("--client-id", "--auth jwt needs --client-id and --client-secret")
        if self.auth == "jwt" and not self.client_secret:
            raise UsageError("--client-secret", "--auth jwt needs --client-id and --client-secret")
        if self.prompts_file is not None and not self.prompts_file.is_file():
            raise UsageError("--prompts-file", f"{str(self.prompts_file)!r}: no such file")
        if self.ca_file is not None and not Path(self.ca_file).is_file():
            raise UsageError("--ca-file", f"{self.ca_file!r}: no such file")
        if self.dataset is not None and not self.dataset.is_file():
            raise UsageError("--dataset", f"{str(self.dataset)!r}: no such file")
        if self.h2_window is not None and not self.http2:
            raise UsageError("--h2-window", "sets the HTTP/2 window: it needs --http2")
        return self


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """The Prometheus exporter's settings (``ramplab/plugin/exporters.py``); ports 0 = off."""

    port: int = _METRICS["port"]  # a worker's /metrics
    host: str = _METRICS["host"]
    master_port: int = _METRICS["master_port"]  # the master's run gauges
    linger_s: float = _METRICS["linger_s"]  # keep /metrics up after the run, for a last scrape
    run_id: str = _METRICS["run_id"]
    scenario: str | None = _METRICS["scenario"]  # None: the locustfile's name


def register(parser: Any) -> None:
    """The streaming user's and the exporter's options, on Locust's parser."""
    schema.register(parser, "stream")
    schema.register(parser, "metrics")


def from_options(parsed: Any) -> UserSettings:
    """Build and check the settings from Locust's ``parsed_options``; raises ``UsageError``."""
    return UserSettings(**schema.setting_values(parsed, "stream")).check()


def metrics_from_options(parsed: Any) -> MetricsSettings:
    """The exporter's settings from Locust's ``parsed_options``; raises ``UsageError``."""
    return MetricsSettings(**schema.setting_values(parsed, "metrics"))
