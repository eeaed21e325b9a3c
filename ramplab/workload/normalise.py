"""The preprocessor the study recommends: a prompt without the redundancies that inflate it.

Every rule of ``ramplab.workload.redundancy`` is on unless kept (``--keep markdown``). The result
is idempotent (normalising twice changes nothing more) and keeps the content: every word of the
input (``content_words``: runs of letters and digits, markup has none) is still in the output, and
the output's words are the input's in the same order, less the copies of duplicated lines.
``tests/ramplab/workload/test_normalise.py`` checks both on the sample corpus and on generated
prompts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ramplab.errors import UsageError
from ramplab.workload.prompt_file import Prompt
from ramplab.workload.redundancy import RULE_NAMES, apply_rules

__all__ = ["Normalised", "content_words", "normalise", "rules_kept"]

# Han, kana and hangul are written without spaces: each character is a word of its own, so that
# "并指出**性能问题**" and "并指出性能问题" hold the same words.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CONTENT_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are not markup: each CJK character, and every maximal run of
    other letters and digits."""
    return _CONTENT_WORD.findall(text)


def rules_kept(keep: Sequence[str], field: str = "--keep") -> list[str]:
    """The rules to apply: all but those in ``keep`` (unknown names are a ``UsageError``)."""
    for name in keep:
        if name not in RULE_NAMES:
            raise UsageError(
                field, f"unknown rule {name!r}: expected one of {', '.join(RULE_NAMES)}"
            )
    return [r for r in RULE_NAMES if r not in keep]


@dataclass(frozen=True, slots=True)
class Normalised:
    prompts: list[Prompt]
    chars_before: int
    chars_after: int
    changed: int  # prompts whose text changed


def normalise(prompts: Sequence[Prompt], rules: Sequence[str]) -> Normalised:
    out = [p.with_texts(apply_rules(p.texts, rules)) for p in prompts]
    return Normalised(
        prompts=out,
        chars_before=sum(len(t) for p in prompts for t in p.texts),
        chars_after=sum(len(t) for p in out for t in p.texts),
        changed=sum(a.texts != b.texts for a, b in zip(prompts, out, strict=True)),
    )
