"""What an experiment's report shows, gathered once for ``report.md`` and ``report.html``.

The manifest (what ran, in which order, how each run ended), the comparison of the finished
runs, each variant's recommendations merged over its repeats, the finished runs themselves as
labelled runs for the overlaid charts (each variant one colour, its repeats sharing it), and the
study's result when the campaign named one. The tables both renderings share are built here
from those, as plain cells (``-`` for what was not measured, as in ``results.tables``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ramplab.experiment.compare import Comparison
from ramplab.experiment.recommendations import variant_recommendations
from ramplab.experiment.render import Advice
from ramplab.experiment.study_result import STUDY_JSON, StudyResult
from ramplab.report.charts import PALETTE, LabelledRun
from ramplab.report.tables import Table, phase_table
from ramplab.results.breakdown import PhaseBreakdown, breakdowns
from ramplab.results.summary import RunSummary
from ramplab.runs.manifest import Manifest

__all__ = [
    "Overview",
    "facts",
    "gather",
    "nothing_compared",
    "order_table",
    "phases_side_by_side",
    "variants_table",
]


@dataclass(frozen=True)
class Overview:
    """Everything the experiment's report draws; ``comparison`` is ``None`` when no run
    finished (then ``runs`` and ``advice`` are empty)."""

    directory: Path
    manifest: Manifest
    comparison: Comparison | None
    runs: tuple[LabelledRun, ...]
    variant_of: tuple[str, ...]  # runs[i]'s variant
    advice: Advice
    study: StudyResult | None
    notes: tuple[str, ...]


def _label(variant: str, repeat: int | None, count: int) -> str:
    return variant if count == 1 or repeat is None else f"{variant} r{repeat}"


def gather(
    directory: Path,
    manifest: Manifest,
    comparison: Comparison | None,
    advice: Advice | None = None,
) -> Overview:
    """Load the finished runs' digests (one pass over each run's records), the
    recommendations (unless given) and ``study.json`` when there is one."""
    notes: list[str] = []
    runs: list[LabelledRun] = []
    variant_of: list[str] = []
    groups = comparison.groups if comparison is not None else ()
    for i, group in enumerate(groups):
        for run in group.runs:
            summary = RunSummary.from_json(run.summary)
            label = _label(group.name, run.repeat, len(group.runs))
            colour = PALETTE[i % len(PALETTE)]
            runs.append(LabelledRun.load(run.path, label, summary, colour, group.name))
            variant_of.append(group.name)
    if advice is None:
        advice = variant_recommendations(groups)
    study = None
    if (directory / STUDY_JSON).is_file():
        try:
            study = StudyResult.read(directory)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            notes.append(f"{STUDY_JSON} could not be read ({exc!r}): no study section")
    return Overview(
        directory, manifest, comparison, tuple(runs), tuple(variant_of), advice, study,
        tuple(notes),
    )  # fmt: skip


def facts(manifest: Manifest) -> list[tuple[str, str]]:
    """(name, value) of what the experiment was, only those known."""
    finished = len(manifest.finished_runs())
    pairs: list[tuple[str, Any]] = [
        ("campaign", manifest.campaign),
        ("status", manifest.status),
        ("exit code", manifest.exit_code),
        ("started", manifest.started),
        ("finished", manifest.finished),
        ("variants", len(manifest.variants)),
        ("repeats", manifest.repeat),
        ("runs finished", f"{finished} of {len(manifest.runs)}"),
        ("order", manifest.order),
        ("seed", manifest.seed),
        ("baseline", manifest.baseline),
        ("fail_if", "; ".join(manifest.fail_if) or None),
        ("study", manifest.study),
    ]
    return [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in pairs if v is not None]


def nothing_compared(manifest: Manifest) -> str:
    """What the report says in place of the comparison when there is none."""
    if not manifest.finished_runs():
        return "No run finished: nothing to compare or recommend."
    return "No comparison of the finished runs (the notes above say why)."


def _override(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))


def variants_table(manifest: Manifest) -> Table:
    """Each variant: its overrides of the base campaign and how many of its runs finished."""
    body = []
    for v in manifest.variants:
        runs = [r for r in manifest.runs if r.variant == v.name]
        done = [r for r in runs if r in manifest.finished_runs()]
        overrides = ", ".join(f"{k} = {_override(x)}" for k, x in v.overrides.items()) or "-"
        name = f"{v.name} *" if v.name == manifest.baseline else v.name
        body.append([name, overrides, f"{len(done)} of {len(runs)}"])
    return ["variant", "overrides of the base campaign", "runs finished"], body


def order_table(manifest: Manifest) -> Table:
    """The runs in the order they ran (or were to run), with how each ended."""
    headers = ["#", "run directory", "variant", "repeat", "seed", "status", "exit code",
               "started", "finished"]  # fmt: skip
    body = [
        [str(r.index), r.dir, r.variant, str(r.repeat), str(r.seed), r.status,
         "-" if r.exit_code is None else str(r.exit_code), r.started or "-", r.finished or "-"]
        for r in manifest.runs
    ]  # fmt: skip
    return headers, body


def _pooled_phases(runs: Sequence[LabelledRun]) -> Any:
    arrays = [r.digest.pooled("phases") for r in runs]
    return np.vstack(arrays) if arrays else np.empty((0, 0))


def phases_side_by_side(overview: Overview) -> Table:
    """The phase breakdown of every variant side by side: its median and slowest-1 % groups
    over the requests of all its finished runs pooled (``results.breakdown``'s groups and join
    rule), each column headed by the variant."""
    groups: list[PhaseBreakdown] = []
    owners: list[str] = []
    names = list(dict.fromkeys(overview.variant_of))
    for name in names:
        runs = [r for r, v in zip(overview.runs, overview.variant_of, strict=True) if v == name]
        found = breakdowns(_pooled_phases(runs))
        groups += found
        owners += [name] * len(found)
    if not groups:
        return [], []
    headers, body = phase_table(groups)
    for i, owner in enumerate(owners):
        headers[1 + 2 * i] = f"{owner} · {headers[1 + 2 * i]}"
    return headers, body
