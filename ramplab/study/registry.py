"""The study analyses by name, loaded on use: a campaign's ``study:`` names one of them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ramplab.errors import UsageError
from ramplab.study.result import StudyResult

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["STUDIES", "analyse", "check_study"]

Analysis = Callable[[Path, "Manifest"], StudyResult]

# name -> "module:function"; loaded on use, so validating a campaign imports no analysis.
STUDIES: dict[str, str] = {
    "chunking": "ramplab.study.chunking.analysis:analyse",
    "decay": "ramplab.study.decay.analysis:analyse",
    "decomposition": "ramplab.study.decomposition.analysis:analyse",
    "inflation": "ramplab.study.inflation.analysis:analyse",
    "retries": "ramplab.study.retries.analysis:analyse",
    "needle": "ramplab.study.needle.analysis:analyse",
}


def check_study(name: object, field: str = "study") -> str:
    """``name`` when it is a registered analysis; ``UsageError`` naming ``field`` otherwise."""
    if not isinstance(name, str) or name not in STUDIES:
        known = ", ".join(sorted(STUDIES)) or "none yet"
        raise UsageError(field, f"{name!r} is not a study analysis (known: {known})")
    return name


def analyse(name: str, directory: Path, manifest: Manifest) -> StudyResult:
    """Run the analysis ``name`` on an experiment directory."""
    module, _, function = STUDIES[check_study(name)].partition(":")
    analysis: Analysis = getattr(importlib.import_module(module), function)
    return analysis(directory, manifest)
