"""Campaign files: every field checked, errors named the way the file spells them."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from ramplab.campaign.preflight import check_campaign
from ramplab.campaign.schema import load_campaign, parse_campaign
from ramplab.campaign.variants import load_experiment
from ramplab.errors import CampaignError, UsageError
from ramplab.load.shapes import parse_shape
from ramplab.load.trace import trace_spec
from ramplab.runs.naming import keep_trace
from ramplab.runs.rebuild import truncated
from tests.support.processes import REPO

SHAPE = {"kind": "stepped", "rates": [1, 2], "hold": "4s", "warmup": "1s"}


def error_field(data: dict[str, Any]) -> str:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(data)
    return caught.value.field


@pytest.mark.parametrize("path", sorted((REPO / "campaigns").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_campaigns_validate(path: Path) -> None:
    experiment = load_experiment(path, check_target=False)
    campaigns = [v.campaign for v in experiment.variants] if experiment else [load_campaign(path)]
    for campaign in campaigns:
        assert campaign.name == path.stem
        if campaign.search is not None and campaign.shape is None and campaign.steps is None:
            continue  # a search campaign: each probe gets its own shape (tests/ramplab/experiment)
        assert campaign.load_shape.duration_s > 0


def test_demo_campaign_is_the_1_to_100_qps_ramp_within_a_few_minutes() -> None:
    shape = load_campaign(REPO / "campaigns" / "demo.yaml").load_shape
    rates = [st.rate for st in shape.stages]
    assert rates[0] == 1
    assert rates[-1] == 100
    assert rates == sorted(rates)
    assert all(st.warmup_s > 0 for st in shape.stages)
    assert shape.duration_s <= 240


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"steps": [{"qps": 1, "hold": "2s"}, {"qps": 2, "hold": "2s"}, {"qps": -5, "hold": "2s"}]},
         "steps[2].qps"),
        ({"steps": [{"qps": 1, "hold": "2s"}, {"qps": "fast", "hold": "2s"}]}, "steps[1].qps"),
        ({"steps": [{"qps": 1, "hold": "soon"}]}, "steps[0].hold"),
        ({"steps": [{"qps": 1, "hold": "2s", "warmup": "3s"}]}, "steps[0].warmup"),
        ({"steps": [{"qps": 1, "hold": "2s", "rate": 3}]}, "steps[0].rate"),
        ({"shape": {**SHAPE, "rates": [1, "x"]}}, "shape.rates[1]"),
        ({"shape": {**SHAPE, "hold": "forever"}}, "shape.hold"),
        ({"shape": "1,2@zz"}, "shape.hold"),
        ({"shape": SHAPE, "workload": {"max_tokens": 0}}, "workload.max_tokens"),
        ({"shape": SHAPE, "workload": {"auth": {"mode": "oauth"}}}, "workload.auth.mode"),
        ({"shape": SHAPE, "retry": {"policy": "sometimes"}}, "retry.policy"),
        ({"shape": SHAPE, "retry": {"policy": "exponential", "max_attempts": 0}},
         "retry.max_attempts"),
        ({"shape": SHAPE, "gates": ["ttft_ms.p99 < 800", "nonsense"]}, "gates[1]"),
        ({"shape": SHAPE, "slo": {"ttft_ms": 500, "speed": 3}}, "slo.speed"),
        ({"shape": SHAPE, "arrivals": "gamma:-1"}, "arrivals"),
        ({"shape": SHAPE, "mode": "half-open"}, "mode"),
        ({"shape": SHAPE, "stack": {"workers": 0}}, "stack.workers"),
        ({"shape": SHAPE, "name": "../escape"}, "name"),
        ({"shape": SHAPE, "unknown_key": 1}, "unknown_key"),
        ({"shape": SHAPE, "steps": [{"qps": 1, "hold": "1s"}]}, "shape"),
        ({}, "shape"),
    ],
)  # fmt: skip
def test_bad_fields_are_named(data: dict[str, Any], field: str) -> None:
    assert error_field(data) == field


def test_steps_form_equals_the_custom_shape() -> None:
    campaign = parse_campaign(
        {"steps": [{"qps": 1, "hold": "3s", "warmup": "1s"}, {"qps": 4.5, "hold": "2s"}]}
    )
    stages = [(s.rate, s.duration_s, s.warmup_s) for s in campaign.load_shape.stages]
    assert stages == [(1.0, 3.0, 1.0), (4.5, 2.0, 0.0)]


@pytest.mark.parametrize(
    "shape",
    [SHAPE, {"kind": "linear", "from": 1, "to": 7, "duration": "5s", "step": "2s"},
     {"kind": "exponential", "from": 1, "to": 100, "duration": "9s", "step": "3s"}, "1,3@2s/0.5s"],
)  # fmt: skip
def test_shape_text_reproduces_the_stages_the_workers_parse(shape: object) -> None:
    campaign = parse_campaign({"shape": shape})
    assert parse_shape(campaign.shape_text()).stages == campaign.load_shape.stages


def test_locust_arguments_carry_the_workload_and_secrets_travel_by_environment() -> None:
    campaign = parse_campaign(
        {
            "shape": SHAPE,
            "retry": {"policy": "retry_after", "max_attempts": 3},
            "slo": {"ttft_ms": 500},
            "workload": {
                "max_tokens": 32, "ignore_eos": True, "chunk_size": 4, "model": "m",
                "auth": {"mode": "jwt", "client_id": "me", "client_secret": "s3cret"},
            },
        }
    )  # fmt: skip
    args = campaign.locust_args()
    pairs = dict(itertools.pairwise(args))
    assert pairs["--max-tokens"] == "32"
    assert pairs["--chunk-size"] == "4"
    assert pairs["--model"] == "m"
    assert pairs["--auth"] == "jwt"
    assert pairs["--ramplab-slo"] == "ttft_ms<=500"
    assert yaml.safe_load(pairs["--ramplab-retry"]) == {"policy": "retry_after", "max_attempts": 3}
    assert "--ignore-eos" in args
    assert "s3cret" not in " ".join(args)
    assert campaign.locust_env() == {"RAMPLAB_CLIENT_SECRET": "s3cret"}


def test_target_settings_become_app_variables() -> None:
    campaign = parse_campaign(
        {
            "shape": SHAPE,
            "target": {
                "redis_url": "redis://127.0.0.1:1/0",
                "settings": {"latency": {"itl_ms": 5}, "auth": {"api_keys": ["k"]},
                             "signing": {"mode": "parallel"}},
            },
        }
    )  # fmt: skip
    assert campaign.target.environment() == {
        "APP_LATENCY__ITL_MS": "5",
        "APP_AUTH__API_KEYS": '["k"]',
        "APP_SIGNING__MODE": "parallel",
        "APP_REDIS_URL": "redis://127.0.0.1:1/0",
    }


def test_unreadable_and_invalid_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match="cannot read"):
        load_campaign(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("shape: [1, 2\nname: x\n")
    with pytest.raises(CampaignError, match="not valid YAML"):
        load_campaign(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(CampaignError, match="mapping at the top level"):
        load_campaign(listed)


def test_an_interrupted_shape_keeps_what_ran() -> None:
    shape = parse_campaign(
        {"steps": [{"qps": 1, "hold": "10s", "warmup": "2s"}, {"qps": 2, "hold": "10s",
                   "warmup": "2s"}, {"qps": 3, "hold": "10s"}]}
    ).load_shape  # fmt: skip
    cut = truncated(shape, 15.0)
    assert [(s.rate, s.duration_s, s.warmup_s) for s in cut.stages] == [(1, 10, 2), (2, 5, 2)]
    # Cut inside the second stage's warm-up: that stage has no measured window.
    assert [s.rate for s in truncated(shape, 11.0).stages] == [1]
    assert truncated(shape, 40.0).stages == shape.stages
    assert truncated(shape, 1.0) is None  # still in the first warm-up


def test_a_relative_prompts_file_is_relative_to_the_campaign(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "c.yaml"
    path.write_text("shape: '1@2s'\nworkload: {prompts_file: prompts.jsonl}\n")
    campaign = load_campaign(path)
    assert campaign.workload.prompts_file == tmp_path / "sub" / "prompts.jsonl"
    assert str(tmp_path / "sub" / "prompts.jsonl") in campaign.locust_args()


def test_a_trace_campaign_takes_its_shape_from_the_trace(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.jsonl").write_text("".join(
        f'{{"timestamp": {ms}, "input_length": 3, "output_length": 2}}\n' for ms in (0, 500, 1000)
    ))  # fmt: skip
    path = tmp_path / "c.yaml"
    path.write_text("name: c\ntrace: {file: traces/t.jsonl, speed: 2}\n")
    campaign = load_campaign(path)
    assert campaign.trace.file == tmp_path / "traces" / "t.jsonl"  # from the campaign's folder
    (stage,) = campaign.load_shape.stages
    assert (stage.duration_s, stage.rate) == (0.75, 4.0)
    assert campaign.arrival_spec.startswith("trace:2.0:1:0:")
    assert "--ramplab-trace" in campaign.locust_args()
    path.write_text("name: c\ntrace: {file: traces/missing.jsonl}\n")
    with pytest.raises(CampaignError, match="No such file") as caught:
        load_campaign(path)
    assert caught.value.field == "trace.file"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"trace": {"file": "t.jsonl"}, "shape": "1@2s"}, "trace.file"),
        ({"trace": {"file": "t.jsonl", "speed": 0}}, "trace.speed"),
        ({"trace": {"file": "t.jsonl"}, "mode": "closed"}, "mode"),
        ({"shape": "1@2s", "mode": "closed", "workload": {"sessions": {"turns": 2}}},
         "workload.sessions.turns"),
        ({"shape": "1@2s", "workload": {"sessions": {"think_time": "normal:1"}}},
         "workload.sessions.think_time"),
        ({"shape": "1@2s", "workload": {"sessions": {"turns": 0}}}, "workload.sessions.turns"),
    ],
)  # fmt: skip
def test_bad_session_and_trace_fields_are_named(data: dict[str, object], field: str) -> None:
    assert error_field({"name": "c", **data}) == field


def test_a_run_keeps_its_trace_where_the_saved_campaign_finds_it(tmp_path: Path) -> None:
    """Regression guard: an interrupted replay's summary is rebuilt from the saved campaign,
    whose relative trace path counts from the run directory."""
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.jsonl").write_text(
        '{"timestamp": 0, "input_length": 3, "output_length": 2}\n'
    )
    text = "name: c\ntrace: {file: traces/t.jsonl, speed: 2}\n"
    (tmp_path / "c.yaml").write_text(text)
    run_dir = tmp_path / "results" / "c-1"
    run_dir.mkdir(parents=True)
    (run_dir / "campaign.yaml").write_text(text)
    kept = keep_trace(run_dir, load_campaign(tmp_path / "c.yaml"), text)
    assert kept == (run_dir / "traces" / "t.jsonl").resolve()
    saved = load_campaign(run_dir / "campaign.yaml")
    assert saved.arrival_spec == trace_spec(run_dir / "traces" / "t.jsonl", 2.0)
    escape = "name: c\ntrace: {file: ../../traces/t.jsonl}\n"
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "e.yaml").write_text(escape)
    assert keep_trace(run_dir, load_campaign(tmp_path / "a" / "b" / "e.yaml"), escape) is None
    assert keep_trace(run_dir, load_campaign(REPO / "campaigns" / "smoke.yaml"), "name: x") is None


@pytest.mark.parametrize(
    ("workload", "named"),
    [
        ({"normalise": "all,-emoji"}, "workload.normalise: .*unknown rule 'emoji'"),
        ({"tokenizer": "gpt-17"}, "workload.tokenizer: unknown tokenizer 'gpt-17'"),
    ],
)
def test_the_inflation_options_are_checked_before_anything_runs(
    workload: dict[str, str], named: str
) -> None:
    with pytest.raises(UsageError, match=named):
        check_campaign(parse_campaign({"shape": SHAPE, "workload": workload}))


def test_a_ten_hour_campaign_at_1000_qps_validates() -> None:
    # Regression: refused above 10 M arrivals while every process held the whole schedule.
    campaign = parse_campaign({"shape": {"kind": "stepped", "rates": [1000], "hold": "10h"}})
    assert campaign.load_shape.expected_arrivals == 36_000_000
    assert parse_shape(campaign.shape_text()).stages == campaign.load_shape.stages


URL = "http://127.0.0.1:9/m"


WORDS = [("off", "off"), ("on", "auto"), ("auto", "auto"), (URL, URL)]


@pytest.mark.parametrize(("text", "sent"), WORDS)
def test_engine_metrics_reads_yamls_bare_off_and_on(text: str, sent: str) -> None:
    # YAML 1.1 reads a bare off/on as a boolean; the campaign means the word.
    campaign = parse_campaign(yaml.safe_load(f"shape: '1@2s'\nengine_metrics: {text}\n"))
    args = campaign.locust_args()
    assert args[args.index("--ramplab-engine-metrics") + 1] == sent
