"""Ramp shapes: the target arrival rate over a run, as a list of constant-rate stages.

A shape is always a sequence of ``Stage``s, each with a *constant* target rate. Linear and
exponential ramps are discretised into stages of a configurable ``step`` (default 1 s) whose rate
is the ramp's exact *mean* over that step (the integral divided by the step length), so the
expected number of arrivals over the whole ramp equals the continuous ramp's integral. We chose
this over a time-varying rate with thinning because every stage then has one ``target_qps`` that
``summary.json`` can compare with its ``achieved_qps``, the arrival processes stay one-rate
functions, and the error of the discretisation is bounded by the step, which the user picks.

Each stage may start with a warm-up part whose requests are sent but excluded from the stage's
statistics (connections and caches settle; the queue reaches its steady state).

CLI syntax (durations are ``<number>[ms|s|m|h]``; a bare number means seconds)::

    1,2,5,10,20,50,100@30s/5s          stepped: each rate held 30 s, the first 5 s of each warm-up
    steps:1,2,5@30s                     the same, explicit kind, no warm-up
    linear:1..100@60s                   linear ramp 1 → 100 QPS over 60 s, 1 s stages
    linear:1..100@60s,step=5s,warmup=1s 5 s stages, each with a 1 s warm-up
    exp:1..100@60s,step=5s              exponential ramp (rate × constant factor per second)
    custom:10@5s,20@10s/2s,0@30s        per-stage rate@hold[/warm-up]; 0 QPS is an idle stage

The dict/YAML form (``shape_from_dict``)::

    {kind: stepped, rates: [1, 2, 5], hold: 30s, warmup: 5s}
    {kind: linear | exponential, from: 1, to: 100, duration: 60s, step: 5s, warmup: 0s}
    {kind: custom, stages: [{rate: 10, hold: 5s, warmup: 1s}, {rate: 20, hold: 10s}]}

Every error is a ``ShapeError`` naming the field and the offending value.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ramplab.errors import ShapeError

__all__ = [
    "Shape",
    "Stage",
    "custom",
    "parse_duration",
    "parse_shape",
    "ramp",
    "shape_from_dict",
    "stepped",
]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m|h)?\s*$")
# A stage this short would make rates and percentiles meaningless; it is almost always a typo.
_MIN_STAGE_S = 0.001


@dataclass(frozen=True, slots=True)
class Stage:
    """One constant-rate stage; times are seconds from the run start."""

    index: int
    start_s: float
    duration_s: float
    warmup_s: float
    rate: float  # target arrivals per second over the whole stage

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def measured_start_s(self) -> float:
        """Where the stage's statistics start (after the warm-up)."""
        return self.start_s + self.warmup_s

    @property
    def measured_s(self) -> float:
        """Length of the measured window (duration minus warm-up)."""
        return self.duration_s - self.warmup_s

    def in_measured(self, offset_s: float) -> bool:
        return self.measured_start_s <= offset_s < self.end_s


@dataclass(frozen=True, slots=True)
class Shape:
    """An ordered, gap-free sequence of stages starting at offset 0."""

    stages: tuple[Stage, ...]
    kind: str = "custom"

    def __post_init__(self) -> None:
        if not self.stages:
            raise ShapeError("stages", "a shape needs at least one stage")
        expected = 0.0
        for i, st in enumerate(self.stages):
            if st.index != i or not math.isclose(st.start_s, expected, abs_tol=1e-9):
                raise ShapeError(f"stages[{i}]", "stages must be indexed 0.. and contiguous")
            expected = st.end_s

    @property
    def duration_s(self) -> float:
        return self.stages[-1].end_s

    @property
    def expected_arrivals(self) -> float:
        return sum(st.rate * st.duration_s for st in self.stages)

    def stage_at(self, offset_s: float) -> Stage | None:
        """The stage containing ``offset_s`` (seconds from the run start), None outside the run."""
        if offset_s < 0 or offset_s >= self.duration_s:
            return None
        starts = [st.start_s for st in self.stages]
        return self.stages[bisect.bisect_right(starts, offset_s) - 1]

    def stage_indices(self, offsets_s: ArrayLike) -> NDArray[np.intp]:
        """Vectorised ``stage_at``: the stage index of each offset, -1 outside the run."""
        t = np.asarray(offsets_s, dtype=np.float64)
        starts = np.array([st.start_s for st in self.stages])
        idx = np.searchsorted(starts, t, side="right") - 1
        outside = (t < 0) | (t >= self.duration_s)
        return np.where(outside, -1, idx).astype(np.intp)


def parse_duration(value: object, field: str) -> float:
    """Seconds from ``30``, ``30.5``, ``"30s"``, ``"500ms"``, ``"2m"``, ``"1h"``; never negative."""
    if isinstance(value, bool):
        raise ShapeError(field, f"expected a duration, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION.match(value)
        if m is None:
            raise ShapeError(field, f"expected a duration like 30s, 500ms or 2m, got {value!r}")
        seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    else:
        raise ShapeError(field, f"expected a duration, got {value!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ShapeError(field, f"must be a finite duration ≥ 0, got {value!r}")
    return seconds


def _rate(value: object, field: str, *, positive: bool = False) -> float:
    if isinstance(value, bool):
        raise ShapeError(field, f"expected a rate in QPS, got {value!r}")
    try:
        rate = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        rate = math.nan
    if not math.isfinite(rate):
        raise ShapeError(field, f"expected a rate in QPS, got {value!r}")
    if rate < 0 or (positive and rate == 0):
        bound = "> 0" if positive else "≥ 0"
        raise ShapeError(field, f"rate must be {bound}, got {value!r}")
    return rate


def _build(specs: Sequence[tuple[float, float, float]], kind: str, field: str) -> Shape:
    """Stages from (rate, duration, warm-up) triples, checking each."""
    stages: list[Stage] = []
    start = 0.0
    for i, (rate, duration, warmup) in enumerate(specs):
        if duration < _MIN_STAGE_S:
            raise ShapeError(f"{field}[{i}]", f"stage duration must be ≥ 1ms, got {duration}s")
        if warmup >= duration:
            raise ShapeError(
                f"{field}[{i}].warmup",
                f"warm-up {warmup}s must be shorter than the stage ({duration}s)",
            )
        stages.append(Stage(i, start, duration, warmup, rate))
        start += duration
    if not stages:
        raise ShapeError(field, "a shape needs at least one stage")
    # No cap on the arrivals: the schedule streams (``arrivals/schedule.py``), so a run's length
    # costs its processes time, not memory.
    return Shape(tuple(stages), kind)


def stepped(rates: Sequence[float], hold_s: float, warmup_s: float = 0.0) -> Shape:
    """Each rate held ``hold_s`` seconds, the first ``warmup_s`` of each excluded from stats."""
    return _build([(r, hold_s, warmup_s) for r in rates], "stepped", "rates")


def ramp(
    kind: str,
    start_rate: float,
    end_rate: float,
    duration_s: float,
    step_s: float = 1.0,
    warmup_s: float = 0.0,
) -> Shape:
    """A linear or exponential ramp discretised into ``step_s`` stages at their mean rate."""
    if kind not in ("linear", "exponential"):
        raise ShapeError("kind", f"expected linear or exponential, got {kind!r}")
    if step_s < _MIN_STAGE_S:
        raise ShapeError("step", f"must be ≥ 1ms, got {step_s}s")
    if duration_s < _MIN_STAGE_S:
        raise ShapeError("duration", f"must be ≥ 1ms, got {duration_s}s")
    if kind == "exponential" and (start_rate <= 0 or end_rate <= 0):
        raise ShapeError("from", "an exponential ramp needs both rates > 0")
    n_full = math.floor(duration_s / step_s + 1e-9)
    edges = [k * step_s for k in range(n_full + 1)]
    if duration_s - edges[-1] > 1e-9:
        edges.append(duration_s)  # a shorter last stage rather than silently stretching the ramp
    specs = []
    for a, b in itertools.pairwise(edges):
        specs.append((_mean_rate(kind, start_rate, end_rate, duration_s, a, b), b - a, warmup_s))
    return _build(specs, kind, "step")


def _mean_rate(kind: str, r0: float, r1: float, total: float, a: float, b: float) -> float:
    if kind == "linear":
        slope = (r1 - r0) / total
        return r0 + slope * (a + b) / 2
    growth = math.log(r1 / r0) / total
    if abs(growth) < 1e-12:
        return r0
    # ∫ r0·e^(g t) dt over [a, b] divided by (b − a)
    return r0 * (math.exp(growth * b) - math.exp(growth * a)) / (growth * (b - a))


def custom(stages: Sequence[tuple[float, float, float]]) -> Shape:
    """Stages from explicit (rate, hold, warm-up) triples."""
    return _build(stages, "custom", "stages")


def _split_item(item: str, field: str) -> tuple[float, float, float]:
    """``rate@hold[/warmup]``."""
    rate_s, sep, rest = item.partition("@")
    if not sep:
        raise ShapeError(field, f"expected rate@hold[/warmup], got {item!r}")
    hold_s, _, warm_s = rest.partition("/")
    return (
        _rate(rate_s.strip(), field),
        parse_duration(hold_s, f"{field}.hold"),
        parse_duration(warm_s, f"{field}.warmup") if warm_s else 0.0,
    )


def _parse_ramp(kind: str, body: str) -> Shape:
    head, *opts = body.split(",")
    rates, sep, duration = head.partition("@")
    lo, dots, hi = rates.partition("..")
    if not sep or not dots:
        raise ShapeError("shape", f"expected {kind}:FROM..TO@DURATION[,step=..][,warmup=..]")
    options: dict[str, float] = {}
    for opt in opts:
        key, eq, value = opt.partition("=")
        key = key.strip()
        if not eq or key not in ("step", "warmup"):
            raise ShapeError(f"shape.{key or opt}", f"unknown ramp option {opt!r}")
        options[key] = parse_duration(value, f"shape.{key}")
    positive = kind == "exponential"
    return ramp(
        kind,
        _rate(lo.strip(), "shape.from", positive=positive),
        _rate(hi.strip(), "shape.to", positive=positive),
        parse_duration(duration, "shape.duration"),
        options.get("step", 1.0),
        options.get("warmup", 0.0),
    )


def parse_shape(text: str) -> Shape:
    """A shape from the compact CLI syntax (see the module docstring)."""
    if not isinstance(text, str) or not text.strip():
        raise ShapeError("shape", f"expected a shape string like 1,2,5@30s/5s, got {text!r}")
    kind, sep, body = text.strip().partition(":")
    if not sep:
        kind, body = "steps", text.strip()
    kind = kind.strip().lower()
    if kind in ("linear", "exp", "exponential"):
        return _parse_ramp("linear" if kind == "linear" else "exponential", body)
    if kind in ("steps", "stepped"):
        rates_s, at, timing = body.partition("@")
        if not at:
            raise ShapeError("shape", f"expected RATES@HOLD[/WARMUP], got {text!r}")
        hold_s, _, warm_s = timing.partition("/")
        rates = [_rate(r.strip(), f"shape.rates[{i}]") for i, r in enumerate(rates_s.split(","))]
        hold = parse_duration(hold_s, "shape.hold")
        warm = parse_duration(warm_s, "shape.warmup") if warm_s else 0.0
        return stepped(rates, hold, warm)
    if kind == "custom":
        items = [_split_item(it, f"shape.stages[{i}]") for i, it in enumerate(body.split(","))]
        return custom(items)
    raise ShapeError("shape.kind", f"unknown kind {kind!r} (steps, linear, exp, custom)")


def _get(d: Mapping[str, Any], key: str, field: str) -> Any:
    if key not in d:
        raise ShapeError(f"{field}.{key}", "is required")
    return d[key]


def shape_from_dict(d: Mapping[str, Any] | str, field: str = "shape") -> Shape:
    """A shape from its YAML/dict form (see the module docstring); a string is parsed as CLI."""
    if isinstance(d, str):
        return parse_shape(d)
    if not isinstance(d, Mapping):
        raise ShapeError(field, f"expected a mapping or a shape string, got {d!r}")
    kind = str(d.get("kind", "stepped")).lower()
    allowed = {
        "stepped": {"kind", "rates", "hold", "warmup"},
        "steps": {"kind", "rates", "hold", "warmup"},
        "linear": {"kind", "from", "to", "duration", "step", "warmup"},
        "exponential": {"kind", "from", "to", "duration", "step", "warmup"},
        "exp": {"kind", "from", "to", "duration", "step", "warmup"},
        "custom": {"kind", "stages"},
    }
    if kind not in allowed:
        raise ShapeError(
            f"{field}.kind", f"unknown kind {kind!r} (stepped, linear, exponential, custom)"
        )
    unknown = sorted(set(d) - allowed[kind])
    if unknown:
        raise ShapeError(f"{field}.{unknown[0]}", f"unknown key for a {kind} shape")
    warm = parse_duration(d.get("warmup", 0), f"{field}.warmup")
    if kind in ("stepped", "steps"):
        rates = _get(d, "rates", field)
        if not isinstance(rates, Sequence) or isinstance(rates, str) or not rates:
            raise ShapeError(f"{field}.rates", f"expected a non-empty list of rates, got {rates!r}")
        rs = [_rate(r, f"{field}.rates[{i}]") for i, r in enumerate(rates)]
        return stepped(rs, parse_duration(_get(d, "hold", field), f"{field}.hold"), warm)
    if kind == "custom":
        items = _get(d, "stages", field)
        if not isinstance(items, Sequence) or isinstance(items, str) or not items:
            raise ShapeError(f"{field}.stages", f"expected a non-empty list, got {items!r}")
        specs = []
        for i, it in enumerate(items):
            f = f"{field}.stages[{i}]"
            if not isinstance(it, Mapping):
                raise ShapeError(f, f"expected a mapping with rate and hold, got {it!r}")
            specs.append(
                (
                    _rate(_get(it, "rate", f), f"{f}.rate"),
                    parse_duration(_get(it, "hold", f), f"{f}.hold"),
                    parse_duration(it.get("warmup", 0), f"{f}.warmup"),
                )
            )
        return custom(specs)
    positive = kind != "linear"
    return ramp(
        "linear" if kind == "linear" else "exponential",
        _rate(_get(d, "from", field), f"{field}.from", positive=positive),
        _rate(_get(d, "to", field), f"{field}.to", positive=positive),
        parse_duration(_get(d, "duration", field), f"{field}.duration"),
        parse_duration(d.get("step", 1), f"{field}.step"),
        warm,
    )
