"""The probe's sampling plan: both stated error rates hold exactly, and docs/cli.md shows the
operating characteristic the code computes."""

from __future__ import annotations

import re

import pytest
import yaml
from scipy import stats

from ramplab.campaign.search import SearchSpec
from ramplab.results.acceptance import (
    oc_markdown,
    operating_characteristic,
    pass_probability,
    plan,
    threshold,
)
from tests.support.processes import REPO


@pytest.mark.parametrize(
    ("goal", "tolerance", "confidence", "power"),
    [
        (0.9, 0.1, 0.95, 0.9),
        (0.95, 0.05, 0.95, 0.9),
        (0.99, 0.02, 0.9, 0.8),
        (0.5, 0.2, 0.99, 0.95),
    ],
)
def test_the_plan_keeps_both_error_rates(
    goal: float, tolerance: float, confidence: float, power: float
) -> None:
    chosen = plan(goal, tolerance, confidence, power)
    n, k = chosen.requests, chosen.needed
    assert stats.binom.sf(k - 1, n, goal) >= power  # at the goal: passes with the power
    assert stats.binom.sf(k - 1, n, goal - tolerance) <= 1 - confidence  # at the floor: rarely
    assert stats.binom.sf(k - 2, n, goal - tolerance) > 1 - confidence  # k is the smallest
    for smaller in range(1, n):  # and n the fewest arrivals that do it
        needed = threshold(smaller, goal - tolerance, confidence)
        assert needed > smaller or pass_probability(smaller, needed, goal) < power


def test_a_perfect_probe_is_not_the_only_way_to_pass() -> None:
    chosen = SearchSpec(goodput_min=90, tolerance_pct=10).plan()
    assert chosen.needed < chosen.requests
    assert threshold(35, 0.8, 0.95) <= 34  # the bug: 34/35 at a 90 % goal failed


def test_more_arrivals_never_need_a_smaller_share_than_the_floor() -> None:
    for n in (10, 35, 112, 500):
        assert threshold(n, 0.8, 0.95) / n > 0.8


def test_the_operating_characteristic_rises_with_the_attainment() -> None:
    chosen = plan(0.9, 0.1, 0.95, 0.9)
    probs = [p for _, p in operating_characteristic(chosen, [0.7, 0.8, 0.85, 0.9, 0.95, 1.0])]
    assert probs == sorted(probs)
    assert probs[-1] == 1.0


def _documented(name: str) -> str:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- oc:{name} -->\n(.*?)<!-- /oc -->", text, flags=re.DOTALL)
    assert found, f"docs/cli.md has no oc:{name} table"
    return found.group(1)


def test_docs_show_the_default_operating_characteristic() -> None:
    spec = SearchSpec(goodput_min=95)  # every other setting its default
    assert _documented("default") == oc_markdown(spec.plan())


def test_docs_show_the_shipped_campaigns_operating_characteristic() -> None:
    data = yaml.safe_load((REPO / "campaigns" / "search.yaml").read_text(encoding="utf-8"))
    spec = SearchSpec.model_validate(data["search"])
    assert _documented("shipped") == oc_markdown(spec.plan())
