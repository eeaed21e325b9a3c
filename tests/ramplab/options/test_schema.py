"""The option schema: one entry per option drives the parser, the settings, campaigns and docs."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import configargparse
import pytest

from ramplab import options as facade
from ramplab.campaign.schema import Auth, Sessions, Workload, parse_campaign
from ramplab.errors import UsageError
from ramplab.load.outage import Outage
from ramplab.options import schema
from ramplab.options.__main__ import main as reference_main
from ramplab.options.settings import MetricsSettings, UserSettings
from ramplab.results.slo import parse_gates, parse_request_slo
from ramplab.retry.config import parse_retry

SHAPE = "1@2s"
TRACE = "".join(
    f'{{"timestamp": {i * 500}, "input_length": 5, "output_length": 3}}\n' for i in range(4)
)
# A trace replay takes its shape from the trace and sends single requests: its options round-trip
# in a campaign of their own.
REPLAY = {"trace.file", "trace.speed", "trace.loop", "trace.limit"}
# Sessions arrive open-loop, and the samples run a closed loop: sessions round-trip alone too.
SESSIONS = {"workload.sessions.turns"}


def parser() -> configargparse.ArgumentParser:
    built = configargparse.ArgumentParser()
    facade.register_stream_options(built)
    facade.register_ramp_options(built)
    return built


def parse(args: list[str], env: dict[str, str] | None = None) -> Any:
    return parser().parse_args(args, env_vars=env or {})


def settings_of(group: schema.Group, parsed: Any) -> Any:
    builders = {
        "stream": facade.user_settings,
        "metrics": facade.metrics_settings,
        "ramp": facade.run_options,
    }
    return builders[group](parsed)


def campaign_samples(tmp_path: Path) -> dict[str, Any]:
    """A value other than the default for every option a campaign sets."""
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    (tmp_path / "ca.pem").write_text("not read here\n")
    (tmp_path / "trace.jsonl").write_text(TRACE)
    (tmp_path / "chats.jsonl").write_text("not read here either\n")
    return {
        "workload.model": "m1",
        "workload.prompts_file": tmp_path / "prompts.jsonl",
        "workload.needle": {"lengths": [100], "depths": [0.5], "shared_prefix": False, "seed": 3},
        "workload.prompt_tokens": 17,
        "workload.prompt_tokens_std": 2.5,
        "workload.normalise": "all,-markdown",
        "workload.tokenizer": "cl100k_base",
        "workload.max_tokens": 33,
        "workload.ignore_eos": True,
        "workload.chunk_size": 3,
        "workload.temperature": 0.7,
        "workload.extra_body": {"top_p": 0.9, "stop": ["a", "b"]},
        "workload.extra_headers": {"x-team": "blue"},
        "workload.stream": False,
        "workload.include_usage": False,
        "workload.api": "responses",
        "workload.api_path": "/v2/chat",
        "workload.request_timeout_s": 12.5,
        "workload.connect_timeout_s": 1.5,
        "workload.read_timeout_s": 7.0,
        "workload.auth.mode": "jwt",
        "workload.auth.api_key": "k-123",
        "workload.auth.client_id": "me",
        "workload.auth.client_secret": "s3cret",
        "workload.auth.token_path": "/token",
        "workload.verify_tls": False,
        "workload.ca_file": tmp_path / "ca.pem",
        "workload.dns_cache": False,
        "workload.resolver": "127.0.0.1:5353",
        "workload.reuse_connections": False,
        "workload.http2": True,
        "workload.h2_window": 4096,
        "workload.verify_signature": True,
        "workload.verify_text": True,
        "workload.jwks_path": "/keys",
        "workload.sessions.turns": 3,
        "workload.sessions.think_time": "exponential:1.5",
        "workload.sessions.affinity_header": "x-conversation",
        "workload.dataset": tmp_path / "chats.jsonl",
        "workload.dataset_format": "sharegpt",
        "workload.dataset_tokenizer": "cl100k_base",
        "workload.dataset_seed": 3,
        "workload.dataset_sample": 5,
        "workload.dataset_prompt_tokens": "4..512",
        "workload.dataset_output_tokens": "..1024",
        "workload.output_lengths": "normal:128,32",
        "workload.shared_prefix": {"prefixes": 2, "prefix_tokens": 64, "requests_per_prefix": 4},
        "workload.prefix_salt": "s1",
        "shape": {"kind": "stepped", "rates": [1, 2.5], "hold": "3s", "warmup": "1s"},
        "mode": "closed",
        "arrivals": "gamma:0.5",
        "seed": 0,  # zero is a value, not a missing option
        "overflow": "queue",
        "max_users": 7,
        "headroom": 2.0,
        "retry": {"policy": "retry_after", "max_attempts": 3},
        "slo": {"ttft_ms": 500.0, "tpot_ms": 25.5},
        "drain_s": 0.0,
        "engine_metrics": "http://127.0.0.1:9/metrics",
        "outage": "5s+3s",
        "trace.file": tmp_path / "trace.jsonl",
        "trace.speed": 2.0,
        "trace.loop": 2,
        "trace.limit": 7,
    }


# Options no campaign sets: their text on a command line, and the settings value it gives.
FLAG_SAMPLES: dict[str, tuple[str, Any]] = {
    "--results-dir": ("out/run", Path("out/run")),
    "--workload-seed": ("5", 5),
    "--metrics-port": ("9101", 9101),
    "--metrics-host": ("0.0.0.0", "0.0.0.0"),
    "--master-metrics-port": ("9100", 9100),
    "--metrics-linger": ("1.5", 1.5),
    "--run-id": ("r1", "r1"),
    "--scenario": ("demo", "demo"),
    "--ramplab-duration-prior": ("2.5", 2.5),
    "--ramplab-gate": ("ttft_ms.p99 < 800; requests > 1", None),
    "--ramplab-max-error-ratio": ("0.25", 0.25),
    "--ramplab-admin-token": ("admin", "admin"),
    "--master-timeout": ("5", 5.0),
    "--otlp-endpoint": ("http://jaeger:4318/", "http://jaeger:4318"),
    "--otlp-service-name": ("generator", "generator"),
    "--trace-sample-ratio": ("0.25", 0.25),
}


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, last = path.split(".")
        node = data
        for name in parents:
            node = node.setdefault(name, {})
        node[last] = value
    return data


def test_the_samples_cover_every_option(tmp_path: Path) -> None:
    campaign_paths = {o.campaign for o in schema.campaign_options()}
    assert set(campaign_samples(tmp_path)) == campaign_paths
    assert set(FLAG_SAMPLES) == {o.flag for o in schema.OPTIONS if o.campaign is None}


def test_every_campaign_option_round_trips_to_the_settings(tmp_path: Path) -> None:
    samples = campaign_samples(tmp_path)
    replay = {path: samples.pop(path) for path in REPLAY}
    sessions = {path: samples.pop(path) for path in SESSIONS}
    campaign = parse_campaign(nested(samples))
    samples |= {path: schema.campaign_default(path) for path in REPLAY | SESSIONS}
    for opt in schema.campaign_options():
        if opt.campaign not in REPLAY | SESSIONS | {"shape"}:
            assert campaign.value_at(opt.campaign or "") != opt.default, opt.campaign
    args, env = campaign.locust_args(), campaign.locust_env()
    env["RAMPLAB_ADMIN_TOKEN"] = "admin"  # an outage needs it; the stack sets it (stack/run.py)
    for opt in schema.OPTIONS:
        if opt.secret and opt.campaign is not None:
            assert opt.flag not in args
            assert opt.kind.format(samples[opt.campaign]) not in " ".join(args)
            assert opt.env in env
    parsed = parse(args, env)
    user, run = facade.user_settings(parsed), facade.run_options(parsed)
    special = {
        "workload.ca_file": str(samples["workload.ca_file"]),
        "shape": campaign.shape_text(),
        "retry": parse_retry(samples["retry"]),
        "slo": parse_request_slo(samples["slo"]),
        "outage": Outage(5.0, 3.0),
    }
    for opt in schema.campaign_options():
        built = user if opt.group == "stream" else run
        expected = special.get(opt.campaign or "", samples[opt.campaign or ""])
        assert getattr(built, opt.setting) == expected, opt.flag
    assert run.shape is not None
    assert run.shape.stages == campaign.load_shape.stages
    assert run.retry_spec == samples["retry"]

    alone = parse_campaign({"shape": SHAPE, **nested(sessions)})
    assert facade.user_settings(parse(alone.locust_args())).session_turns == 3

    replayed = parse_campaign(nested(replay))
    run = facade.run_options(parse(replayed.locust_args()))
    assert (run.trace, run.trace_speed, run.trace_loop, run.trace_limit) == (
        replay["trace.file"],
        2.0,
        2,
        7,
    )
    assert run.arrivals == replayed.arrival_spec
    assert run.shape is not None
    assert run.shape.stages == replayed.load_shape.stages
    # 4 rows 0.5 s apart, looped twice (period 2 s), 7 kept, twice as fast: 7 over 1.75 s.
    (stage,) = run.shape.stages
    assert (stage.duration_s, stage.rate) == (1.75, 4.0)


@pytest.mark.parametrize("flag", sorted(FLAG_SAMPLES))
def test_every_other_option_round_trips_from_its_flag(flag: str) -> None:
    opt = schema.option(flag)
    text, expected = FLAG_SAMPLES[flag]
    args = [flag, text, "--ramplab-shape", SHAPE]
    built = settings_of(opt.group, parse(args))
    if flag == "--ramplab-gate":
        expected = parse_gates(["ttft_ms.p99 < 800", "requests > 1"], field="--ramplab-gate")
    assert getattr(built, opt.setting) == expected


def test_every_option_reads_its_environment_variable(tmp_path: Path) -> None:
    samples = campaign_samples(tmp_path)
    for opt in schema.OPTIONS:
        if opt.campaign is None:
            text = FLAG_SAMPLES[opt.flag][0]
        elif opt.kind.switch is not None:
            text = "true"
        elif opt.campaign == "shape":
            text = "1,2@3s"
        else:
            text = opt.kind.format(samples[opt.campaign])
        from_flag = parse([opt.flag] if opt.kind.switch is not None else [opt.flag, text])
        from_env = parse([], {opt.env: text})
        assert getattr(from_env, opt.dest) == getattr(from_flag, opt.dest), opt.env
        assert getattr(from_env, opt.dest) != opt.default, opt.env


def test_environment_variable_names_stay_what_compose_files_use() -> None:
    # Renaming one silently breaks users' compose files and shells: change it on purpose only.
    assert {o.env.removeprefix("RAMPLAB_") for o in schema.OPTIONS} == {
        "MODEL", "PROMPTS_FILE", "NORMALISE", "TOKENIZER", "PROMPT_TOKENS", "PROMPT_TOKENS_STD",
        "MAX_TOKENS", "IGNORE_EOS",
        "CHUNK_SIZE", "TEMPERATURE", "EXTRA_BODY", "EXTRA_HEADERS", "NO_STREAM", "NO_USAGE",
        "API", "API_PATH", "REQUEST_TIMEOUT", "CONNECT_TIMEOUT", "READ_TIMEOUT", "AUTH", "API_KEY",
        "NEEDLE",
        "CLIENT_ID", "CLIENT_SECRET", "TOKEN_PATH", "INSECURE", "CA_FILE", "NO_DNS_CACHE",
        "RESOLVER", "NEW_CONNECTION", "HTTP2", "H2_WINDOW", "RESULTS_DIR", "WORKLOAD_SEED",
        "VERIFY_SIGNATURE", "SESSION_TURNS", "SESSION_THINK_TIME", "SESSION_HEADER",
        "VERIFY_TEXT", "JWKS_PATH", "METRICS_PORT", "METRICS_HOST", "MASTER_METRICS_PORT",
        "METRICS_LINGER", "RUN_ID", "SCENARIO", "SHAPE", "MODE", "ARRIVALS", "SEED", "OVERFLOW",
        "MAX_USERS", "HEADROOM", "DURATION_PRIOR", "RETRY", "SLO", "GATE", "OUTAGE", "ADMIN_TOKEN",
        "DRAIN", "MAX_ERROR_RATIO", "ENGINE_METRICS",
        "MASTER_TIMEOUT", "OTLP_ENDPOINT", "OTLP_SERVICE_NAME", "TRACE_SAMPLE_RATIO",
        "TRACE", "TRACE_SPEED", "TRACE_LOOP", "TRACE_LIMIT",
        "DATASET", "DATASET_FORMAT", "DATASET_TOKENIZER", "DATASET_SEED", "DATASET_SAMPLE",
        "DATASET_PROMPT_TOKENS", "DATASET_OUTPUT_TOKENS", "OUTPUT_LENGTHS", "SHARED_PREFIX",
        "PREFIX_SALT",
    }  # fmt: skip
    assert len({o.dest for o in schema.OPTIONS}) == len(schema.OPTIONS)


def test_settings_defaults_are_the_schemas() -> None:
    assert vars_of(UserSettings()) == schema.setting_defaults("stream")
    assert vars_of(MetricsSettings()) == schema.setting_defaults("metrics")
    assert vars_of(facade.user_settings(SimpleNamespace())) == schema.setting_defaults("stream")
    assert vars_of(facade.user_settings(parse([]))) == schema.setting_defaults("stream")
    assert vars_of(facade.metrics_settings(parse([]))) == schema.setting_defaults("metrics")
    run = facade.run_options(parse(["--ramplab-shape", SHAPE]))
    for opt in schema.options_of("ramp"):
        if opt.setting in ("mode", "arrivals", "seed", "overflow", "max_users", "headroom"):
            assert getattr(run, opt.setting) == opt.default
    assert run.drain_s == schema.option("--ramplab-drain").default
    assert (run.retry, run.outage, run.gates, run.admin_token) == (None, None, [], "")


def vars_of(settings: Any) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__slots__}


def test_campaign_defaults_are_the_schemas() -> None:
    campaign = parse_campaign({"shape": SHAPE})
    for opt in schema.campaign_options():
        if opt.campaign != "shape":
            assert campaign.value_at(opt.campaign or "") == opt.default, opt.campaign
    # and every field of the workload sets an option (none is read by hand elsewhere)
    fields = {f"workload.{name}" for name in Workload.model_fields}
    fields -= {"workload.auth", "workload.sessions"}
    fields |= {f"workload.auth.{name}" for name in Auth.model_fields}
    fields |= {f"workload.sessions.{name}" for name in Sessions.model_fields}
    assert fields == {
        o.campaign for o in schema.campaign_options() if "workload." in str(o.campaign)
    }


def test_a_default_campaign_still_passes_every_value() -> None:
    # A stray RAMPLAB_* variable in the shell must not override what the campaign says.
    args = parse_campaign({"shape": SHAPE}).locust_args()
    for opt in schema.campaign_options():
        if opt.kind.switch is None and not opt.secret and opt.default is not None:
            assert opt.flag in args


# A value each option's kind refuses, on the command line.
BAD: dict[str, str] = {
    "--prompt-tokens": "0",
    "--needle": '{"lengths": [8], "depths": [0.5]}',
    "--prompt-tokens-std": "-1",
    "--max-tokens": "many",
    "--chunk-size": "0",
    "--temperature": "nan",
    "--extra-body": "[1]",
    "--extra-headers": "{oops",
    "--api": "grpc",
    "--api-path": "v1/chat",
    "--request-timeout": "0",
    "--connect-timeout": "-2",
    "--read-timeout": "x",
    "--auth": "oauth",
    "--token-path": "token",
    "--workload-seed": "1.5",
    "--jwks-path": "jwks.json",
    "--metrics-port": "70000",
    "--metrics-host": " ",
    "--master-metrics-port": "http",
    "--metrics-linger": "-1",
    "--run-id": "",
    "--ramplab-shape": "1,2@zz",
    "--ramplab-mode": "half-open",
    "--ramplab-arrivals": "gamma:-1",
    "--ramplab-seed": "seven",
    "--ramplab-overflow": "spill",
    "--ramplab-max-users": "0",
    "--ramplab-headroom": "0.5",
    "--ramplab-duration-prior": "-1",
    "--ramplab-retry": '{"policy": "sometimes"}',
    "--ramplab-slo": "speed<=3",
    "--ramplab-gate": "nonsense",
    "--ramplab-outage": "5s",
    "--ramplab-drain": "-1",
    "--ramplab-max-error-ratio": "1.5",
    "--ramplab-engine-metrics": "on",
    "--resolver": "127.0.0.1",
    "--h2-window": "0",
    "--session-turns": "0",
    "--session-think-time": "uniform:3-1",
    "--session-header": "x session",
    "--ramplab-trace-speed": "0",
    "--ramplab-trace-loop": "0",
    "--ramplab-trace-limit": "-1",
    "--master-timeout": "0",
    "--otlp-endpoint": "jaeger:4318",
    "--otlp-service-name": " ",
    "--trace-sample-ratio": "1.5",
    "--dataset-format": "csv",
    "--dataset-tokenizer": " ",
    "--dataset-seed": "x",
    "--dataset-sample": "0",
    "--dataset-prompt-tokens": "10..5",
    "--dataset-output-tokens": "many",
    "--output-lengths": "normal:1",
    "--shared-prefix": '{"prefixes": 0}',
}


def test_every_checked_option_has_a_bad_value() -> None:
    free_text = {o.flag for o in schema.OPTIONS if o.kind.name == "text" and o.flag not in BAD}
    switches = {o.flag for o in schema.OPTIONS if o.kind.switch is not None}
    assert set(BAD) == {o.flag for o in schema.OPTIONS} - free_text - switches
    # Free text is checked where it means something: files, credentials.
    assert free_text == {
        "--model", "--prompts-file", "--api-key", "--client-id", "--client-secret", "--ca-file",
        "--results-dir", "--scenario", "--ramplab-admin-token", "--dataset", "--prefix-salt",
        "--ramplab-trace",
        "--normalise", "--tokenizer",  # checked when the workload loads (rules, tokenizer files)
    }  # fmt: skip


@pytest.mark.parametrize("flag", sorted(BAD))
@pytest.mark.parametrize("source", ["argv", "env"])
def test_a_bad_value_exits_2_naming_the_flag(flag: str, source: str) -> None:
    opt = schema.option(flag)
    err = io.StringIO()
    args, env = ([flag, BAD[flag]], {}) if source == "argv" else ([], {opt.env: BAD[flag]})
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as caught:
        parse(args, env)
    assert caught.value.code == 2
    assert f"argument {flag}" in err.getvalue()
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("flag", sorted(BAD))
def test_a_bad_value_in_a_namespace_is_a_usage_error_on_the_flag(flag: str) -> None:
    # What the plugin sees when a value did not come through the parser (a namespace built by
    # hand, a value Locust's master sent): the same check, one error type, the flag named.
    opt = schema.option(flag)
    namespace = SimpleNamespace(**{"ramplab_shape": SHAPE, opt.dest: BAD[flag]})
    with pytest.raises(UsageError) as caught:
        settings_of(opt.group, namespace)
    assert caught.value.field.startswith(flag)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--auth", "api-key"], "--api-key"),
        (["--auth", "jwt", "--client-secret", "s"], "--client-id"),
        (["--auth", "jwt", "--client-id", "me"], "--client-secret"),
        (["--prompts-file", "/nonexistent/p.jsonl"], "--prompts-file"),
        (["--ca-file", "/nonexistent/ca.pem"], "--ca-file"),
        (["--ramplab-outage", "5s+3s"], "--ramplab-admin-token"),
    ],
)
def test_options_checked_together_name_the_missing_one(args: list[str], flag: str) -> None:
    parsed = parse([*args, "--ramplab-shape", SHAPE])
    build = facade.run_options if flag.startswith("--ramplab") else facade.user_settings
    with pytest.raises(UsageError) as caught:
        build(parsed)
    assert caught.value.field == flag


def test_switches_read_true_from_the_environment() -> None:
    parsed = parse([], {"RAMPLAB_NO_STREAM": "true", "RAMPLAB_NEW_CONNECTION": "yes"})
    settings = facade.user_settings(parsed)
    assert (settings.stream, settings.reuse_connections) == (False, False)
    assert facade.user_settings(parse([], {"RAMPLAB_NO_STREAM": "false"})).stream is True


def test_the_facade_is_the_five_functions_and_their_types() -> None:
    assert sorted(facade.__all__) == [
        "MetricsSettings", "RunOptions", "UserSettings", "metrics_settings",
        "register_ramp_options", "register_stream_options", "run_options", "user_settings",
    ]  # fmt: skip


def test_the_committed_options_reference_is_current() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = reference_main(["--check"])
    assert code == 0, err.getvalue()


def test_the_reference_check_catches_a_stale_doc(tmp_path: Path) -> None:
    doc = tmp_path / "cli.md"
    doc.write_text((Path(schema.__file__).parents[2] / "docs" / "cli.md").read_text())
    doc.write_text(doc.read_text().replace("`RAMPLAB_MAX_TOKENS`", "`RAMPLAB_MAXTOKENS`"))
    with contextlib.redirect_stderr(io.StringIO()):
        assert reference_main(["--check", str(doc)]) == 1
    with contextlib.redirect_stdout(io.StringIO()):
        assert reference_main(["--write", str(doc)]) == 0
    assert reference_main(["--check", str(doc)]) == 0
