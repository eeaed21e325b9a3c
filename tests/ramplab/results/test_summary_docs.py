"""Every field of the summary's types is documented in docs/summary.md, and nothing else is."""

from __future__ import annotations

import re

from pydantic import BaseModel

from ramplab.results.summary import (
    ClockOffset,
    GateVerdict,
    OutageSummary,
    Percentiles,
    RunSummary,
    SessionsSummary,
    StepStats,
    TurnStats,
    WorkerCounts,
    WorkerHealth,
)
from tests.support.processes import REPO

TYPES: tuple[type[BaseModel], ...] = (
    RunSummary,
    StepStats,
    Percentiles,
    WorkerCounts,
    OutageSummary,
    GateVerdict,
    SessionsSummary,
    TurnStats,
    ClockOffset,
    WorkerHealth,
)


def documented() -> set[str]:
    text = (REPO / "docs" / "summary.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(\w+)` \|", text, flags=re.MULTILINE))


def test_every_field_of_the_summary_types_is_documented() -> None:
    fields = {name for model in TYPES for name in model.model_fields}
    assert fields - documented() == set()


def test_the_documentation_names_no_field_that_does_not_exist() -> None:
    fields = {name for model in TYPES for name in model.model_fields}
    assert documented() - fields == set()
