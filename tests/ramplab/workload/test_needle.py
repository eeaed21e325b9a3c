"""Needle contexts: exact lengths, the needle where the depth says, shared prefixes only when
asked, deterministic haystacks, every cell once per round, and the option's checks."""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from ramplab.errors import UsageError
from ramplab.options.schema import option
from ramplab.options.settings import UserSettings
from ramplab.options.workload import prompt_source
from ramplab.workload.needle import NeedlePrompts, parse_needle
from ramplab.workload.tokenizers import ApproxTokenizer
from tests.support.cli import ramplab

COUNT = ApproxTokenizer().count
NEEDLE = option("--needle").kind


def source(shared: bool = True, seed: int = 0, rng: int = 1) -> NeedlePrompts:
    spec = parse_needle(
        {"lengths": [64, 500, 4000], "depths": [0, 0.25, 0.5, 1], "shared_prefix": shared,
         "seed": seed}
    )  # fmt: skip
    return NeedlePrompts(spec, random.Random(rng))


def text_of(prompts: NeedlePrompts) -> str:
    content: str = prompts.next()[0]["content"]
    return content


@pytest.mark.parametrize("shared", [True, False])
def test_every_prompt_has_the_cells_length_and_its_needle_at_the_depth(shared: bool) -> None:
    prompts = source(shared)
    for _ in range(36):
        text = text_of(prompts)
        labels = prompts.prompt_labels
        length, depth = labels["needle_length"], labels["needle_depth"]
        assert COUNT(text) == length
        city = text.rsplit("passphrase of ", 1)[1].split("?")[0]
        needle_at = text.index(f"The secret passphrase of {city} is")
        # Tokens before the needle, as the label says; the header (no shared prefix) is 5.
        header = 0 if shared else 5
        assert COUNT(text[:needle_at]) == labels["needle_position"] + header
        filler = (
            length
            - COUNT(text[needle_at:].split(".", 1)[0] + ".")
            - COUNT(text[text.index("\n\nQuestion") :])
        )
        # The first word boundary at or after depth × filler: at most one word (4 tokens) past.
        assert -0.5 <= labels["needle_position"] - depth * (filler - header) <= 4.5


def test_cells_come_once_per_round() -> None:
    prompts = source()
    seen: Counter[tuple[int, float]] = Counter()
    for _ in range(12 * 3):
        prompts.next()
        seen[prompts.prompt_labels["needle_length"], prompts.prompt_labels["needle_depth"]] += 1
    assert len(seen) == 12
    assert set(seen.values()) == {3}


def test_shared_prefix_means_the_same_text_before_every_needle_of_a_length() -> None:
    prompts = source(shared=True)
    befores: dict[int, list[str]] = {}
    for _ in range(24):
        text = text_of(prompts)
        befores.setdefault(prompts.prompt_labels["needle_length"], []).append(
            text[: text.index("The secret passphrase")]
        )
    for texts in befores.values():
        longest = max(texts, key=len)
        assert all(longest.startswith(t) for t in texts)
    # Deterministic by seed: another generator for the needles, the same haystacks.
    other = text_of(source(shared=True, rng=99))
    again = source(shared=True, rng=99)
    assert text_of(again) == other
    assert source(seed=1)._haystack(500).text != source(seed=0)._haystack(500).text


def test_without_shared_prefix_every_prompt_opens_differently() -> None:
    prompts = source(shared=False)
    openings = {text_of(prompts)[:20] for _ in range(24)}
    assert len(openings) == 24


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"lengths": [32], "depths": [0.5]}, "workload.needle.lengths"),
        ({"lengths": [1000], "depths": [1.5]}, "workload.needle.depths"),
        ({"lengths": [], "depths": [0.5]}, "workload.needle.lengths"),
        ({"lengths": [1000], "depths": [0.5], "deep": 1}, "workload.needle.deep"),
        ({"depths": [0.5]}, "workload.needle.lengths"),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, object], field: str) -> None:
    with pytest.raises(UsageError) as caught:
        NEEDLE.check(spec, "workload.needle")
    assert caught.value.field == field


def test_the_option_turns_the_workload_into_needles() -> None:
    spec = NEEDLE.check({"lengths": [100], "depths": [0, 1]}, "workload.needle")
    assert NEEDLE.check({}, "workload.needle") == {}
    prompts = prompt_source(UserSettings(needle=spec), random.Random(os.getpid()))
    assert isinstance(prompts, NeedlePrompts)
    assert COUNT(prompts.next()[0]["content"]) == 100


def test_a_campaign_with_a_bad_needle_exits_2_naming_the_field(tmp_path: Path) -> None:
    campaign = tmp_path / "bad.yaml"
    campaign.write_text(
        "name: bad\nsteps: [{qps: 1, hold: 2s}]\n"
        "workload: {needle: {lengths: [1000, 4000], depths: [0, 1.5]}}\n"
    )
    done = ramplab(["validate", str(campaign)], timeout=60)
    assert done.returncode == 2
    assert "workload.needle.depths: 1.5 is not a depth between 0 and 1" in done.stderr
    assert "Traceback" not in done.stderr
