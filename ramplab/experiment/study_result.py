"""What a study analysis produces: tables, charts and conclusions that cite their figures.

``study.json`` is ``StudyResult.to_json()``: the tables, the conclusions, the plotly figures as
JSON and ``data`` — the computed figures a test or a later tool reads (a knee's rate and
interval, a fit's parameters). ``study.md`` is the same for a reader without a browser.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ramplab.runs.rundir import ExperimentDir

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["STUDY_JSON", "STUDY_MD", "StudyAnalysis", "StudyResult", "StudyTable"]

STUDY_JSON = ExperimentDir.STUDY_JSON
STUDY_MD = ExperimentDir.STUDY_MD
Cell = str | int | float | None


@dataclass(frozen=True, slots=True)
class StudyTable:
    """One table of the study, with the units in its headers."""

    title: str
    headers: list[str]
    rows: list[list[Cell]]

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.headers) + " |"]
        lines.append("|" + "---|" * len(self.headers))
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class StudyResult:
    """An analysis of one experiment: what the study's section asks for, filled."""

    study: str  # the registry name, e.g. "decay"
    title: str  # e.g. "§4.2 Token-rate decay 1 → 100 QPS"
    conclusions: list[str]  # each sentence cites the figure and the method behind it
    tables: list[StudyTable] = field(default_factory=list)
    charts: list[dict[str, Any]] = field(default_factory=list)  # plotly figures, to_plotly_json
    data: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what could not be computed, and why

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def markdown(self) -> str:
        parts = [f"## {self.title}", ""]
        parts += [f"- {c}" for c in self.conclusions] or ["- (no conclusion could be computed)"]
        for table in self.tables:
            parts += ["", table.markdown()]
        if self.notes:
            parts += ["", "Notes:", *[f"- {n}" for n in self.notes]]
        return "\n".join(parts) + "\n"

    def write(self, directory: Path) -> Path:
        """``study.json`` (atomically) and ``study.md`` in ``directory``; returns the JSON path."""
        path = directory / STUDY_JSON
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, default=float) + "\n", "utf-8")
        os.replace(tmp, path)
        (directory / STUDY_MD).write_text(self.markdown(), encoding="utf-8")
        return path

    @classmethod
    def read(cls, directory: Path) -> StudyResult:
        data = json.loads((directory / STUDY_JSON).read_text(encoding="utf-8"))
        data["tables"] = [StudyTable(**t) for t in data.get("tables", [])]
        return cls(**data)


def _cell(value: Cell) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# A campaign's study analysis by name (``ramplab.study.registry.analyse``), passed in by the CLI:
# the analyses read experiments, so the experiment layer cannot import them.
StudyAnalysis = Callable[[str, Path, "Manifest"], StudyResult]
