"""The study analyses by name, loaded on use: a campaign's ``study:`` names one of them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from ramplab.campaign.studies import STUDIES, check_study
from ramplab.experiment.study_result import StudyResult
from ramplab.runs.manifest import Manifest

__all__ = ["analyse"]

Analysis = Callable[[Path, Manifest], StudyResult]


def analyse(name: str, directory: Path, manifest: Manifest) -> StudyResult:
    """Run the analysis ``name`` on an experiment directory."""
    module, _, function = STUDIES[check_study(name)].partition(":")
    analysis: Analysis = getattr(importlib.import_module(module), function)
    return analysis(directory, manifest)
