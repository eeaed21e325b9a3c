"""An experiment's ``report.md``: readable on its own, in a terminal or a pull request.

Order: what the experiment was; the variants and what each changed; the study's conclusions
(when the campaign named a study: the answer to its question comes first); each variant's
recommendations; the comparison with its deltas and noise, and the ``fail_if`` verdicts; where
the time goes, variant by variant; the run order and how each run ended. The overlaid charts are
in ``report.html`` beside it; every run's own report is in its directory.
"""

from __future__ import annotations

from collections.abc import Sequence

from ramplab.experiment.overview import (
    Overview,
    facts,
    nothing_compared,
    order_table,
    phases_side_by_side,
    variants_table,
)
from ramplab.experiment.render import (
    LEGEND,
    condition_lines,
    markdown_table,
    recommendation_line,
)
from ramplab.experiment.study_result import StudyResult
from ramplab.report.markdown import markdown_table as plain_table
from ramplab.report.tables import Table

__all__ = ["render_markdown"]

PHASES_INTRO = (
    "Mean ms per segment of each variant's median requests (TTLT p45–p55) and slowest 1 % "
    "(≥ p99), over the measured requests of all its finished runs pooled. Server phases lie "
    "inside the client's wait + stream (the join rule: docs/report.md)."
)


def _table(table: Table) -> list[str]:
    headers, body = table
    return [plain_table(headers, body), ""] if body else []


def _study(study: StudyResult) -> list[str]:
    parts = [f"## Study: {study.title}", ""]
    parts += [f"- {c}" for c in study.conclusions] or ["- (no conclusion could be computed)"]
    for table in study.tables:
        parts += ["", table.markdown()]
    if study.notes:
        parts += ["", "Notes:", *[f"- {n}" for n in study.notes]]
    if study.charts:
        parts += ["", f"Its {len(study.charts)} chart(s) are in report.html."]
    return [*parts, ""]


def _recommendations(overview: Overview) -> list[str]:
    parts = ["## Recommendations", ""]
    parts += [
        "Each variant's rules (docs/report.md), merged over its finished runs: a rule that fired "
        "in some repeats only says in which; the sentence is the repeat where its figure was "
        "worst.",
        "",
    ]
    for name, items in overview.advice.items():
        parts += [f"### {name}", ""]
        lines = [f"- {recommendation_line(r, lambda rule: f'`{rule}`')}" for r in items]
        parts += [*(lines or ["No rule fired: nothing measured crossed a threshold."]), ""]
    return parts


def _comparison(overview: Overview) -> list[str]:
    comparison = overview.comparison
    assert comparison is not None
    parts = [f"## Comparison (baseline: {comparison.baseline})", ""]
    if comparison.notes:
        parts += [*(f"- {n}" for n in comparison.notes), ""]
    parts += [*markdown_table(comparison), "", LEGEND, ""]
    if comparison.conditions:
        parts += ["### fail_if", "", *(f"    {line}" for line in condition_lines(comparison))]
        parts.append("")
    return parts


def render_markdown(overview: Overview, notes: Sequence[str] = ()) -> str:
    manifest = overview.manifest
    parts = [f"# ramplab experiment `{manifest.name}`", ""]
    if manifest.command:
        parts += ["Command:", "", "```", manifest.command, "```", ""]
    parts += [f"- {k}: `{v}`" for k, v in facts(manifest)]
    parts += [f"- note: {n}" for n in (*overview.notes, *notes)]
    parts += ["", "## Variants", "", *_table(variants_table(manifest))]
    parts.append("`*` the baseline every delta is measured against.\n")
    if overview.study is not None:
        parts += _study(overview.study)
    if overview.comparison is None:
        parts += [nothing_compared(manifest), ""]
    else:
        parts += _recommendations(overview)
        parts += _comparison(overview)
        phases = phases_side_by_side(overview)
        if phases[1]:
            parts += ["## Where the time goes, per variant", "", PHASES_INTRO, ""]
            parts += _table(phases)
    parts += ["## Run order", "", *_table(order_table(manifest))]
    parts += [
        "Definitions: docs/metrics.md; the report: docs/report.md. `comparison.json` holds the "
        "comparison and each variant's recommendations; each run directory its own report.",
        "",
    ]
    return "\n".join(parts)
