"""Think-time specs: parsing, the errors that name the field, and seeded draws."""

from __future__ import annotations

import random
import statistics

import pytest

from ramplab.errors import UsageError
from ramplab.load.think import ThinkTime, parse_think_time


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("0", ThinkTime("constant", 0.0)),
        (2.5, ThinkTime("constant", 2.5)),
        ("exponential:2", ThinkTime("exponential", 2.0)),
        ("Uniform:1-3", ThinkTime("uniform", 2.0, 1.0, 3.0)),
    ],
)
def test_specs_parse(spec: str | float, expected: ThinkTime) -> None:
    assert parse_think_time(spec) == expected


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("-1", "≥ 0"),
        ("soon", "not a number"),
        ("normal:2", "unknown think-time distribution"),
        ("uniform:3", "LOW-HIGH"),
        ("uniform:3-1", "LOW ≤ HIGH"),
        ("exponential:inf", "finite"),
    ],
)
def test_bad_specs_name_the_field(spec: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        parse_think_time(spec, "workload.sessions.think_time")
    assert caught.value.field == "workload.sessions.think_time"


def test_draws_are_reproducible_and_have_the_stated_mean() -> None:
    think = parse_think_time("exponential:2")
    first = [think.draw(random.Random(5)) for _ in range(3)]
    assert first == [think.draw(random.Random(5)) for _ in range(3)]
    rng = random.Random(1)
    draws = [think.draw(rng) for _ in range(20_000)]
    # Standard error of the mean: 2 / sqrt(20000) = 0.014; 5 of them is 0.07.
    assert statistics.fmean(draws) == pytest.approx(2.0, abs=0.07)
    uniform = parse_think_time("uniform:1-3")
    assert all(1.0 <= uniform.draw(rng) <= 3.0 for _ in range(1000))
    assert parse_think_time("1.5").draw(rng) == 1.5
