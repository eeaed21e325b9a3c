"""The study's rules on a real engine (``bench/engine/findings.py``, ``study.py``), without one:
which arrivals can hit a shared prefix, the accounting held against vLLM's counters, the TTFT
knee, and the campaigns of ``campaigns/engine/`` once the runner has filled them in."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench.engine import findings, study
from bench.engine.model import NAME, Model
from ramplab.campaign.schema import load_campaign
from ramplab.campaign.variants import load_experiment
from tests.support.processes import REPO


def test_every_arrival_but_each_prefixs_first_use_of_a_generation_can_hit() -> None:
    # 2 prefixes × 3 requests: arrivals 0 and 1 open generation 0, 6 and 7 generation 1.
    hits = [findings.expected_hit(i, prefixes=2, per_prefix=3) for i in range(12)]
    assert hits == [False, False, True, True, True, True] * 2


def test_accounting_is_exact_only_when_both_sums_equal_the_counters() -> None:
    requests = [
        findings.Request(0, 600, 0, 90.0),
        findings.Request(1, 600, 512, 30.0),
        findings.Request(2, 600, 512, 34.0),
        findings.Request(3, 600, 0, 80.0),
    ]
    got = findings.account(requests, 1024.0, 2400.0, prefixes=1, per_prefix=4)
    assert (got.requests, got.expected_hits, got.hits) == (4, 3, 2)
    assert got.exact
    assert got.token_hit_ratio == pytest.approx(1024 / 2400)
    assert (got.ttft_miss_ms, got.ttft_hit_ms, got.saved_ms) == (85.0, 32.0, 53.0)
    assert not findings.account(requests, 1023.0, 2400.0, 1, 4).exact
    assert not findings.account(requests, 1024.0, 2401.0, 1, 4).exact
    assert findings.account(requests[:1], 0.0, 600.0, 1, 4).saved_ms is None


def test_ttft_knee_is_the_first_step_at_twice_the_plateau() -> None:
    offered = [1, 2, 3, 4, 5, 6]
    assert findings.ttft_knee(offered, [20, 18, 22, 30, 41, 300]) == 5
    assert findings.ttft_knee(offered, [20, 18, 22, 30, 39, 39]) is None
    assert findings.ttft_knee(offered[:3], [20, 18, 22]) is None  # no step past the plateau
    assert findings.ttft_knee(offered, [20, None, 22, 21, 44, None]) == 5


@pytest.mark.parametrize(
    "path", sorted((REPO / "campaigns" / "engine").glob("*.yaml")), ids=lambda p: p.name
)
def test_the_filled_campaigns_validate_with_this_machines_model(
    path: Path, tmp_path: Path, tiny_model: Model
) -> None:
    made = tiny_model  # a real tokenizer directory: the campaigns size their prompts with it
    filled = study.fill(path, tmp_path / path.name, made)
    data = yaml.safe_load(filled.read_text())
    assert (data["workload"]["model"], data["workload"]["tokenizer"]) == (NAME, str(made.path))
    assert "tokenizer" not in yaml.safe_load(path.read_text())["workload"]  # no machine's path
    experiment = load_experiment(filled, check_target=False)
    campaigns = [v.campaign for v in experiment.variants] if experiment else [load_campaign(filled)]
    assert all(c.workload.model == NAME for c in campaigns)


def test_fill_keeps_only_the_variants_asked_for(tmp_path: Path) -> None:
    made = Model(tmp_path / "model", NAME, 0, 0.0)
    source = REPO / "campaigns" / "engine" / "needle.yaml"
    filled = yaml.safe_load(study.fill(source, tmp_path / "n.yaml", made, ("shared",)).read_text())
    assert [v["name"] for v in filled["variants"]] == ["shared"]
    with pytest.raises(ValueError, match="nothing"):
        study.fill(source, tmp_path / "m.yaml", made, ("nothing",))


def test_every_part_names_campaign_files_that_exist() -> None:
    for part in study.PARTS.values():
        for spec in part.servers:
            assert study.DETAILS in spec.settings.arguments()  # cached_tokens in every usage
            for campaign in spec.campaigns:
                assert (study.CAMPAIGNS / campaign.file).is_file()
