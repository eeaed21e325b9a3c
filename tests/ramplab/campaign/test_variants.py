"""Matrix and named variants: expansion, names, run order and every validation error's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ramplab.campaign.schema import load_campaign
from ramplab.campaign.variants import load_experiment, parse_experiment
from ramplab.errors import CampaignError
from ramplab.experiment.order import plan_runs

BASE: dict[str, Any] = {
    "name": "exp",
    "shape": {"kind": "stepped", "rates": [2, 4], "hold": "3s", "warmup": "1s"},
    "seed": 7,
    "workload": {"max_tokens": 8, "chunk_size": 4},
}


def parse(**extra: Any) -> Any:
    return parse_experiment({**BASE, **extra}, check_target=False)


def error(**extra: Any) -> CampaignError:
    with pytest.raises(CampaignError) as info:
        parse(**extra)
    return info.value


def test_a_matrix_is_the_cartesian_product_in_declared_order() -> None:
    exp = parse(matrix={"workload.chunk_size": [1, 16], "retry": ["none", "retry_after"]})
    assert [v.name for v in exp.variants] == [
        "chunk_size=1+retry=none", "chunk_size=1+retry=retry_after",
        "chunk_size=16+retry=none", "chunk_size=16+retry=retry_after",
    ]  # fmt: skip
    assert [v.campaign.workload.chunk_size for v in exp.variants] == [1, 1, 16, 16]
    assert [v.campaign.retry for v in exp.variants] == ["none", "retry_after"] * 2
    assert exp.variants[0].campaign.workload.max_tokens == 8  # the base stays
    assert exp.baseline == "chunk_size=1+retry=none"
    assert exp.variants[1].slug == "chunk_size-1-retry-retry_after"


def test_nested_and_dotted_keys_are_the_same_and_target_settings_nest_deeply() -> None:
    nested = parse(matrix={"target": {"settings": {"signing": {"mode": ["locked", "off"]}}}})
    dotted = parse(matrix={"target.settings.signing.mode": ["locked", "off"]})
    assert [v.name for v in nested.variants] == [v.name for v in dotted.variants]
    assert nested.variants[1].campaign.target.environment()["APP_SIGNING__MODE"] == "off"


def test_named_variants_times_the_matrix_and_mapping_fields_are_replaced_whole() -> None:
    exp = parse(
        retry={"policy": "retry_after", "max_attempts": 4},
        variants=[{"name": "plain", "retry": "none"},
                  {"name": "jitter", "retry": {"policy": "exponential"}}],
        matrix={"workload.chunk_size": [1, 4]},
    )  # fmt: skip
    assert [v.name for v in exp.variants] == [
        "plain+chunk_size=1",
        "plain+chunk_size=4",
        "jitter+chunk_size=1",
        "jitter+chunk_size=4",
    ]
    assert exp.variants[2].campaign.retry == {"policy": "exponential"}


def test_the_mapping_form_of_variants_and_a_shape_override_replacing_steps() -> None:
    base = {k: v for k, v in BASE.items() if k != "shape"}
    exp = parse_experiment({**base, "steps": [{"qps": 1, "hold": "2s"}], "variants": {
        "steps": {}, "ramp": {"shape": {"kind": "stepped", "rates": [1, 2], "hold": "2s"}}}},
        check_target=False)  # fmt: skip
    assert [len(v.campaign.load_shape.stages) for v in exp.variants] == [1, 2]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"matrix": {"workload.chunk_size": [1, 4, 0]}}, "matrix.workload.chunk_size[2]"),
        ({"matrix": {"workload": {"chunk_size": [1, "x"]}}}, "matrix.workload.chunk_size[1]"),
        ({"matrix": {"workload.chunk_sz": [1]}}, "matrix.workload.chunk_sz[0]"),
        ({"matrix": {"workload.chunk_size": 4}}, "matrix.workload.chunk_size"),
        ({"matrix": {"workload.chunk_size": []}}, "matrix.workload.chunk_size"),
        ({"matrix": {"retry": ["none", {"policy": "nope"}]}}, "matrix.retry[1].policy"),
        ({"matrix": {"name": ["a", "b"]}}, "matrix.name"),
        ({"matrix": []}, "matrix"),
        (
            {"variants": [{"name": "a", "workload.max_tokens": -1}]},
            "variants[0].workload.max_tokens",
        ),
        ({"variants": [{"name": "a b"}]}, "variants[0].name"),
        ({"variants": [{"name": "a"}, {"name": "a"}]}, "variants[1].name"),
        ({"variants": [{"workload.chunk_size": 2}]}, "variants[0].name"),
        (
            {
                "variants": [{"name": "a", "workload.chunk_size": 2}],
                "matrix": {"workload": {"chunk_size": [1]}},
            },
            "variants[0].workload.chunk_size",
        ),
        ({"matrix": {"workload.chunk_size": [1]}, "repeat": 0}, "repeat"),
        ({"matrix": {"workload.chunk_size": [1]}, "repeat": True}, "repeat"),
        ({"matrix": {"workload.chunk_size": [1]}, "order": "random"}, "order"),
        ({"matrix": {"workload.chunk_size": [1]}, "baseline": "x"}, "baseline"),
        ({"matrix": {"workload.chunk_size": [1]}, "fail_if": ["ttft_ms.p99 >> 2"]}, "fail_if[0]"),
        ({"matrix": {"workload.chunk_size": list(range(1, 300))}, "repeat": 2}, "matrix"),
        ({"repeat": 2}, "matrix"),
        ({"matrix": {"workload.chunk_size": [1]}, "max_users": "many"}, "max_users"),
    ],
)
def test_errors_name_the_path_in_the_file(extra: dict[str, Any], field: str) -> None:
    assert error(**extra).field == field


def test_target_settings_are_checked_by_the_target_and_blamed_on_their_matrix_entry() -> None:
    with pytest.raises(CampaignError) as info:
        parse_experiment({**BASE, "matrix": {"target.settings.signing.mode": ["locked", "lockd"]}})
    assert info.value.field == "matrix.target.settings.signing.mode[1]"
    assert "lockd" in str(info.value)


def test_plan_interleaves_repeat_blocks_and_is_reproducible() -> None:
    exp = parse(matrix={"workload.chunk_size": [1, 2, 4]}, repeat=4)
    plan = plan_runs(exp)
    assert [p.index for p in plan] == list(range(1, 13))
    for block in range(4):
        runs = plan[block * 3 : block * 3 + 3]
        assert sorted(p.variant for p in runs) == sorted(v.name for v in exp.variants)
        assert {p.repeat for p in runs} == {block + 1}
        assert {p.seed for p in runs} == {7 + block}  # common random numbers inside a block
    assert plan == plan_runs(exp)  # the campaign seed fixes the order
    assert len({tuple(p.variant for p in plan[b * 3 : b * 3 + 3]) for b in range(4)}) > 1
    assert plan[0].dir == f"01-{exp.variant(plan[0].variant).slug}-r1"


def test_abba_and_fixed_orders() -> None:
    abba = plan_runs(parse(matrix={"workload.chunk_size": [1, 2]}, repeat=4, order="abba"))
    assert [p.variant[-1] for p in abba] == list("12211221")
    fixed = plan_runs(parse(matrix={"workload.chunk_size": [1, 2]}, repeat=2, order="fixed"))
    assert [p.variant[-1] for p in fixed] == list("1212")


def test_files_and_the_single_campaign_loader(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    path = tmp_path / "exp.yaml"
    data = {**BASE, "workload": {"prompts_file": "prompts.jsonl"},
            "matrix": {"workload.max_tokens": [4, 8]}}  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    exp = load_experiment(path, check_target=False)
    assert exp is not None
    assert exp.variants[0].campaign.workload.prompts_file == tmp_path / "prompts.jsonl"
    with pytest.raises(CampaignError) as info:
        load_campaign(path)  # a single-run loader refuses an experiment, naming the key
    assert info.value.field == "matrix"
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(BASE))
    assert load_experiment(tmp_path / "plain.yaml") is None


def test_the_cli_refuses_a_bad_variant_before_anything_runs(tmp_path: Path) -> None:
    from tests.support.cli import ramplab

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**BASE, "matrix": {"workload.chunk_size": [1, 4, 0]}}))
    for command in (["validate", str(path)], ["run", str(path), "--results-dir", str(tmp_path)]):
        done = ramplab(command)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "error: matrix.workload.chunk_size[2]:" in done.stderr
        assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.yaml"]  # nothing was started
    path.write_text(yaml.safe_dump({**BASE, "matrix": {"workload.chunk_size": [1, 4]}}))
    done = ramplab(["validate", str(path)])
    assert done.returncode == 0, done.stderr
    assert "2 variants × repeat 1 = 2 runs" in done.stdout
    assert "chunk_size=4" in done.stdout
