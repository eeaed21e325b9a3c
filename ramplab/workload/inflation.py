"""The inflation coefficient of each kind of redundancy, per tokenizer (study §3.3).

For every prompt and tokenizer: the tokens as written, and the tokens once one rule of
``ramplab.workload.redundancy`` has removed its kind alone, then once all of them have. The
inflation coefficient of a kind is ``tokens with ÷ tokens without``, over a group of prompts
``Σ tokens with ÷ Σ tokens without`` (each token weighs the same: it is what prefill pays for).
1.000 means the kind costs nothing with that tokenizer — BERT-style tokenizers drop whitespace,
so blank lines are free there and not with a BPE. Groups are the prompts' ``lang`` fields, plus
``all``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ramplab.workload.prompt_file import Prompt
from ramplab.workload.redundancy import RULE_NAMES, RULES, apply_rules
from ramplab.workload.tokenizers import Tokenizer

__all__ = ["ALL", "Analysis", "Counted", "analyse", "print_analysis", "to_json"]

ALL = "all"  # the group of every prompt, and the row of every rule applied together


@dataclass(frozen=True, slots=True)
class Counted:
    """One prompt's tokens as written and without each kind (``without[ALL]``: without all)."""

    where: str
    lang: str | None
    tokens: int
    without: dict[str, int]


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    prompts: int
    tokens: int
    min_tokens: int
    max_tokens: int
    without: dict[str, int]

    def coefficient(self, kind: str) -> float | None:
        return self.tokens / self.without[kind] if self.without[kind] else None

    def saved_pct(self, kind: str) -> float | None:
        return 100.0 * (self.tokens - self.without[kind]) / self.tokens if self.tokens else None


@dataclass(frozen=True, slots=True)
class Analysis:
    tokenizer: str
    prompts: list[Counted]

    def group_names(self) -> list[str]:
        """``all``, then each ``lang`` in order of appearance when it is not the whole corpus."""
        langs = list(dict.fromkeys(p.lang for p in self.prompts if p.lang is not None))
        whole = len(langs) == 1 and all(p.lang is not None for p in self.prompts)
        return [ALL] if whole else [ALL, *langs]

    def group(self, name: str) -> Group:
        members = [p for p in self.prompts if name in (ALL, p.lang)]
        kinds = [*RULE_NAMES, ALL]
        return Group(
            name=name,
            prompts=len(members),
            tokens=sum(p.tokens for p in members),
            min_tokens=min(p.tokens for p in members),
            max_tokens=max(p.tokens for p in members),
            without={k: sum(p.without[k] for p in members) for k in kinds},
        )


def _count(prompt: Prompt, tokenizer: Tokenizer, variants: Mapping[str, Sequence[str]]) -> Counted:
    def tokens(texts: Sequence[str]) -> int:
        return sum(tokenizer.count(t) for t in texts)

    return Counted(
        where=prompt.where,
        lang=prompt.lang,
        tokens=tokens(prompt.texts),
        without={kind: tokens(texts) for kind, texts in variants.items()},
    )


def analyse(prompts: Sequence[Prompt], tokenizers: Sequence[Tokenizer]) -> list[Analysis]:
    """One ``Analysis`` per tokenizer, in the order given."""
    variants = [
        {
            **{r: apply_rules(p.texts, [r]) for r in RULE_NAMES},
            ALL: apply_rules(p.texts, RULE_NAMES),
        }
        for p in prompts
    ]
    return [
        Analysis(t.name, [_count(p, t, v) for p, v in zip(prompts, variants, strict=True)])
        for t in tokenizers
    ]


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def to_json(source: Path, analyses: Sequence[Analysis]) -> dict[str, Any]:
    """The ``--json`` document (docs/prompts.md describes it)."""
    kinds = [*RULE_NAMES, ALL]
    out: dict[str, Any] = {
        "file": str(source),
        "rules": [{"name": r.name, "removes": r.summary} for r in RULES],
        "tokenizers": [],
    }
    for analysis in analyses:
        groups = {}
        for name in analysis.group_names():
            g = analysis.group(name)
            groups[name] = {
                "prompts": g.prompts,
                "tokens": {
                    "total": g.tokens,
                    "mean": round(g.tokens / g.prompts, 1),
                    "min": g.min_tokens,
                    "max": g.max_tokens,
                },
                "without": {
                    k: {
                        "tokens": g.without[k],
                        "coefficient": _rounded(g.coefficient(k), 4),
                        "saved_pct": _rounded(g.saved_pct(k), 2),
                    }
                    for k in kinds
                },
            }
        out["tokenizers"].append(
            {
                "name": analysis.tokenizer,
                "groups": groups,
                "prompts": [
                    {"where": p.where, "lang": p.lang, "tokens": p.tokens, "without": p.without}
                    for p in analysis.prompts
                ],
            }
        )
    return out


def _cell(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def print_analysis(console: Console, analyses: Sequence[Analysis], per_prompt: bool) -> None:
    """A table per tokenizer: a row per kind (and all together), coefficient and tokens saved
    per group; with ``per_prompt``, each prompt's tokens before and after every rule."""
    for analysis in analyses:
        names = analysis.group_names()
        groups = [analysis.group(n) for n in names]
        table = Table(
            title=f"Inflation per kind of redundancy — tokenizer {analysis.tokenizer}",
            caption="coefficient = tokens as written ÷ tokens without that kind; "
            "saved = share of the tokens it costs",
        )
        table.add_column("kind removed")
        for g in groups:
            table.add_column(f"{g.name} coef", justify="right")
            table.add_column(f"{g.name} saved", justify="right")
        table.add_row(
            "tokens per prompt (mean, min–max)",
            *[
                cell
                for g in groups
                for cell in (f"{g.tokens / g.prompts:.1f}", f"{g.min_tokens}–{g.max_tokens}")
            ],
        )
        for kind in [*RULE_NAMES, ALL]:
            label = "all of them" if kind == ALL else kind
            table.add_row(
                label,
                *[
                    cell
                    for g in groups
                    for cell in (
                        _cell(g.coefficient(kind), ".3f"),
                        _cell(g.saved_pct(kind), ".1f") + ("" if g.tokens == 0 else " %"),
                    )
                ],
                end_section=kind == RULE_NAMES[-1],
            )
        console.print(table)
        if per_prompt:
            detail = Table(title=f"Tokens per prompt — {analysis.tokenizer}")
            detail.add_column("prompt")
            detail.add_column("lang")
            detail.add_column("tokens", justify="right")
            for kind in [*RULE_NAMES, ALL]:
                detail.add_column(f"−{kind}", justify="right")
            for p in analysis.prompts:
                detail.add_row(
                    p.where,
                    p.lang or "",
                    str(p.tokens),
                    *[str(p.without[k]) for k in [*RULE_NAMES, ALL]],
                )
            console.print(detail)
