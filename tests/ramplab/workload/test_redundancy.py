"""Each rule removes its kind of redundancy, and nothing that carries content."""

from __future__ import annotations

import pytest

from ramplab.workload.redundancy import RULE_NAMES, apply_rules, rule

INSTRUCTION = "【指令】请回答以下问题。"


def removed(name: str, text: str) -> str:
    return rule(name).remove([text])[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a  \nb\t\nc\u3000\n", "a\nb\nc\n"),
        ("x\r\ny", "x\ny"),
        ("  indented stays", "  indented stays"),
    ],
)
def test_trailing_whitespace(text: str, expected: str) -> None:
    assert removed("trailing-whitespace", text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\n\n\n\nb", "a\n\nb"),
        ("a\n  \n\t\n\nb", "a\n\nb"),  # whitespace-only lines are blank
        ("a\n\nb", "a\n\nb"),  # one blank line separates paragraphs: kept
        ("\n\n\na\n", "a\n"),
        ("a\n\n\n", "a\n"),
        ("a", "a"),
    ],
)
def test_blank_runs(text: str, expected: str) -> None:
    assert removed("blank-runs", text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("### 问题\n正文", "问题\n正文"),
        ("## Title ##", "Title"),
        ("> quoted\n> > nested", "quoted\nnested"),
        ("- one\n  * two\n+ three", "one\ntwo\nthree"),
        ("1. first\n2. second", "1. first\n2. second"),  # an order is content
        ("a\n---\nb\n***\nc", "a\n\nb\n\nc"),
        ("这是**重要**的，*注意*。", "这是重要的，注意。"),
        ("***both***", "both"),
        ("2 * 3 * 4 and a*b*c", "2 * 3 * 4 and a*b*c"),  # arithmetic and identifiers
        ("call `f(*args, **kw)` and **go**", "call `f(*args, **kw)` and go"),
        ("__init__ stays", "__init__ stays"),
        ("#hashtag stays", "#hashtag stays"),
        ("- **Great Wall**?", "Great Wall?"),
    ],
)
def test_markdown(text: str, expected: str) -> None:
    assert removed("markdown", text) == expected


def test_markdown_leaves_fenced_code_alone() -> None:
    code = "```python\n# a comment\n- x\n**kwargs\n```\n~~~\n> not a quote\n~~~"
    assert removed("markdown", "### Code\n" + code) == "Code\n" + code


def test_duplicate_lines_keep_the_first() -> None:
    text = f"{INSTRUCTION}\n{INSTRUCTION}\n问题：为什么？\n{INSTRUCTION}  "
    assert removed("duplicate-lines", text) == f"{INSTRUCTION}\n问题：为什么？"


def test_duplicate_lines_across_messages() -> None:
    system = "You are a patient maths teacher."
    out = rule("duplicate-lines").remove([system, f"{system}\nWhat is 8 x 5?"])
    assert out == [system, "What is 8 x 5?"]


def test_short_or_wordless_repeats_and_code_survive() -> None:
    text = "Yes.\nYes.\n----------\n----------\n```\nprint(1)\nprint(1)\n```"
    assert removed("duplicate-lines", text) == text


def test_all_rules_together_in_their_order() -> None:
    text = f"### 指令\n{INSTRUCTION}  \n\n\n\n## 指令\n{INSTRUCTION}\n> 天空为什么是**蓝色**的？\n"
    # "指令" is shorter than MIN_DUPLICATE_CHARS: a short heading repeated is kept.
    expected = f"指令\n{INSTRUCTION}\n\n指令\n天空为什么是蓝色的？\n"
    assert apply_rules([text], RULE_NAMES) == [expected]
    # The order given does not matter: RULES' order is applied.
    assert apply_rules([text], list(reversed(RULE_NAMES))) == apply_rules([text], RULE_NAMES)
