"""The needle probe on a hand-made tokenizer: one token per character, so every index is known."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ramplab.attention.probe import Encoded, answer_offset, build_probes, parse_depths
from ramplab.errors import UsageError

CLS, SEP = -1, -2


class Chars:
    """A token per character (its code point); ``[CLS] … [SEP]`` around a text."""

    def encode(self, text: str) -> Encoded:
        return Encoded([ord(c) for c in text], [(i, i + 1) for i in range(len(text))])

    def specials(self) -> tuple[list[int], list[int]]:
        return [CLS], [SEP]

    def tokens(self, ids: Sequence[int]) -> list[str]:
        return [chr(i) for i in ids]


def test_every_probe_has_exactly_the_tokens_asked_and_the_answer_where_the_needle_is() -> None:
    needle, question = "code is 42.", "code?"
    probes = build_probes(Chars(), [0, 50, 100], 100, needle, question)
    fixed = 2 + len(" " + needle) + len(" " + question)
    filler = 100 - fixed
    for probe in probes:
        assert len(probe.ids) == 100
        assert probe.ids[0] == CLS
        assert probe.ids[-1] == SEP
        assert chr(probe.ids[probe.answer]) == "4"  # the first token of the last word
        start, end = probe.needle
        assert "".join(chr(i) for i in probe.ids[start:end]) == " " + needle
        q_start, q_end = probe.question
        assert "".join(chr(i) for i in probe.ids[q_start:q_end]) == " " + question
    assert [p.needle[0] for p in probes] == [1, 1 + round(filler / 2), 1 + filler]
    assert probes[-1].needle[1] == probes[-1].question[0]  # 100 %: right before the question


def test_answer_is_the_first_token_of_the_last_word_whatever_punctuation_follows() -> None:
    text = " The vault opens with AMBER-7!"
    assert text[answer_offset(text, Chars().encode(text))] == "7"
    with pytest.raises(UsageError, match="--needle"):
        answer_offset(" ...", Chars().encode(" ..."))


def test_a_context_too_short_for_the_needle_is_refused_naming_the_option() -> None:
    with pytest.raises(UsageError, match="--context-tokens: 10 is too few"):
        build_probes(Chars(), [0], 10, "a long needle sentence.", "and a question?")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0,101", "101 is out of range"),
        ("-5", "-5 is out of range"),
        ("a", "'a' is not a number"),
        ("50,50", "50 is given twice"),
    ],
)
def test_bad_depths_are_refused_naming_the_option(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=f"--depths: {message}"):
        parse_depths(text)


def test_depths_parse_as_percent() -> None:
    assert parse_depths("0, 12.5,100") == [0.0, 12.5, 100.0]
