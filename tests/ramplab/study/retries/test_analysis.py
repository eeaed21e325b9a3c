"""The retries analysis on a hand-made run whose figures are known: 200 requests against
p = 0.5 with at most 3 attempts, written exactly as the geometric model expects them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
import yaml

from ramplab.campaign.studies import STUDIES
from ramplab.load.shapes import parse_shape
from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.results.producer import RunFacts, summarize
from ramplab.results.slo import RequestSlo
from ramplab.study.registry import analyse
from ramplab.study.retries.cells import policy_label, scenario_of

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

START = 1_800_000_000.0
RETRY = {"policy": "exponential", "base_s": 0.1, "cap_s": 2, "max_attempts": 3, "retry_on": [429]}
CAMPAIGN = {
    "name": "retries",
    "seed": 1,
    "shape": "20@10s/0s",
    "retry": RETRY,
    "slo": {"ttft_ms": 1000},
    "target": {"settings": {"faults": {"ratio_429": 0.5, "retry_after_s": 0.5}}},
}


def _record(i: int, attempts: int, ok: bool) -> RequestRecord:
    t = START + i / 20
    log, at, wait = [], t, 0.0
    for n in range(1, attempts + 1):
        last_ok = ok and n == attempts
        status, kind = (200, None) if last_ok else (429, "http_status")
        took, asked = (50.0, None) if last_ok else (5.0, 0.5)
        log.append(AttemptRecord(n, at, status, kind, took, asked, wait))
        wait = 100.0 * 2 ** (n - 1)
        at += 0.005 + wait / 1000
    ttft = (log[-1].start - t) * 1000 + 50.0 if ok else None
    return RequestRecord(
        request_id=f"r{i}", worker="w", intended_start=t, actual_start=t, ok=ok,
        status=200 if ok else 429, error_kind=None if ok else "http_status", step=0,
        target_qps=20.0, arrival=i, attempts=attempts, attempt_log=log, ttft_ms=ttft,
        server_timing_ms={"prefill": 20.0, "decode": 80.0} if ok else {},
    )  # fmt: skip


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    # K = 1, 2, 3 for ½, ¼, ¼ of the requests, half of the third attempts refused: A = 1.75,
    # S = 0.875 exactly — the model's figures for p = 0.5, n = 3.
    kinds = [(1, True)] * 100 + [(2, True)] * 50 + [(3, True)] * 25 + [(3, False)] * 25
    records = [_record(i, a, ok) for i, (a, ok) in enumerate(kinds)]
    shape = parse_shape("20@10s/0s")
    facts = RunFacts(shape=shape, run_start=START, mode="open", retry=RETRY,
                     slo=RequestSlo(ttft_ms=1000), scheduled=[200])  # fmt: skip
    summary = summarize(records, facts).to_json()
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(CAMPAIGN))
    lines = [json.dumps(r.to_dict()) + "\n" for r in records]
    (tmp_path / "requests.jsonl").write_text("".join(lines))
    return tmp_path


def test_the_study_is_registered() -> None:
    assert STUDIES["retries"] == "ramplab.study.retries.analysis:analyse"


def test_a_known_run_gives_the_models_own_figures(run_dir: Path) -> None:
    result = analyse("retries", run_dir, cast("Manifest", None))
    (cell,) = result.data["cells"]
    assert cell["scenario"] == "random_429"
    assert cell["policy"] == "exponential"
    assert cell["measured"]["retry_amplification"] == pytest.approx(1.75)
    assert cell["measured"]["success_ratio"] == pytest.approx(0.875)
    assert cell["measured"]["p_first"] == pytest.approx(0.5)
    assert cell["model"]["amplification"] == pytest.approx(1.75)
    assert cell["model"]["success"] == pytest.approx(0.875)
    assert "within" in cell["explanation"]
    assert result.data["fit"] == {"cells": 1, "amplification_within_error": 1}
    assert result.data["best"]["random_429"]["policy"] == "exponential"
    assert any("best goodput with exponential" in c for c in result.conclusions)
    (table,) = result.tables
    assert table.rows[0][:3] == ["random_429", "exponential", 200]
    assert len(result.charts) == 3  # goodput, amplification, success; no outage, no recovery
    result.write(run_dir)
    assert "| random_429 | exponential | 200 |" in (run_dir / "study.md").read_text()


@pytest.mark.parametrize(
    ("retry", "label"),
    [
        ("none", "none"),
        ({"policy": "exponential", "jitter": "decorrelated"}, "decorrelated_jitter"),
        ({"policy": "retry_after"}, "retry_after"),
        (
            {"policy": "exponential", "jitter": "full", "budget": {"ratio": 0.2}},
            "full_jitter+budget",
        ),
        ({"policy": "fixed", "throttle": True}, "fixed+throttle"),
    ],
)
def test_policy_labels(retry: object, label: str) -> None:
    assert policy_label(retry) == label  # type: ignore[arg-type]


def faults(**given: float) -> dict[str, object]:
    return {"target": {"settings": {"faults": given}}}


def test_scenarios_are_read_from_the_campaign() -> None:
    assert scenario_of({"outage": "3s+2s"}) == "outage"
    assert scenario_of(faults(shed_waiting_above=2)) == "shed"
    assert scenario_of(faults(ratio_429=0.1)) == "random_429"
    assert scenario_of(faults(ratio_503=0.1)) == "random_503"
    assert scenario_of({}) == "no_faults"
