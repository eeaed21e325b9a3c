"""Inflation coefficients against hand counts, and the sample corpus's two languages."""

from __future__ import annotations

from pathlib import Path

import pytest

from ramplab.workload.inflation import ALL, analyse, to_json
from ramplab.workload.prompt_file import Prompt
from ramplab.workload.redundancy import RULE_NAMES
from ramplab.workload.tokenizers import Tokenizer

INSTRUCTION = "【指令】请回答以下问题。"


def one(text: str, lang: str | None = None) -> Prompt:
    return Prompt("hand", (text,), lang)


def test_a_duplicated_instruction_doubles_the_tokens(
    approx: Tokenizer, cl100k: Tokenizer, minilm: Tokenizer
) -> None:
    # approx: 6 per line (see test_tokenizers) → 12 with ÷ 6 without = 2.
    # cl100k: 12 per line; "。\n" is one token (punctuation takes the newline after it) → 24 ÷ 12.
    # MiniLM: 12 per line, whitespace free → 24 ÷ 12 = 2.
    [a, c, m] = analyse([one(f"{INSTRUCTION}\n{INSTRUCTION}")], [approx, cl100k, minilm])
    assert a.group(ALL).coefficient("duplicate-lines") == 2.0
    assert c.group(ALL).tokens == 24
    assert c.group(ALL).coefficient("duplicate-lines") == 2.0
    assert m.group(ALL).coefficient("duplicate-lines") == 2.0
    for analysis in (a, c, m):
        assert analysis.group(ALL).coefficient("markdown") == 1.0


def test_markdown_and_whitespace_by_hand(cl100k: Tokenizer, minilm: Tokenizer) -> None:
    # cl100k: ### | ␣Title | \n\n\n\n | body → without the heading mark: Title | \n\n\n\n | body;
    # without the blank run: \n\n instead of \n\n\n\n, still one token.
    [c, m] = analyse([one("### Title\n\n\n\nbody")], [cl100k, minilm])
    g = c.group(ALL)
    assert (g.tokens, g.without["markdown"], g.without["blank-runs"]) == (4, 3, 4)
    assert g.coefficient("markdown") == pytest.approx(4 / 3)
    assert g.coefficient("blank-runs") == 1.0
    # MiniLM: # | # | # | title | body; whitespace costs nothing at all.
    h = m.group(ALL)
    assert (h.tokens, h.without["markdown"], h.without[ALL]) == (5, 2, 2)
    assert h.coefficient("blank-runs") == h.coefficient("trailing-whitespace") == 1.0


def test_groups_follow_lang_and_add_up(sample: list[Prompt], cl100k: Tokenizer) -> None:
    [analysis] = analyse(sample, [cl100k])
    assert analysis.group_names() == [ALL, "zh", "en"]
    whole, zh, en = (analysis.group(n) for n in (ALL, "zh", "en"))
    assert whole.prompts == zh.prompts + en.prompts == len(sample)
    for kind in [*RULE_NAMES, ALL]:
        assert whole.without[kind] == zh.without[kind] + en.without[kind]
        assert whole.without[kind] <= whole.tokens
    # Every kind is present in the corpus, and removing all beats removing any one.
    for kind in RULE_NAMES:
        assert 1.0 < whole.coefficient(kind) < whole.coefficient(ALL)  # type: ignore[operator]


def test_the_two_languages_and_tokenizers_differ(
    sample: list[Prompt], cl100k: Tokenizer, minilm: Tokenizer
) -> None:
    # The corpus says the same things in both languages: cl100k spends more tokens on the
    # Chinese; MiniLM's WordPiece never pays for whitespace, cl100k does, in both languages.
    [c, m] = analyse(sample, [cl100k, minilm])
    assert c.group("zh").tokens > c.group("en").tokens
    for lang in ("zh", "en"):
        assert c.group(lang).coefficient("blank-runs") > 1.0  # type: ignore[operator]
        assert c.group(lang).coefficient("trailing-whitespace") > 1.0  # type: ignore[operator]
        assert m.group(lang).coefficient("blank-runs") == 1.0
        assert m.group(lang).coefficient("trailing-whitespace") == 1.0


def test_json_document(sample: list[Prompt], cl100k: Tokenizer, approx: Tokenizer) -> None:
    doc = to_json(Path("sample.jsonl"), analyse(sample, [cl100k, approx]))
    assert [r["name"] for r in doc["rules"]] == list(RULE_NAMES)
    assert [t["name"] for t in doc["tokenizers"]] == ["cl100k_base", "approx"]
    first = doc["tokenizers"][0]
    assert set(first["groups"]) == {ALL, "zh", "en"}
    assert set(first["groups"][ALL]["without"]) == {*RULE_NAMES, ALL}
    assert len(first["prompts"]) == len(sample)
    assert first["groups"][ALL]["tokens"]["total"] == sum(p["tokens"] for p in first["prompts"])


def test_a_corpus_of_one_language_has_one_group(approx: Tokenizer) -> None:
    [analysis] = analyse([one("a", "en"), one("b", "en")], [approx])
    assert analysis.group_names() == [ALL]
