"""The inflation campaign, shortened, on the local stack: one prompt, raw then normalised.

One prompt (the sample corpus's English "all kinds together" record), so that every request of a
variant carries the same prompt: the target (``tokenizer: cl100k_base``) must report exactly the
analyser's count for it — as written in the raw variant, without every kind in the normalised
one. Two runs of 3 s at 5 QPS (~15 requests each) serve every assertion.

Tolerance on the TTFT saved: the prefill model charges 2 ms a token, so the ~40 saved tokens
expect ~80 ms. The server's own prefill figure is its sleep, so its saving must match within
5 ms; the client's TTFT adds the loaded machine's scheduling noise (a few ms per request on
~15 requests), so its saving must match within the study's 95 % interval plus 10 ms.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ramplab.workload.prompt_file import read_prompts
from ramplab.workload.redundancy import RULE_NAMES, apply_rules
from ramplab.workload.tokenizers import load_tokenizer
from tests.ramplab.workload.conftest import SAMPLE
from tests.support.cli import ramplab, records, run_meta
from tests.support.processes import REPO

# One experiment for every test here: the module runs on one xdist worker, not once on each.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("inflation-run")]


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    tmp = tmp_path_factory.mktemp("inflation")
    (tmp / "one.jsonl").write_text(SAMPLE.read_text(encoding="utf-8").splitlines()[7] + "\n")
    data = yaml.safe_load((REPO / "campaigns" / "inflation.yaml").read_text())
    data["workload"]["prompts_file"] = "one.jsonl"
    data |= {"steps": [{"qps": 5, "hold": "3s", "warmup": "0.5s"}], "drain_s": 5, "repeat": 1,
             "order": "fixed"}  # fmt: skip
    campaign = tmp / "inflation.yaml"
    campaign.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    done = ramplab(["run", str(campaign), "--results-dir", str(tmp), "--run-name", "exp"])
    return done.returncode, done.stdout + done.stderr, tmp / "exp"


def variants(directory: Path) -> dict[str, dict[str, Any]]:
    study = json.loads((directory / "study.json").read_text())
    return {v["variant"]: v for v in study["data"]["variants"]}


def test_the_experiment_runs_and_names_its_tokenizer(experiment: tuple[int, str, Path]) -> None:
    code, out, directory = experiment
    assert code == 0, out[-3000:]
    assert "## §3.3 Prompt token inflation — the TTFT saved" in (directory / "study.md").read_text()
    raw, norm = run_meta(directory / "01-raw-r1"), run_meta(directory / "02-normalised-r1")
    assert (raw["tokenizer"], raw["normalise"]) == ("cl100k_base", None)
    assert (norm["tokenizer"], norm["normalise"]) == ("cl100k_base", "all")


def test_every_request_carries_exactly_the_analysers_count(
    experiment: tuple[int, str, Path],
) -> None:
    directory = experiment[2]
    [prompt] = read_prompts(SAMPLE)[7:8]
    cl100k = load_tokenizer("cl100k_base")
    as_written = cl100k.count(prompt.texts[0])
    without_all = cl100k.count(apply_rules(prompt.texts, RULE_NAMES)[0])
    assert without_all < as_written
    for run, expected in (("01-raw-r1", as_written), ("02-normalised-r1", without_all)):
        ok = [r for r in records(directory / run) if r["ok"]]
        assert len(ok) >= 8, run
        assert {r["prompt_tokens"] for r in ok} == {expected}, run


def test_ttft_falls_by_what_the_prefill_model_implies(experiment: tuple[int, str, Path]) -> None:
    norm = variants(experiment[2])["normalised"]
    expected = norm["expected_saved_ttft_ms"]
    assert expected == pytest.approx(norm["saved_tokens"] * 2.0)
    assert norm["saved_prefill_ms"] == pytest.approx(expected, abs=5.0)
    assert abs(norm["saved_ttft_ms"] - expected) <= norm["saved_ttft_ci95_ms"] + 10.0, norm
