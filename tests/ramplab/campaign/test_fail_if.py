"""``--fail-if`` conditions: parsing (each error names its position) and evaluation."""

from __future__ import annotations

import pytest

from ramplab.campaign.fail_if import parse_condition, parse_conditions
from ramplab.errors import UsageError


@pytest.mark.parametrize(
    ("text", "step", "key", "limit"),
    [
        ("ttft_ms.p99 > 1.1 * baseline", None, "ttft_ms.p99", 110.0),
        ("steps[*].goodput_qps < baseline - 2 * noise", "*", "goodput_qps", 96.0),
        ("steps[-1].error_ratio >= 0.01", -1, "error_ratio", 0.01),
        ("achieved_qps<(baseline+noise)/2", None, "achieved_qps", 51.0),
        ("ttlt_ms.p50 != -baseline", None, "ttlt_ms.p50", -100.0),
    ],
)
def test_parse(text: str, step: object, key: str, limit: float) -> None:
    c = parse_condition(text)
    assert (c.step, c.key) == (step, key)
    assert c.threshold({"baseline": 100.0, "noise": 2.0}) == pytest.approx(limit)


def test_evaluate_and_no_data() -> None:
    c = parse_condition("ttft_ms.p99 > 1.1 * baseline")
    assert c.holds(111.0, {"baseline": 100.0, "noise": None}) is True
    assert c.holds(109.0, {"baseline": 100.0, "noise": None}) is False
    assert c.holds(None, {"baseline": 100.0}) is None
    assert c.holds(1.0, {"baseline": None}) is None
    noisy = parse_condition("ttft_ms.p99 > baseline + noise")
    assert noisy.holds(111.0, {"baseline": 100.0, "noise": None}) is None  # unknown noise
    assert parse_condition("x > 1 / baseline").holds(1.0, {"baseline": 0.0}) is None


@pytest.mark.parametrize(
    "text",
    [
        "ttft_ms.p99",
        "ttft_ms.p99 >> 2",
        "> 2",
        "ttft_ms..p99 > 2",
        "steps.ttft_ms > 2",
        "steps[x].ttft_ms > 2",
        "ttft_ms.p99 > baseline ** 2",
        "ttft_ms.p99 > __import__('os')",
        "ttft_ms.p99 > ceiling",
        "ttft_ms.p99 > 'a'",
        "ttft_ms.p99 > True",
        "ttft_ms.p99 > (1",
        "ttft_ms.p99 > 1 if baseline else 2",
    ],
)
def test_bad_conditions_are_usage_errors_naming_their_position(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_conditions(["error_ratio < 1", text])
    assert info.value.field == "--fail-if[1]"
    assert "Traceback" not in str(info.value)
