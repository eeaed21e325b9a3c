"""The study layer's own parts: results round-trip, and a campaign naming an unknown study."""

from __future__ import annotations

from pathlib import Path

import pytest

from ramplab.campaign.studies import STUDIES, check_study
from ramplab.errors import UsageError
from ramplab.experiment.study_result import StudyResult, StudyTable


def test_a_result_round_trips_through_study_json_and_reads_as_markdown(tmp_path: Path) -> None:
    result = StudyResult(
        study="decay",
        title="§4.2 Token-rate decay",
        conclusions=["the knee is at 20 QPS (piecewise-linear fit, 95 % CI 18–22)"],
        tables=[
            StudyTable("tokens/s per stream", ["offered QPS", "tokens/s"], [[1, 99.5], [2, None]])
        ],
        data={"knee_qps": 20.0},
        notes=["step 7 had no record"],
    )
    result.write(tmp_path)
    assert StudyResult.read(tmp_path) == result
    text = (tmp_path / "study.md").read_text()
    assert "## §4.2 Token-rate decay" in text
    assert "| 1 | 99.5 |" in text
    assert "| 2 | - |" in text
    assert "step 7 had no record" in text


def test_an_unknown_study_is_refused_naming_the_field() -> None:
    with pytest.raises(UsageError, match=r"^study: 'nope' is not a study analysis"):
        check_study("nope")
    for name in STUDIES:
        assert check_study(name) == name
