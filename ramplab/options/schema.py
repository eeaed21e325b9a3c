"""Every option of a Locust process running ramplab, each written once.

One ``Option`` holds what every consumer needs: the flag and the ``RAMPLAB_*`` variable Locust
reads, the kind of value (its check, ``ramplab.options.kinds``), the default, the help text, the
settings object and attribute it fills, whether it is a secret, and the campaign field that sets
it. From this table come Locust's parser registration (``register``), the settings objects
(``ramplab.options.settings``, ``ramplab.options.run``, their defaults included), a campaign's
Locust arguments and environment (``campaign_arguments``), the campaign models' defaults
(``campaign_default``) and the reference in ``docs/cli.md`` (``ramplab.options.reference``).

Secrets (credentials, and extra headers because they often carry one) never go on a command
line, where ``ps`` shows them: a campaign passes them as their ``RAMPLAB_*`` variable.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ramplab.errors import UsageError
from ramplab.measure.apis import APIS
from ramplab.options import kinds
from ramplab.options.kinds import Kind
from ramplab.workload.needle import needle_option

__all__ = [
    "GROUPS",
    "OPTIONS",
    "Group",
    "Option",
    "campaign_arguments",
    "campaign_default",
    "campaign_options",
    "option",
    "options_of",
    "register",
    "setting_defaults",
    "setting_values",
    "value",
]

Group = Literal["stream", "metrics", "ramp"]
# The parser sections, in the order ``--help`` lists them.
GROUPS: dict[Group, str] = {
    "stream": "ramplab streaming user",
    "metrics": "ramplab metrics",
    "ramp": "ramplab load shape, retries and SLOs",
}


def _same(value: Any) -> Any:
    # A copy, so a settings object never shares a mutable default (a dict) with the table.
    return copy.copy(value)


def _optional(value: Any) -> Any:
    """An empty text means 'not set', as an absent option does."""
    return value if value not in ("", None) else None


def _label(value: Any) -> str | None:
    return str(value or "").strip() or None


def _path(value: Any) -> Path | None:
    return Path(value) if value not in ("", None) else None


def _headers(value: dict[str, Any]) -> dict[str, str]:
    return {str(name): str(text) for name, text in value.items()}


@dataclass(frozen=True, slots=True)
class Option:
    """One option. ``dest`` and ``env`` follow from the flag unless given.

    ``default`` is the value of the settings attribute when the option is absent (a switch's
    default is the opposite of what its flag sets); ``to_setting`` turns a parsed value into the
    attribute's value (a ``Path``, ``None`` for an empty text).
    """

    flag: str
    kind: Kind
    default: Any
    help: str
    group: Group
    setting: str
    campaign: str | None = None  # dotted path in a campaign file; None: not a campaign field
    secret: bool = False
    dest: str = ""
    env: str = ""
    to_setting: Callable[[Any], Any] = _same

    def __post_init__(self) -> None:
        name = self.flag.removeprefix("--")
        if not self.dest:
            object.__setattr__(self, "dest", name.replace("-", "_"))
        if not self.env:
            env = "RAMPLAB_" + name.removeprefix("ramplab-").replace("-", "_").upper()
            object.__setattr__(self, "env", env)


def _stream(flag: str, kind: Kind, default: Any, help: str, **more: Any) -> Option:
    setting = more.pop("setting", flag.removeprefix("--").replace("-", "_"))
    return Option(flag, kind, default, help, "stream", setting, **more)


def _metrics(
    flag: str, kind: Kind, default: Any, help: str, setting: str, to_setting: Any = _same
) -> Option:
    return Option(flag, kind, default, help, "metrics", setting, to_setting=to_setting)


def _ramp(flag: str, kind: Kind, default: Any, help: str, setting: str, **more: Any) -> Option:
    return Option(flag, kind, default, help, "ramp", setting, **more)


_POSITIVE = kinds.integer(1)
_SECONDS = kinds.number(0.0, above=True)
_NON_NEGATIVE = kinds.number(0.0)

OPTIONS: tuple[Option, ...] = (
    # The streaming user (``UserSettings``).
    _stream("--model", kinds.TEXT, None, "model name (default: the first of GET /v1/models)",
            campaign="workload.model", to_setting=_optional),
    _stream("--prompts-file", kinds.TEXT, None,
            'JSONL of prompts ({"prompt"} or {"messages"} per line)',
            campaign="workload.prompts_file", to_setting=_path),
    _stream("--needle", kinds.Kind("needle JSON", needle_option, json.dumps), {},
            'long-context needle prompts (§3.2): JSON {"lengths": [tokens, ...], '
            '"depths": [0..1, ...], "shared_prefix": true, "seed": 0}',
            campaign="workload.needle"),
    _stream("--prompt-tokens", _POSITIVE, 128, "synthetic prompt length, mean tokens",
            campaign="workload.prompt_tokens"),
    _stream("--prompt-tokens-std", _NON_NEGATIVE, 0.0, "synthetic prompt length, std-dev",
            campaign="workload.prompt_tokens_std"),
    # §3.3 (docs/prompts.md): prompts sent normalised, and the tokenizer that counts tokens (and
    # sizes generated prompts in its own: docs/workloads.md).
    _stream("--normalise", kinds.TEXT, None,
            "normalise file prompts once at load: all, or rules (comma list; -RULE drops one)",
            campaign="workload.normalise", to_setting=_optional),
    _stream("--tokenizer", kinds.TEXT, "approx",
            "counts tokens the server does not report and sizes generated prompts: approx, "
            "cl100k_base, PATH/tokenizer.json or a model directory", campaign="workload.tokenizer"),
    _stream("--max-tokens", _POSITIVE, 128, "max_tokens of each request",
            campaign="workload.max_tokens"),
    _stream("--ignore-eos", kinds.SWITCH_ON, False,
            "send ignore_eos=true (generate exactly max_tokens)", campaign="workload.ignore_eos"),
    _stream("--chunk-size", _POSITIVE, None, "tokens per SSE event (target extension field)",
            campaign="workload.chunk_size"),
    _stream("--temperature", _NON_NEGATIVE, None, "sampling temperature",
            campaign="workload.temperature"),
    _stream("--extra-body", kinds.JSON_OBJECT, {}, "JSON object merged into each request body",
            campaign="workload.extra_body"),
    _stream("--extra-headers", kinds.JSON_OBJECT, {}, "JSON object of extra request headers",
            campaign="workload.extra_headers", secret=True, to_setting=_headers),
    _stream("--no-stream", kinds.SWITCH_OFF, True, "non-streaming requests",
            dest="stream", setting="stream", campaign="workload.stream"),
    _stream("--no-usage", kinds.SWITCH_OFF, True, "do not ask for stream_options.include_usage",
            dest="include_usage", setting="include_usage", campaign="workload.include_usage"),
    _stream("--api", kinds.choice(*APIS), "chat",
            "the API to drive: chat (/v1/chat/completions), completions (/v1/completions) or "
            "responses (/v1/responses, the Responses API)", campaign="workload.api"),
    _stream("--api-path", kinds.URL_PATH, None, "path of the endpoint (default: the --api's)",
            campaign="workload.api_path", to_setting=_optional),
    _stream("--request-timeout", _SECONDS, 600.0,
            "total seconds per attempt from its send: connect, head and body",
            setting="request_timeout_s", campaign="workload.request_timeout_s"),
    _stream("--connect-timeout", _SECONDS, 10.0, "seconds to connect",
            setting="connect_timeout_s", campaign="workload.connect_timeout_s"),
    _stream("--read-timeout", _SECONDS, 60.0, "longest silence between reads, seconds",
            setting="read_timeout_s", campaign="workload.read_timeout_s"),
    _stream("--auth", kinds.choice("none", "api-key", "jwt"), "none", "how requests authenticate",
            campaign="workload.auth.mode"),
    _stream("--api-key", kinds.TEXT, None, "static API key (Authorization: Bearer)",
            campaign="workload.auth.api_key", secret=True, to_setting=_optional),
    _stream("--client-id", kinds.TEXT, None, "JWT flow: client id",
            campaign="workload.auth.client_id", to_setting=_optional),
    _stream("--client-secret", kinds.TEXT, None, "JWT flow: client secret",
            campaign="workload.auth.client_secret", secret=True, to_setting=_optional),
    _stream("--token-path", kinds.URL_PATH, "/v1/auth/token", "JWT flow: token endpoint path",
            campaign="workload.auth.token_path"),
    _stream("--insecure", kinds.SWITCH_OFF, True, "do NOT verify TLS certificates",
            dest="verify_tls", setting="verify_tls", campaign="workload.verify_tls"),
    _stream("--ca-file", kinds.TEXT, None, "CA bundle to verify the target's certificate",
            campaign="workload.ca_file", to_setting=_optional),
    _stream("--no-dns-cache", kinds.SWITCH_OFF, True, "resolve the host for every new connection",
            dest="dns_cache", setting="dns_cache", campaign="workload.dns_cache"),
    _stream("--resolver", kinds.ADDRESS, None,
            "resolve host names with this DNS server (UDP) instead of the system's",
            campaign="workload.resolver", to_setting=_optional),
    _stream("--new-connection-per-request", kinds.SWITCH_OFF, True, "no keep-alive",
            dest="reuse_connections", env="RAMPLAB_NEW_CONNECTION", setting="reuse_connections",
            campaign="workload.reuse_connections"),
    _stream("--http2", kinds.SWITCH_ON, False,
            "speak HTTP/2 only (h2 by ALPN over TLS, prior knowledge on cleartext)",
            campaign="workload.http2"),
    _stream("--h2-window", kinds.integer(1), None,
            "HTTP/2 receive window in bytes (SETTINGS_INITIAL_WINDOW_SIZE; default: httpcore's "
            "16 MiB)", campaign="workload.h2_window"),
    # Multi-turn sessions (docs/workloads.md): each open-loop arrival starts one session.
    _stream("--session-turns", _POSITIVE, 1,
            "turns per session: each arrival is a conversation of this many turns (1: none)",
            campaign="workload.sessions.turns"),
    _stream("--session-think-time", kinds.SESSION_THINK_TIME, "0",
            "seconds between an answer and the session's next turn",
            campaign="workload.sessions.think_time"),
    _stream("--session-header", kinds.HEADER_NAME, "x-session-id",
            "session-affinity header carrying the session id ('': none)",
            campaign="workload.sessions.affinity_header", to_setting=_optional),
    # The run's results directory is the stack's to choose, not the campaign's.
    _stream("--results-dir", kinds.TEXT, None, "write the records and summary.json here",
            to_setting=_path),
    _stream("--workload-seed", kinds.integer(), None, "seed of the synthetic prompt generator",
            setting="seed"),
    # Content integrity: a reference-target extension, so off unless asked for.
    _stream("--verify-signature", kinds.SWITCH_ON, False,
            "verify each response's signature against the JWKS; a mismatch fails as 'integrity'",
            campaign="workload.verify_signature"),
    _stream("--verify-text", kinds.SWITCH_ON, False,
            "check each response's text is the target's deterministic text for its seed",
            campaign="workload.verify_text"),
    _stream("--jwks-path", kinds.URL_PATH, "/.well-known/jwks.json",
            "path of the JWKS to verify with", campaign="workload.jwks_path"),
    # Traces (ramplab/measure/otel.py): off unless an endpoint is given.
    _stream("--otlp-endpoint", kinds.HTTP_URL, None,
            "send a CLIENT span per attempt over OTLP/HTTP to this base URL (…/v1/traces) and "
            "a W3C traceparent with it; needs the `tracing` extra",
            to_setting=_optional),
    _stream("--otlp-service-name", kinds.non_empty_text("the traces' service.name"), "ramplab",
            "service.name of the load generator's spans"),
    _stream("--trace-sample-ratio", kinds.RATIO, 1.0,
            "share of requests traced (the target follows the sampled flag)"),
    # A worker on another host: how long it tries to reach its master before it exits.
    _stream("--master-timeout", _SECONDS, 60.0,
            "worker: seconds to reach the Locust master before exiting with code 4",
            setting="master_timeout_s"),
    # Datasets, output lengths and shared prefixes (``ramplab/datasets``, docs/workloads.md).
    _stream("--dataset", kinds.TEXT, None,
            "dataset file: ShareGPT JSON/JSONL, prompt JSONL or one prompt a line",
            campaign="workload.dataset", to_setting=_path),
    _stream("--dataset-format", kinds.choice("auto", "sharegpt", "prompts", "text"), "auto",
            "the --dataset's format (auto: by suffix and first record)",
            campaign="workload.dataset_format"),
    _stream("--dataset-tokenizer", kinds.non_empty_text("a tokenizer"), "approx",
            "counts the dataset's tokens: approx, cl100k_base or PATH/tokenizer.json",
            campaign="workload.dataset_tokenizer"),
    _stream("--dataset-seed", kinds.integer(), 0,
            "order of the dataset's prompts and of drawn output lengths",
            campaign="workload.dataset_seed"),
    _stream("--dataset-sample", _POSITIVE, None, "use this many of the dataset's prompts",
            campaign="workload.dataset_sample"),
    _stream("--dataset-prompt-tokens", kinds.TOKEN_RANGE, "",
            "keep prompts of LOW..HIGH tokens", campaign="workload.dataset_prompt_tokens"),
    _stream("--dataset-output-tokens", kinds.TOKEN_RANGE, "",
            "keep prompts whose dataset output is LOW..HIGH tokens",
            campaign="workload.dataset_output_tokens"),
    _stream("--output-lengths", kinds.OUTPUT_LENGTHS, "max_tokens",
            "each request's max_tokens: --max-tokens, the dataset's, or a distribution",
            campaign="workload.output_lengths"),
    _stream("--shared-prefix", kinds.SHARED_PREFIX, {},
            '{"prefixes": N, "prefix_tokens": L, "requests_per_prefix": M}',
            campaign="workload.shared_prefix"),
    _stream("--prefix-salt", kinds.TEXT, None,
            "salt of the shared prefixes (default: a new one per run)",
            campaign="workload.prefix_salt", to_setting=_optional),
    # The Prometheus exporter (``MetricsSettings``). Watching a run is an option of the command
    # (``ramplab run --metrics``), not of the campaign: none of these is a campaign field.
    _metrics("--metrics-port", kinds.PORT, 0, "worker: serve /metrics on this port (0: off)",
             "port"),
    _metrics("--metrics-host", kinds.non_empty_text("the address to bind"), "127.0.0.1",
             "address the /metrics servers bind", "host"),
    _metrics("--master-metrics-port", kinds.PORT, 0,
             "master: serve the run gauges on this port (0: off)", "master_port"),
    _metrics("--metrics-linger", _NON_NEGATIVE, 0.0,
             "seconds /metrics stays up after the run ends (a last scrape sees every request)",
             "linger_s"),
    _metrics("--run-id", kinds.non_empty_text("every metric's run label"), "default",
             "the `run` label of every ramplab_ metric", "run_id"),
    _metrics("--scenario", kinds.TEXT, None,
             "the `scenario` label (default: the locustfile's name)", "scenario", _label),
    # The ramp engine (``RunOptions``).
    _ramp("--ramplab-shape", kinds.SHAPE, None, "load shape, e.g. '1,2,5,10@30s/5s'",
          "shape_text", campaign="shape"),
    _ramp("--ramplab-mode", kinds.choice("open", "closed"), "open",
          "open: shape rates are QPS; closed: users", "mode", campaign="mode"),
    _ramp("--ramplab-arrivals", kinds.ARRIVALS, "poisson",
          "arrival process (gamma:B: burstiness B)", "arrivals", campaign="arrivals"),
    _ramp("--ramplab-seed", kinds.integer(), 1, "seed of the arrival schedule", "seed",
          campaign="seed"),
    _ramp("--ramplab-overflow", kinds.choice("drop", "queue"), "drop",
          "an arrival with no free user at the cap: dropped (counted) or queued", "overflow",
          campaign="overflow"),
    # Trace replay (docs/workloads.md): the trace is the schedule, its lengths each request's.
    _ramp("--ramplab-trace", kinds.TEXT, None,
          "replay this trace (JSONL or CSV of arrival time, input and output tokens)", "trace",
          campaign="trace.file", to_setting=_path),
    _ramp("--ramplab-trace-speed", kinds.number(0.0, above=True), 1.0,
          "trace time scale: 2 replays twice as fast", "trace_speed", campaign="trace.speed"),
    _ramp("--ramplab-trace-loop", _POSITIVE, 1, "replay the trace this many times, back to back",
          "trace_loop", campaign="trace.loop"),
    _ramp("--ramplab-trace-limit", kinds.integer(0), 0,
          "replay only the first N arrivals (0: all)", "trace_limit", campaign="trace.limit"),
    _ramp("--ramplab-max-users", _POSITIVE, 1000, "cap on users (all workers)", "max_users",
          campaign="max_users"),
    _ramp("--ramplab-headroom", kinds.number(1.0), 1.5, "users pre-warmed = rate x duration x this",
          "headroom", campaign="headroom"),
    _ramp("--ramplab-duration-prior", _NON_NEGATIVE, 0.0,
          "seconds per request assumed before any is measured (0: 1 s + max-tokens x 50 ms)",
          "duration_prior_s"),
    _ramp("--ramplab-retry", kinds.RETRY, None, "retry policy: name or JSON mapping", "retry",
          campaign="retry"),
    _ramp("--ramplab-engine-metrics", kinds.ENGINE_METRICS, "auto",
          "the server's Prometheus figures, scraped each second: auto (ORIGIN/metrics, if the "
          "server exposes a known engine's), off, or a URL", "engine_metrics",
          campaign="engine_metrics"),
    _ramp("--ramplab-slo", kinds.SLO, None, "per-request SLOs, e.g. 'ttft_ms<=800'", "slo",
          campaign="slo"),
    # A campaign's gates reach the master through `ramplab run`, which adds its own `--gate`s.
    _ramp("--ramplab-gate", kinds.GATES, None, "';'-separated gates: 'ttft_ms.p99 < 800'",
          "gates"),
    # Like the gates, the campaign's max_error_ratio reaches the master through `ramplab run`.
    _ramp("--ramplab-max-error-ratio", kinds.RATIO, 0.5,
          "exit 3 when more than this share of requests did not succeed (every one failing "
          "always does)", "max_error_ratio"),
    _ramp("--ramplab-outage", kinds.OUTAGE, None,
          "START+DURATION: outage on the reference target at run time (needs the admin token)",
          "outage", campaign="outage"),
    _ramp("--ramplab-admin-token", kinds.TEXT, None, "the reference target's admin token",
          "admin_token", secret=True),
    _ramp("--ramplab-drain", _NON_NEGATIVE, 30.0,
          "max seconds to wait for in-flight requests; those still running are cut, each with "
          "a record of kind unfinished",
          "drain_s", campaign="drain_s"),
)  # fmt: skip

_BY_FLAG = {o.flag: o for o in OPTIONS}
_BY_CAMPAIGN = {o.campaign: o for o in OPTIONS if o.campaign is not None}


def option(flag: str) -> Option:
    """The option of ``flag`` (``KeyError`` for an unknown one: a programming error)."""
    return _BY_FLAG[flag]


def options_of(group: Group) -> Iterator[Option]:
    return (o for o in OPTIONS if o.group == group)


def _argument_type(opt: Option) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return opt.kind.parse(text, opt.flag)
        except UsageError as exc:
            # argparse prefixes "argument --flag: " itself; a sub-field ("--ramplab-retry.policy")
            # stays in the message.
            message = str(exc)
            if exc.field == opt.flag:
                message = message.removeprefix(f"{opt.flag}: ")
            raise argparse.ArgumentTypeError(message) from None

    parse.__name__ = opt.kind.name
    return parse


def register(parser: Any, group: Group) -> None:
    """Add ``group``'s options to Locust's (configargparse) parser, as one section."""
    section = parser.add_argument_group(GROUPS[group])
    for opt in options_of(group):
        common = {"dest": opt.dest, "default": opt.default, "env_var": opt.env, "help": opt.help}
        if opt.kind.switch is not None:
            action = "store_true" if opt.kind.switch else "store_false"
            section.add_argument(opt.flag, action=action, **common)
        else:
            common["help"] = f"{opt.help} ({opt.kind.name})"
            section.add_argument(opt.flag, type=_argument_type(opt), **common)


def value(parsed: Any, opt: Option) -> Any:
    """``opt``'s value in Locust's parsed options, checked (a namespace may be built by hand);
    its default when absent. Raises ``UsageError`` naming the flag."""
    raw = getattr(parsed, opt.dest, None)
    if raw is None:
        return opt.default
    return opt.kind.check(raw, opt.flag)


def setting_values(parsed: Any, group: Group) -> dict[str, Any]:
    """The settings attributes of ``group`` from Locust's parsed options."""
    return {o.setting: o.to_setting(value(parsed, o)) for o in options_of(group)}


def setting_defaults(group: Group) -> dict[str, Any]:
    """The settings attributes of ``group`` when no option is given."""
    return {o.setting: o.to_setting(o.default) for o in options_of(group)}


def campaign_default(path: str) -> Any:
    """The default of the campaign field ``path`` (``workload.max_tokens``): its option's."""
    return _same(_BY_CAMPAIGN[path].default)


def campaign_options() -> Iterator[Option]:
    return iter(_BY_CAMPAIGN.values())


def campaign_arguments(value_at: Callable[[str], Any]) -> tuple[list[str], dict[str, str]]:
    """The Locust arguments and the (secret) environment of a campaign's fields.

    ``value_at(path)`` is the campaign's value of a field. Every set value is passed, defaults
    included, so a stray ``RAMPLAB_*`` variable in the caller's environment cannot override the
    campaign; a switch is passed when the campaign asks for what its flag sets.
    """
    args: list[str] = []
    env: dict[str, str] = {}
    for opt in campaign_options():
        given = value_at(opt.campaign or "")
        if given is None:
            continue
        if opt.secret:
            if given != opt.default:
                env[opt.env] = opt.kind.format(given)
        elif opt.kind.switch is not None:
            if given == opt.kind.switch:
                args.append(opt.flag)
        else:
            args += [opt.flag, opt.kind.format(given)]
    return args, env
