"""The §3.3 inflation study's figures on hand-made samples."""

from __future__ import annotations

import math

import pytest

from ramplab.campaign.studies import STUDIES
from ramplab.study.inflation.analysis import Sample, VariantFigures, difference, study_result


def figures(variant: str, tokens: Sample, ttft: Sample, rules: list[str]) -> VariantFigures:
    return VariantFigures(variant, rules, "cl100k_base", 2.0, tokens, ttft, None, None, 0)


def test_sample_and_welch_interval() -> None:
    s = Sample.of([1.0, 2.0, 3.0, 4.0])
    assert s is not None
    assert (s.mean, s.n) == (2.5, 4)
    assert s.sd == pytest.approx(math.sqrt(5 / 3))
    assert Sample.of([]) is None
    diff, half = difference(Sample(10.0, 3.0, 9), Sample(4.0, 4.0, 16))
    assert diff == 6.0
    assert half == pytest.approx(1.959964 * math.sqrt(9 / 9 + 16 / 16))


def test_saved_ttft_is_compared_with_the_prefill_model() -> None:
    raw = figures("raw", Sample(100.0, 10.0, 50), Sample(230.0, 8.0, 50), [])
    norm = figures("normalised", Sample(75.0, 8.0, 50), Sample(181.0, 8.0, 50), ["markdown"])
    result = study_result([raw, norm], "raw")
    entry = result.data["variants"][1]
    assert entry["saved_tokens"] == 25.0
    assert entry["saved_tokens_pct"] == 25.0
    assert entry["saved_ttft_ms"] == 49.0
    assert entry["expected_saved_ttft_ms"] == 50.0  # 25 tokens × 2 ms
    assert "within its interval" in result.conclusions[0]
    assert [row[0] for row in result.tables[1].rows] == ["normalised"]


def test_too_few_requests_give_no_comparison() -> None:
    raw = figures("raw", Sample(100.0, 0.0, 1), Sample(230.0, 0.0, 1), [])
    norm = figures("normalised", Sample(75.0, 8.0, 50), Sample(181.0, 8.0, 50), [])
    assert study_result([raw, norm], "raw").conclusions == []


def test_the_study_is_registered() -> None:
    assert STUDIES["inflation"] == "ramplab.study.inflation.analysis:analyse"
