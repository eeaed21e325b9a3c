"""A real distributed ramp: the master's live figures (``progress.json``'s ``live``, merged from
the workers' sketches) are within the sketch's 1 % of the exact figures of the records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ramplab.measure.record import RequestRecord
from ramplab.metrics.live import QUANTILES
from ramplab.metrics.sketch import ALPHA
from ramplab.records.files import RecordFiles
from tests.support.processes import TargetProcess
from tests.support.ramp_runs import run_ramp
from tests.support.targets import SharedTarget


@pytest.fixture
def target(shared_target: SharedTarget) -> TargetProcess:
    return shared_target.reset()


def values(records: list[RequestRecord], figure: str) -> list[float]:
    if figure == "itl_ms":
        return [g for r in records for g in r.measured_itl()]
    return [v for r in records if (v := getattr(r, figure)) is not None]


def test_live_figures_match_the_records_within_the_stated_error(
    target: TargetProcess, tmp_path: Path
) -> None:
    progress = tmp_path / "progress.json"
    run = run_ramp(tmp_path, target.url,
                   ["--ramplab-shape", "4,8@4s/0s", "--ramplab-progress-file", str(progress)],
                   workers=2)  # fmt: skip
    assert run.returncode == 0, run.logs
    live = json.loads(progress.read_text())["live"]
    records = [r for r in RecordFiles.in_dir(run.out).records() if r.ok and r.step is not None]
    assert live.keys() == {str(step) for step in {r.step for r in records}}
    for step, figures in live.items():
        mine = [r for r in records if r.step == int(step)]
        for figure, shown in figures.items():
            ordered = np.sort(values(mine, figure))
            assert shown["count"] == len(ordered), (step, figure)
            for key, q in QUANTILES.items():
                exact = float(ordered[math.floor(q * (len(ordered) - 1))])
                assert abs(shown[key] - exact) <= ALPHA * exact + 1e-9, (step, figure, key)
