"""``workload.normalise``: the rules named as the CLI's, applied once per prompt at load."""

from __future__ import annotations

import pytest

from ramplab.errors import UsageError
from ramplab.options.settings import UserSettings
from ramplab.options.workload import load_file_prompts
from ramplab.workload.prompt_file import read_prompts
from ramplab.workload.prompts import normalise_rules, normalised
from ramplab.workload.redundancy import RULE_NAMES, apply_rules
from tests.ramplab.workload.conftest import SAMPLE


@pytest.mark.parametrize(
    ("spec", "rules"),
    [
        (None, []),
        ("", []),
        ("all", list(RULE_NAMES)),
        ("all,-markdown", ["trailing-whitespace", "duplicate-lines", "blank-runs"]),
        ("blank-runs, markdown", ["markdown", "blank-runs"]),  # RULES order, whatever the spec's
    ],
)
def test_rules_from_the_spec(spec: str | None, rules: list[str]) -> None:
    assert normalise_rules(spec) == rules


def test_an_unknown_rule_is_refused_naming_the_option() -> None:
    with pytest.raises(UsageError, match="--normalise: unknown rule 'emoji'"):
        normalise_rules("all,-emoji")


def test_a_chats_messages_are_normalised_together() -> None:
    line = "Answer in one sentence, please."
    prompts = [[{"role": "system", "content": line}, {"role": "user", "content": f"{line}\nHi"}]]
    [out] = normalised(prompts, ["duplicate-lines"])
    assert [m["content"] for m in out] == [line, "Hi"]
    assert out[0]["role"] == "system"


def test_the_sample_file_loads_as_the_normaliser_writes_it() -> None:
    settings = UserSettings(prompts_file=SAMPLE, normalise="all")
    loaded = load_file_prompts(settings)
    expected = [apply_rules(p.texts, RULE_NAMES) for p in read_prompts(SAMPLE)]
    assert [[m["content"] for m in messages] for messages in loaded] == expected
    raw = load_file_prompts(UserSettings(prompts_file=SAMPLE))
    assert [[m["content"] for m in messages] for messages in raw] == [
        list(p.texts) for p in read_prompts(SAMPLE)
    ]


def test_no_file_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--prompts-file"):
        load_file_prompts(UserSettings())
