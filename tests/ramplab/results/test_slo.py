from __future__ import annotations

import io

import pytest
from rich.console import Console

from ramplab.errors import GateError, UsageError
from ramplab.measure.record import RequestRecord
from ramplab.results.slo import (
    RequestSlo,
    evaluate_gates,
    gates_table,
    parse_gate,
    parse_gates,
    parse_request_slo,
    print_gates,
)

SUMMARY = {
    "error_ratio": 0.004,
    "goodput_ratio": 0.97,
    "ttft_ms": {"p50": 120.0, "p90": 400.0, "p99": 750.0},
    "itl_ms": {"p50": None, "p90": None, "p99": None},
    "requests": 1000,
    "steps": [
        {"achieved_qps": 1.0, "drop_ratio": 0.0, "label": "a"},
        {"achieved_qps": 50.0, "drop_ratio": 0.0, "label": "b"},
        {"achieved_qps": 96.5, "drop_ratio": 0.02, "label": "c"},
    ],
}


def record(
    ok: bool = True, ttft: float | None = 100, tpot: float | None = 10, ttlt: float | None = 1000
) -> RequestRecord:
    return RequestRecord(
        "r",
        "w",
        0.0,
        0.0,
        ok,
        200 if ok else 503,
        None if ok else "http_status",
        ttft_ms=ttft,
        tpot_ms=tpot,
        ttlt_ms=ttlt,
    )


# --- per-request SLOs ---------------------------------------------------------------------


def test_request_slo_sets_slo_ok() -> None:
    slo = RequestSlo(ttft_ms=200, tpot_ms=20, ttlt_ms=2000)
    records = [
        record(),
        record(ttft=200),  # the bound itself is met (<=)
        record(ttft=201),
        record(tpot=25),
        record(ttlt=2500),
        record(ok=False),
        record(ttft=None),  # cannot show TTFT was met
        record(tpot=None),  # a one-token answer has no TPOT
    ]
    slo.apply(records)
    assert [r.slo_ok for r in records] == [True, True, False, False, False, False, False, True]


def test_empty_slo_leaves_slo_ok_unset() -> None:
    records = [record(), record(ok=False)]
    RequestSlo().apply(records)
    assert [r.slo_ok for r in records] == [None, None]


def test_parse_request_slo_forms() -> None:
    assert parse_request_slo("ttft_ms<=800, tpot_ms<=50") == RequestSlo(800, 50, None)
    assert parse_request_slo({"ttlt_ms": 3000}) == RequestSlo(ttlt_ms=3000)
    assert parse_request_slo(None) == RequestSlo()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("ttft_ms<800", "slo"),
        ("latency<=5", "slo.latency"),
        ({"ttft_ms": "fast"}, "slo.ttft_ms"),
        ({"ttft_ms": -1}, "slo.ttft_ms"),
        ({"tpot_ms": True}, "slo.tpot_ms"),
        (7, "slo"),
    ],
)
def test_request_slo_errors_name_the_field(spec: object, field: str) -> None:
    with pytest.raises(GateError) as info:
        parse_request_slo(spec)  # type: ignore[arg-type]
    assert info.value.field == field


# --- gates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "status", "observed"),
    [
        ("ttft_ms.p99 < 800", "pass", [750.0]),
        ("ttft_ms.p99 < 750", "fail", [750.0]),
        ("ttft_ms.p99 <= 750", "pass", [750.0]),
        ("error_ratio < 0.01", "pass", [0.004]),
        ("goodput_ratio > 0.95", "pass", [0.97]),
        ("goodput_ratio >= 0.99", "fail", [0.97]),
        ("requests == 1000", "pass", [1000]),
        ("requests != 1000", "fail", [1000]),
        ("steps[-1].achieved_qps >= 95", "pass", [96.5]),
        ("steps[0].achieved_qps >= 95", "fail", [1.0]),
        ("steps[*].drop_ratio <= 0.01", "fail", [0.0, 0.0, 0.02]),
        ("steps[*].drop_ratio <= 0.05", "pass", [0.0, 0.0, 0.02]),
        ("itl_ms.p99 < 100", "fail", [None]),  # no data is not a pass
        ("ttft_ms.p95 < 800", "invalid", []),
        ("steps[3].achieved_qps > 1", "invalid", []),
        ("error_ratio.p99 < 1", "invalid", []),
        ("steps.achieved_qps > 1", "invalid", []),
        ("steps[*].label > 1", "invalid", ["a", "b", "c"]),
    ],
)
def test_gate_evaluation(text: str, status: str, observed: list[object]) -> None:
    (result,) = evaluate_gates([parse_gate(text)], SUMMARY)
    assert result.status == status, result.detail
    assert [v for _, v in result.observed] == observed


def test_all_steps_failure_names_the_failing_step() -> None:
    (result,) = evaluate_gates([parse_gate("steps[*].drop_ratio <= 0.01")], SUMMARY)
    assert result.detail == "steps[2].drop_ratio = 0.02"
    assert [p for p, _ in result.observed] == [f"steps[{i}].drop_ratio" for i in range(3)]


@pytest.mark.parametrize(
    "text",
    [
        "ttft_ms.p99",
        "ttft_ms.p99 <",
        "< 800",
        "ttft_ms.p99 =< 800",
        "ttft_ms.p99 < fast",
        "ttft_ms..p99 < 1",
        "steps[x].a < 1",
        "1abc < 2",
        "ttft_ms.p99 < nan",
        "",
    ],
)
def test_gate_parse_errors(text: str) -> None:
    with pytest.raises(GateError) as info:
        parse_gate(text)
    assert info.value.field == "gates"
    assert isinstance(info.value, UsageError)


def test_parse_gates_names_the_index() -> None:
    with pytest.raises(GateError) as info:
        parse_gates(["error_ratio < 0.01", "bogus"])
    assert info.value.field == "gates[1]"
    assert "'bogus'" in str(info.value)


def test_parsed_gate_structure() -> None:
    gate = parse_gate("  steps[-1].ttft_ms.p99   >=  1e3 ")
    assert gate.text == "steps[-1].ttft_ms.p99   >=  1e3"
    assert [(s.name, s.index) for s in gate.path] == [
        ("steps", -1),
        ("ttft_ms", None),
        ("p99", None),
    ]
    assert gate.op == ">="
    assert gate.threshold == 1000.0


# --- exit codes ---------------------------------------------------------------------------


def test_verdicts_pass_fail_invalid() -> None:
    # How the verdicts decide the exit code: tests/ramplab/results/test_exit_code.py.
    passing = evaluate_gates(parse_gates(["error_ratio < 0.01"]), SUMMARY)
    missed = evaluate_gates(parse_gates(["error_ratio < 0.01", "ttft_ms.p99 < 100"]), SUMMARY)
    typo = evaluate_gates(parse_gates(["ttft_ms.p99 < 100", "eror_ratio < 1"]), SUMMARY)
    assert all(v.passed for v in passing)
    assert [v.status for v in missed] == ["pass", "fail"]
    assert [v.status for v in typo] == ["fail", "invalid"]
    assert evaluate_gates([], SUMMARY) == ()


def test_table_rendering_shows_each_gate_and_its_result() -> None:
    report = evaluate_gates(
        parse_gates(["error_ratio < 0.01", "ttft_ms.p99 < 100", "nope < 1"]), SUMMARY
    )
    assert gates_table(report).row_count == 3
    out = io.StringIO()
    print_gates(report, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "error_ratio < 0.01" in text
    assert "PASS" in text
    assert "FAIL" in text
    assert "INVALID" in text
    assert "no metric 'nope'" in text
