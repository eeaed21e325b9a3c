"""The normaliser's guarantees: idempotent, and every content word kept, in order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ramplab.errors import UsageError
from ramplab.workload.normalise import content_words, normalise, rules_kept
from ramplab.workload.prompt_file import Prompt
from ramplab.workload.redundancy import RULE_NAMES, apply_rules


def is_subsequence(part: Sequence[str], whole: Sequence[str]) -> bool:
    it = iter(whole)
    return all(any(w == x for x in it) for w in part)


def assert_content_kept(before: Sequence[str], after: Sequence[str]) -> None:
    """Every non-markup word of the input is in the output, and the output's words are the
    input's in the same order (only copies of duplicated lines may go)."""
    words_in = [w for t in before for w in content_words(t)]
    words_out = [w for t in after for w in content_words(t)]
    assert set(words_out) == set(words_in)
    assert is_subsequence(words_out, words_in)


def test_the_sample_corpus_keeps_its_content_and_shrinks(sample: list[Prompt]) -> None:
    result = normalise(sample, RULE_NAMES)
    for before, after in zip(sample, result.prompts, strict=True):
        assert_content_kept(before.texts, after.texts)
        assert apply_rules(after.texts, RULE_NAMES) == list(after.texts), before.where
    assert result.changed == len(sample) - 2  # the two clean translation prompts
    assert result.chars_after < result.chars_before


def test_without_duplicate_lines_every_word_occurrence_stays(sample: list[Prompt]) -> None:
    kept = rules_kept(["duplicate-lines"])
    for before, after in zip(sample, normalise(sample, kept).prompts, strict=True):
        words_in = [w for t in before.texts for w in content_words(t)]
        assert [w for t in after.texts for w in content_words(t)] == words_in


def test_keep_switches_a_rule_off() -> None:
    text = "### Title\n\n\n\nbody  "
    kept = rules_kept(["markdown"])
    assert kept == ["trailing-whitespace", "duplicate-lines", "blank-runs"]
    assert apply_rules([text], kept) == ["### Title\n\nbody"]


def test_an_unknown_rule_is_named() -> None:
    with pytest.raises(UsageError, match="unknown rule 'emoji'") as caught:
        rules_kept(["emoji"])
    assert caught.value.field == "--keep"


# Generated prompts made of the pieces the rules act on, and of words in both scripts.
WORDS = st.sampled_from(
    ["指令", "请回答以下问题", "天空", "blue", "sky", "answer", "x2", "数据库", "a", "B"]
)
MARKS = st.sampled_from(
    ["", "### ", "# ", "> ", "> > ", "- ", "* ", "+ ", "1. ", "  - ", "**", "*", "`", "---", "***"]
)
TAILS = st.sampled_from(["", " ", "  ", "\t", "\u3000", "**", "*", " #"])
SEPARATORS = st.sampled_from([" ", "，", ", ", "。", "**", " *", "* ", "_", " `x` "])


@st.composite
def lines(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORDS, min_size=0, max_size=6))
    body = ""
    for word in words:
        body += (draw(SEPARATORS) if body else "") + word
    return draw(MARKS) + body + draw(TAILS)


@st.composite
def prompts(draw: st.DrawFn) -> list[str]:
    pool = draw(st.lists(lines(), min_size=1, max_size=6))
    texts = []
    for _ in range(draw(st.integers(1, 3))):
        picked = draw(st.lists(st.sampled_from([*pool, "", "", "```", "【指令】请回答以下问题。"]),
                               max_size=12))  # fmt: skip
        texts.append("\n".join(picked))
    return texts


@settings(max_examples=400, deadline=None)
@given(texts=prompts(), keep=st.sets(st.sampled_from(RULE_NAMES), max_size=3))
def test_generated_prompts_keep_their_content_and_normalise_once(
    texts: list[str], keep: set[str]
) -> None:
    rules = rules_kept(sorted(keep))
    once = apply_rules(texts, rules)
    assert_content_kept(texts, once)
    assert apply_rules(once, rules) == once
