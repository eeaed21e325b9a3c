"""What ``ramplab compare`` compares: run directories and experiment directories, as groups.

A run directory (``summary.json``, or records to rebuild it from) is a group of one
run named after the directory; an experiment directory (``experiment.json``) expands to its
variants, in the order the campaign declares them, each grouping its finished repeats. Names
that two arguments share are prefixed with their directory's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ramplab.errors import UsageError
from ramplab.runs.manifest import MANIFEST, Manifest
from ramplab.runs.rebuild import load_summary
from ramplab.runs.rundir import RunDir

__all__ = ["Group", "RunData", "expand", "read_summary"]

ARGUMENT = "RUN_OR_EXPERIMENT"


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run's ``summary.json`` as its JSON form (rebuilt from the records when missing):
    the one place the experiment layer reads a summary. The comparison addresses figures by
    their summary paths (``ttft_ms.p99``, ``steps[2].goodput_qps``), as gates do."""
    return load_summary(run_dir).to_json()


@dataclass(frozen=True, slots=True)
class RunData:
    """One run: its directory, its repeat number (``None`` outside an experiment), its summary."""

    path: Path
    repeat: int | None
    summary: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Group:
    """The runs of one variant (or one run directory), compared as one column."""

    name: str
    runs: tuple[RunData, ...]
    source: Path  # the argument it came from
    experiment: Manifest | None = None


def _experiment(directory: Path, notes: list[str]) -> list[Group]:
    manifest = Manifest.read(directory)
    groups = []
    for variant in manifest.variants:
        finished = [r for r in manifest.finished_runs() if r.variant == variant.name]
        runs = tuple(
            RunData(directory / r.dir, r.repeat, read_summary(directory / r.dir))
            for r in sorted(finished, key=lambda r: r.repeat)
        )
        others = [r for r in manifest.runs if r.variant == variant.name and r not in finished]
        if others:
            left = ", ".join(f"{r.dir} {r.status}" for r in others)
            notes.append(f"{variant.name}: not compared: {left}")
        if runs:
            groups.append(Group(variant.name, runs, directory, manifest))
    return groups


def expand(arguments: Sequence[Path], notes: list[str]) -> list[Group]:
    """The groups of every argument, in order; ``notes`` gets what was left out and why."""
    if not arguments:
        raise UsageError(ARGUMENT, "give at least one run or experiment directory")
    groups: list[Group] = []
    for path in arguments:
        if not path.is_dir():
            raise UsageError(ARGUMENT, f"{path} is not a directory")
        if (path / MANIFEST).is_file():
            found = _experiment(path, notes)
            if not found:
                notes.append(f"{path}: no finished run yet")
            groups += found
        elif (RunDir(path).summary).is_file() or RunDir(path).records.exist():
            groups.append(Group(path.name, (RunData(path, None, read_summary(path)),), path))
        else:
            raise UsageError(
                ARGUMENT, f"{path} is neither a run (summary.json) nor an experiment ({MANIFEST})"
            )
    return _unique(groups)


def _unique(groups: list[Group]) -> list[Group]:
    names = [g.name for g in groups]
    out: list[Group] = []
    for group in groups:
        name = group.name
        if names.count(name) > 1 and group.experiment is not None:
            name = f"{group.source.name}/{name}"
        while name in [g.name for g in out]:
            name += "'"
        out.append(Group(name, group.runs, group.source, group.experiment))
    return out
