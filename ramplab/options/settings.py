"""The streaming user's settings: one object per process, built from Locust's parsed options.

The options are Locust custom arguments (``options.register``), so Locust's own machinery also
reads them from a config file (``--config``, ``locust.conf``: ``max-tokens = 64``) and from
``RAMPLAB_*`` environment variables. Values are checked where they are parsed, so a bad value stops
Locust with exit code 2 and a message naming the option.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ramplab.errors import UsageError

AuthMode = Literal["none", "api-key", "jwt"]


class OptionError(UsageError):
    """A user's option value is unusable; the message names the option."""

    def __init__(self, message: str) -> None:
        super().__init__("", message)


@dataclass(frozen=True, slots=True)
class UserSettings:
    model: str | None = None  # None: the first model of GET /v1/models
    prompts_file: Path | None = None  # JSONL; None: synthetic prompts
    prompt_tokens: int = 128
    prompt_tokens_std: float = 0.0
    max_tokens: int = 128
    ignore_eos: bool = False
    chunk_size: int | None = None  # the target's extension; sent only when set
    temperature: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    extra_headers: dict[str, str] = field(default_factory=dict)
    stream: bool = True
    include_usage: bool = True
    path: str = "/v1/chat/completions"
    request_timeout_s: float = 600.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    auth: AuthMode = "none"
    api_key: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    token_path: str = "/v1/auth/token"  # noqa: S105 - a URL path, not a secret
    verify_tls: bool = True
    ca_file: str | None = None
    dns_cache: bool = True
    reuse_connections: bool = True
    results_dir: Path | None = None
    seed: int | None = None
    # Content integrity (integrity.py): off unless asked for, it relies on a target extension.
    verify_signature: bool = False
    verify_text: bool = False
    jwks_path: str = "/.well-known/jwks.json"

    def check(self) -> UserSettings:
        """Cross-option checks (single values are checked by their parsers)."""
        if self.auth == "api-key" and not self.api_key:
            raise OptionError("--auth api-key needs --api-key (or RAMPLAB_API_KEY)")
        if self.auth == "jwt" and not (self.client_id and self.client_secret):
            raise OptionError("--auth jwt needs --client-id and --client-secret")
        if self.prompts_file is not None and not self.prompts_file.is_file():
            raise OptionError(f"--prompts-file {str(self.prompts_file)!r}: no such file")
        if self.ca_file is not None and not Path(self.ca_file).is_file():
            raise OptionError(f"--ca-file {self.ca_file!r}: no such file")
        return self


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """The Prometheus exporter's options (``ramplab/plugin/exporter_hooks.py``); ports 0 = off."""

    port: int = 0  # a worker's /metrics
    host: str = "127.0.0.1"
    master_port: int = 0  # the master's run gauges
    linger_s: float = 0.0  # keep /metrics up after the run, for a last scrape
    run_id: str = "default"
    scenario: str | None = None  # None: the locustfile's name


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0-65535; 0 = off)")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{value} must be zero or more")
    return value


def _positive_float(text: str) -> float:
    value = _non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be more than zero")
    return value


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def _auth_mode(text: str) -> str:
    if text not in ("none", "api-key", "jwt"):
        raise argparse.ArgumentTypeError(f"{text!r} is not one of none, api-key, jwt")
    return text


# (flag, dest, parser or "flag", default, help); env var: RAMPLAB_ + dest upper-cased.
OPTIONS: tuple[tuple[str, str, Any, Any, str], ...] = (
    ("--model", "model", str, "", "model name (default: the first of GET /v1/models)"),
    (
        "--prompts-file",
        "prompts_file",
        str,
        "",
        'JSONL of prompts ({"prompt"} or {"messages"} per line)',
    ),
    (
        "--prompt-tokens",
        "prompt_tokens",
        _positive_int,
        128,
        "synthetic prompt length, mean tokens",
    ),
    (
        "--prompt-tokens-std",
        "prompt_tokens_std",
        _non_negative_float,
        0.0,
        "synthetic prompt length, std-dev",
    ),
    ("--max-tokens", "max_tokens", _positive_int, 128, "max_tokens of each request"),
    (
        "--ignore-eos",
        "ignore_eos",
        "flag",
        False,
        "send ignore_eos=true (generate exactly max_tokens)",
    ),
    (
        "--chunk-size",
        "chunk_size",
        _positive_int,
        None,
        "tokens per SSE event (target extension field)",
    ),
    ("--temperature", "temperature", _non_negative_float, None, "sampling temperature"),
    ("--extra-body", "extra_body", _json_object, None, "JSON object merged into each request body"),
    (
        "--extra-headers",
        "extra_headers",
        _json_object,
        None,
        "JSON object of extra request headers",
    ),
    ("--no-stream", "no_stream", "flag", False, "non-streaming requests"),
    ("--no-usage", "no_usage", "flag", False, "do not ask for stream_options.include_usage"),
    (
        "--api-path",
        "api_path",
        str,
        "/v1/chat/completions",
        "path of the chat completions endpoint",
    ),
    ("--request-timeout", "request_timeout", _positive_float, 600.0, "total seconds per attempt"),
    ("--connect-timeout", "connect_timeout", _positive_float, 10.0, "seconds to connect"),
    (
        "--read-timeout",
        "read_timeout",
        _positive_float,
        60.0,
        "longest silence between reads, seconds",
    ),
    ("--auth", "auth", _auth_mode, "none", "none | api-key | jwt"),
    ("--api-key", "api_key", str, "", "static API key (Authorization: Bearer)"),
    ("--client-id", "client_id", str, "", "JWT flow: client id"),
    ("--client-secret", "client_secret", str, "", "JWT flow: client secret"),
    ("--token-path", "token_path", str, "/v1/auth/token", "JWT flow: token endpoint path"),
    ("--insecure", "insecure", "flag", False, "do NOT verify TLS certificates"),
    ("--ca-file", "ca_file", str, "", "CA bundle to verify the target's certificate"),
    ("--no-dns-cache", "no_dns_cache", "flag", False, "resolve the host for every new connection"),
    ("--new-connection-per-request", "new_connection", "flag", False, "no keep-alive"),
    ("--results-dir", "results_dir", str, "", "write requests.jsonl and summary.json here"),
    ("--workload-seed", "workload_seed", int, None, "seed of the synthetic prompt generator"),
    # Content integrity: a reference-target extension, so off unless asked for.
    (
        "--verify-signature",
        "verify_signature",
        "flag",
        False,
        "verify each response's signature against the JWKS; a mismatch fails as 'integrity'",
    ),
    (
        "--verify-text",
        "verify_text",
        "flag",
        False,
        "check each response's text is the target's deterministic text for its seed",
    ),
    ("--jwks-path", "jwks_path", str, "/.well-known/jwks.json", "path of the JWKS to verify with"),
)

METRICS_OPTIONS: tuple[tuple[str, str, Any, Any, str], ...] = (
    ("--metrics-port", "metrics_port", _port, 0, "worker: serve /metrics on this port (0: off)"),
    ("--metrics-host", "metrics_host", str, "127.0.0.1", "address the /metrics servers bind"),
    (
        "--master-metrics-port",
        "master_metrics_port",
        _port,
        0,
        "master: serve the run gauges on this port (0: off)",
    ),
    (
        "--metrics-linger",
        "metrics_linger",
        _non_negative_float,
        0.0,
        "seconds /metrics stays up after the run ends (a last scrape sees every request)",
    ),
    ("--run-id", "run_id", str, "default", "the `run` label of every ramplab_ metric"),
    ("--scenario", "scenario", str, "", "the `scenario` label (default: the locustfile's name)"),
)


def register(parser: Any) -> None:
    """Add the options to Locust's (configargparse) parser."""
    for title, table in (("ramplab streaming user", OPTIONS), ("ramplab metrics", METRICS_OPTIONS)):
        group = parser.add_argument_group(title)
        for flag, dest, kind, default, help_text in table:
            env = "RAMPLAB_" + dest.upper()
            if kind == "flag":
                group.add_argument(
                    flag,
                    dest=dest,
                    action="store_true",
                    default=default,
                    env_var=env,
                    help=help_text,
                )
            else:
                group.add_argument(
                    flag, dest=dest, type=kind, default=default, env_var=env, help=help_text
                )


def metrics_from_options(options: Any) -> MetricsSettings:
    """The exporter's settings from Locust's ``parsed_options`` (values checked by the parser)."""
    run_id = str(getattr(options, "run_id", "") or "default").strip()
    if not run_id:
        raise OptionError("--run-id must not be empty")
    return MetricsSettings(
        port=int(getattr(options, "metrics_port", 0) or 0),
        host=str(getattr(options, "metrics_host", "") or "127.0.0.1"),
        master_port=int(getattr(options, "master_metrics_port", 0) or 0),
        linger_s=float(getattr(options, "metrics_linger", 0.0) or 0.0),
        run_id=run_id,
        scenario=str(getattr(options, "scenario", "") or "").strip() or None,
    )


def from_options(options: Any) -> UserSettings:
    """Build and check the settings from Locust's ``parsed_options``; raises ``OptionError``."""

    def get(name: str, default: Any = None) -> Any:
        value = getattr(options, name, default)
        return default if value in ("", None) else value

    prompts = get("prompts_file")
    results = get("results_dir")
    return UserSettings(
        model=get("model"),
        prompts_file=Path(prompts) if prompts else None,
        prompt_tokens=get("prompt_tokens", 128),
        prompt_tokens_std=get("prompt_tokens_std", 0.0),
        max_tokens=get("max_tokens", 128),
        ignore_eos=bool(get("ignore_eos", False)),
        chunk_size=get("chunk_size"),
        temperature=get("temperature"),
        extra_body=dict(get("extra_body", {})),
        extra_headers={str(k): str(v) for k, v in dict(get("extra_headers", {})).items()},
        stream=not get("no_stream", False),
        include_usage=not get("no_usage", False),
        path=get("api_path", "/v1/chat/completions"),
        request_timeout_s=get("request_timeout", 600.0),
        connect_timeout_s=get("connect_timeout", 10.0),
        read_timeout_s=get("read_timeout", 60.0),
        auth=get("auth", "none"),
        api_key=get("api_key"),
        client_id=get("client_id"),
        client_secret=get("client_secret"),
        token_path=get("token_path", "/v1/auth/token"),
        verify_tls=not get("insecure", False),
        ca_file=get("ca_file"),
        dns_cache=not get("no_dns_cache", False),
        reuse_connections=not get("new_connection", False),
        results_dir=Path(results) if results else None,
        seed=get("workload_seed"),
        verify_signature=bool(get("verify_signature", False)),
        verify_text=bool(get("verify_text", False)),
        jwks_path=get("jwks_path", "/.well-known/jwks.json"),
    ).check()
