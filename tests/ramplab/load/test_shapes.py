from __future__ import annotations

import math

import numpy as np
import pytest

from ramplab.errors import ShapeError, UsageError
from ramplab.load.shapes import (
    Shape,
    Stage,
    parse_duration,
    parse_shape,
    shape_from_dict,
)


def test_stepped_cli_string_gives_held_stages_with_warmup() -> None:
    shape = parse_shape("1,2,5,10,20,50,100@30s/5s")
    assert [st.rate for st in shape.stages] == [1, 2, 5, 10, 20, 50, 100]
    assert [st.start_s for st in shape.stages] == [0, 30, 60, 90, 120, 150, 180]
    assert all(st.duration_s == 30 and st.warmup_s == 5 for st in shape.stages)
    assert shape.stages[3].measured_start_s == 95
    assert shape.stages[3].measured_s == 25
    assert shape.duration_s == 210
    assert shape.kind == "stepped"


def test_explicit_steps_kind_and_no_warmup() -> None:
    shape = parse_shape("steps:3,4@500ms")
    assert [(st.rate, st.duration_s, st.warmup_s) for st in shape.stages] == [
        (3, 0.5, 0),
        (4, 0.5, 0),
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30), ("30s", 30), ("500ms", 0.5), ("2m", 120), ("1h", 3600), ("1.5s", 1.5)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "f") == pytest.approx(seconds)


def test_linear_ramp_stages_use_the_mean_rate_and_keep_the_integral() -> None:
    shape = parse_shape("linear:0..100@10s,step=2s")
    assert [st.rate for st in shape.stages] == pytest.approx([10, 30, 50, 70, 90])
    assert shape.expected_arrivals == pytest.approx(0.5 * 100 * 10)


def test_exponential_ramp_integral_matches_the_continuous_ramp() -> None:
    shape = parse_shape("exp:1..100@60s,step=5s")
    g = math.log(100) / 60
    integral = (math.exp(g * 60) - 1) / g
    assert shape.expected_arrivals == pytest.approx(integral)
    rates = [st.rate for st in shape.stages]
    assert rates == sorted(rates)
    assert 1 < rates[0] < rates[-1] < 100


def test_ramp_with_non_multiple_duration_gets_a_shorter_last_stage() -> None:
    shape = parse_shape("linear:10..10@5s,step=2s,warmup=0.5s")
    assert [st.duration_s for st in shape.stages] == pytest.approx([2, 2, 1])
    assert all(st.warmup_s == 0.5 for st in shape.stages)
    assert shape.duration_s == pytest.approx(5)


def test_custom_list_cli() -> None:
    shape = parse_shape("custom:10@5s,20@10s/2s,0@30s")
    assert [(st.rate, st.duration_s, st.warmup_s) for st in shape.stages] == [
        (10, 5, 0),
        (20, 10, 2),
        (0, 30, 0),
    ]


def test_dict_forms_match_the_cli_forms() -> None:
    assert shape_from_dict(
        {"kind": "stepped", "rates": [1, 2, 5], "hold": "30s", "warmup": 5}
    ) == parse_shape("1,2,5@30s/5s")
    assert shape_from_dict(
        {"kind": "linear", "from": 1, "to": 9, "duration": "4s", "step": "2s"}
    ) == parse_shape("linear:1..9@4s,step=2s")
    assert shape_from_dict(
        {
            "kind": "custom",
            "stages": [{"rate": 1, "hold": 2}, {"rate": 3, "hold": "4s", "warmup": 1}],
        }
    ) == parse_shape("custom:1@2s,3@4s/1s")
    assert shape_from_dict("5@1s") == parse_shape("5@1s")


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("", "shape", "expected a shape"),
        ("1,2,x@30s", "shape.rates[2]", "'x'"),
        ("1,-2@30s", "shape.rates[1]", "≥ 0"),
        ("1,2@30q", "shape.hold", "'30q'"),
        ("1,2", "shape", "RATES@HOLD"),
        ("1,2@5s/5s", "rates[0].warmup", "shorter than the stage"),
        ("1@0s", "rates[0]", "≥ 1ms"),
        ("zigzag:1..2@3s", "shape.kind", "'zigzag'"),
        ("linear:1-100@60s", "shape", "FROM..TO"),
        ("linear:1..100@60s,stride=5s", "shape.stride", "stride=5s"),
        ("exp:0..100@60s", "shape.from", "> 0"),
        ("custom:10@5s,20", "shape.stages[1]", "rate@hold"),
    ],
)
def test_cli_errors_name_the_field_and_value(text: str, field: str, fragment: str) -> None:
    with pytest.raises(ShapeError) as info:
        parse_shape(text)
    assert info.value.field == field
    assert fragment in str(info.value)
    assert isinstance(info.value, UsageError)


@pytest.mark.parametrize(
    ("d", "field"),
    [
        ({"kind": "stepped", "hold": "1s"}, "shape.rates"),
        ({"kind": "stepped", "rates": [], "hold": "1s"}, "shape.rates"),
        ({"kind": "stepped", "rates": [1, True], "hold": "1s"}, "shape.rates[1]"),
        ({"kind": "stepped", "rates": [1], "hold": "1s", "hodl": 3}, "shape.hodl"),
        ({"kind": "linear", "from": 1, "duration": "1s"}, "shape.to"),
        ({"kind": "custom", "stages": [{"rate": 1}]}, "shape.stages[0].hold"),
        ({"kind": "custom", "stages": [5]}, "shape.stages[0]"),
        ({"kind": "custom", "stages": [{"rate": 1, "hold": "-1s"}]}, "shape.stages[0].hold"),
        ({"kind": "spiral"}, "shape.kind"),
    ],
)
def test_dict_errors_name_the_field(d: dict[str, object], field: str) -> None:
    with pytest.raises(ShapeError) as info:
        shape_from_dict(d)
    assert info.value.field == field


def test_stage_lookup_scalar_and_vectorised() -> None:
    shape = parse_shape("custom:1@10s,2@5s,3@1s")
    assert shape.stage_at(0) == shape.stages[0]
    assert shape.stage_at(9.999) == shape.stages[0]
    assert shape.stage_at(10) == shape.stages[1]
    assert shape.stage_at(15.5) == shape.stages[2]
    assert shape.stage_at(16) is None
    assert shape.stage_at(-0.1) is None
    got = shape.stage_indices([-1, 0, 9.99, 10, 14.9, 15, 15.99, 16, 100])
    assert got.tolist() == [-1, 0, 0, 1, 1, 2, 2, -1, -1]
    assert got.dtype == np.intp


def test_measured_window_membership() -> None:
    st = Stage(index=0, start_s=10, duration_s=5, warmup_s=2, rate=1)
    assert not st.in_measured(11.9)
    assert st.in_measured(12)
    assert st.in_measured(14.99)
    assert not st.in_measured(15)


def test_shape_rejects_gaps_between_stages() -> None:
    with pytest.raises(ShapeError, match="contiguous"):
        Shape((Stage(0, 0, 1, 0, 1), Stage(1, 2, 1, 0, 1)))


def test_a_ten_hour_run_at_1000_qps_is_a_valid_shape() -> None:
    # Regression: 36 M arrivals were refused (a 10 M cap) while every process held the schedule.
    shape = parse_shape("1000@10h")
    assert shape.expected_arrivals == 36_000_000
