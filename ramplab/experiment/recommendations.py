"""Each variant's recommendations: the runs' fired rules, merged over the variant's repeats.

A run's rules are read from its ``recommendations.json`` (written with its report by
``ramplab run`` and ``ramplab report``); a run that has none (a bare Locust run, a report never
built) gets them computed from its records with the same rules, without writing into its
directory. Merging keeps every repeat's evidence: a rule is listed once per variant with the
repeats it fired in, each repeat's value of the figure it cites, and the sentence of the repeat
where that figure was worst — so a rule that fired in some repeats only says so ("in 1 of 3
repeats: r2"), and is not mistaken for a property of the variant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ramplab.experiment.sources import Group, RunData
from ramplab.report.recommend import (
    RECOMMENDATIONS_FILE,
    RULES,
    Recommendation,
    recommend,
)
from ramplab.results.digest import read_digest
from ramplab.runs.rebuild import load_summary
from ramplab.runs.rundir import RunDir

__all__ = ["VariantRecommendation", "merge", "read_recommendations", "variant_recommendations"]

_SEVERITY = {"distrust": 0, "act": 1, "note": 2}
_RULE = {rule.__name__: i for i, rule in enumerate(RULES)}
# Rules whose figure is worse when smaller (the fewest requests behind a p99).
_LOWER_IS_WORSE = frozenset({"tail_sample_size"})


def _parse(item: Any) -> Recommendation:
    return Recommendation(
        rule=str(item["rule"]),
        severity=item["severity"],
        message=str(item["message"]),
        figure=str(item["figure"]),
        value=float(item["value"]),
        threshold=float(item["threshold"]),
        steps=tuple(int(s) for s in item.get("steps", ())),
    )


def read_recommendations(run_dir: Path) -> list[Recommendation]:
    """The run's fired rules: its ``recommendations.json``, else computed from its records."""
    path = run_dir / RECOMMENDATIONS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [_parse(item) for item in data["recommendations"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # missing or unreadable: the rules again, on the records
    summary = load_summary(run_dir)
    return recommend(summary, read_digest(RunDir(run_dir).records, summary))


@dataclass(frozen=True, slots=True)
class VariantRecommendation:
    """One rule over a variant's runs: ``values[i]`` is run ``i``'s figure (``None``: the rule
    stayed silent in that run); ``message`` is the sentence of the run where it was worst."""

    rule: str
    severity: str
    message: str
    figure: str
    threshold: float
    repeats: tuple[int | None, ...]  # every run of the variant, in order (None: not a repeat)
    values: tuple[float | None, ...]

    @property
    def fired(self) -> int:
        return sum(v is not None for v in self.values)

    @property
    def runs(self) -> int:
        return len(self.values)

    @property
    def everywhere(self) -> bool:
        return self.fired == self.runs

    def _name(self, i: int) -> str:
        repeat = self.repeats[i]
        return f"r{repeat}" if repeat is not None else f"run {i + 1}"

    @property
    def where(self) -> str:
        """``""`` for a single run, ``"in every repeat (2)"``, or ``"in 1 of 2 repeats: r2"``."""
        if self.runs == 1:
            return ""
        if self.everywhere:
            return f"in every repeat ({self.runs})"
        names = ", ".join(self._name(i) for i, v in enumerate(self.values) if v is not None)
        return f"in {self.fired} of {self.runs} repeats: {names} only"

    @property
    def spread(self) -> str:
        """The figure across the repeats where it fired, when they differ: ``"0.41–0.63"``."""
        known = [v for v in self.values if v is not None]
        if len(known) < 2 or min(known) == max(known):
            return ""
        return f"{self.figure} {min(known):.3g}–{max(known):.3g} over those repeats"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "figure": self.figure,
            "threshold": self.threshold,
            "fired": self.fired,
            "runs": self.runs,
            "repeats": [
                {"repeat": r, "value": v} for r, v in zip(self.repeats, self.values, strict=True)
            ],
        }


def merge(
    per_run: Sequence[Sequence[Recommendation]], repeats: Sequence[int | None]
) -> list[VariantRecommendation]:
    """One entry per rule that fired in any run; distrust first, then act, then note (rule
    order within a severity, as for one run)."""
    names = {r.rule for recs in per_run for r in recs}
    merged = []
    for name in names:
        found = [next((r for r in recs if r.rule == name), None) for recs in per_run]
        fired = [r for r in found if r is not None]
        pick = min if name in _LOWER_IS_WORSE else max
        worst = pick(fired, key=lambda r: r.value)
        merged.append(
            VariantRecommendation(
                rule=name,
                severity=worst.severity,
                message=worst.message,
                figure=worst.figure,
                threshold=worst.threshold,
                repeats=tuple(repeats),
                values=tuple(None if r is None else r.value for r in found),
            )
        )
    return sorted(merged, key=lambda m: (_SEVERITY.get(m.severity, 3), _RULE.get(m.rule, 99)))


def _runs(runs: Sequence[RunData]) -> list[list[Recommendation]]:
    return [read_recommendations(r.path) for r in runs]


def variant_recommendations(groups: Sequence[Group]) -> dict[str, list[VariantRecommendation]]:
    """Every group's merged recommendations, by group name (the comparison's variants)."""
    return {g.name: merge(_runs(g.runs), [r.repeat for r in g.runs]) for g in groups}
