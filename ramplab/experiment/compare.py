"""The comparison of groups of runs: per step of a common x-axis, each metric with its noise.

The x-axis is what each step asked for: ``target_qps`` (the offered rate of an open loop) or
``target_users`` (a closed loop). Steps of different runs meet when their x is equal (the k-th
occurrence with the k-th, for a ramp that comes back down); a step one group lacks is an empty
cell, never an interpolation.

For each group and metric: the mean over the group's runs (repeats), with ``min``/``max``/the
values; for every group but the baseline, the ``delta`` against the baseline:

- ``absolute`` = mean − baseline mean, ``relative`` = absolute ÷ baseline mean;
- ``noise`` = half the group's range + half the baseline's range: the largest difference the
  repeat-to-repeat variation alone has shown. Unknown (``null``) unless both ran ≥ 2 times;
- ``exceeds_noise`` = ``|absolute| > noise`` (``null`` when the noise is unknown). With 2–3
  repeats this is a screen, not a significance test: repeat more before you trust a small delta.

``Comparison.to_json()`` is ``comparison.json``; its fields are documented in docs/cli.md
(Experiments) and are what charts and recommendations are built from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ramplab.campaign.fail_if import Condition
from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.experiment.sources import Group

__all__ = [
    "FORMAT",
    "METRICS",
    "Cell",
    "Comparison",
    "ConditionResult",
    "Delta",
    "Finding",
    "Metric",
    "Point",
    "Spread",
    "compare",
]

FORMAT = "ramplab.comparison/1"
Better = Literal["lower", "higher"]


@dataclass(frozen=True, slots=True)
class Metric:
    """A compared figure: ``key`` is its path in a summary step (``ttft_ms.p99``)."""

    key: str
    label: str
    unit: str  # "QPS", "ms", "tokens/s", "ratio"
    better: Better


def _latency(name: str, label: str) -> list[Metric]:
    return [Metric(f"{name}.{p}", f"{label} {p}", "ms", "lower") for p in ("p50", "p90", "p99")]


METRICS: tuple[Metric, ...] = (
    Metric("achieved_qps", "achieved QPS", "QPS", "higher"),
    Metric("goodput_qps", "goodput QPS", "QPS", "higher"),
    # The step's SLO attainment (goodput ÷ requests; success alone when no SLO was set).
    Metric("goodput_ratio", "SLO met", "ratio", "higher"),
    Metric("error_ratio", "errors", "ratio", "lower"),
    *_latency("ttft_ms", "TTFT"),
    *_latency("itl_ms", "ITL"),
    *_latency("tpot_ms", "TPOT"),
    *_latency("ttlt_ms", "TTLT"),
    Metric("output_tokens_per_s", "tokens/s", "tokens/s", "higher"),
)


@dataclass(frozen=True, slots=True)
class Spread:
    """One metric of one group at one point: ``n`` runs had a value; ``values`` per run."""

    n: int
    mean: float | None
    min: float | None
    max: float | None
    values: tuple[float | None, ...]

    @property
    def half_range(self) -> float | None:
        return (self.max - self.min) / 2 if self.max is not None and self.min is not None else None


@dataclass(frozen=True, slots=True)
class Delta:
    absolute: float | None
    relative: float | None
    noise: float | None
    exceeds_noise: bool | None


@dataclass(frozen=True, slots=True)
class Cell:
    value: Spread
    delta: Delta | None  # None for the baseline


@dataclass(frozen=True, slots=True)
class Point:
    """One x of the axis (``x`` None: the whole run); ``cells[group][metric key]``."""

    x: float | None
    cells: dict[str, dict[str, Cell]]


@dataclass(frozen=True, slots=True)
class Finding:
    variant: str
    where: str  # "run" or "steps[i] (x=10)"
    value: float | None
    threshold: float | None
    holds: bool  # a value that cannot be evaluated holds (no evidence of a pass)
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ConditionResult:
    condition: str
    holds: bool
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    x_axis: Literal["target_qps", "target_users"]
    baseline: str
    metrics: tuple[Metric, ...]
    groups: tuple[Group, ...]
    steps: tuple[Point, ...]
    run: Point
    conditions: tuple[ConditionResult, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> ExitCode:
        """3 when a ``--fail-if`` condition holds (the gate convention), else 0."""
        return ExitCode.SLO_MISSED if any(c.holds for c in self.conditions) else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "x_axis": self.x_axis,
            "baseline": self.baseline,
            "metrics": [
                {"key": m.key, "label": m.label, "unit": m.unit, "better": m.better}
                for m in self.metrics
            ],
            "variants": [
                {
                    "name": g.name,
                    "baseline": g.name == self.baseline,
                    "source": str(g.source),
                    "runs": [{"dir": str(r.path), "repeat": r.repeat} for r in g.runs],
                }
                for g in self.groups
            ],
            "steps": [_point_json(p) for p in self.steps],
            "run": _point_json(self.run),
            "conditions": [
                {
                    "condition": c.condition,
                    "holds": c.holds,
                    "findings": [_finding_json(f) for f in c.findings],
                }
                for c in self.conditions
            ],
            "exit_code": int(self.exit_code),
            "notes": list(self.notes),
        }


def _point_json(point: Point) -> dict[str, Any]:
    return {
        "x": point.x,
        "variants": {
            group: {
                key: {
                    "n": c.value.n,
                    "mean": c.value.mean,
                    "min": c.value.min,
                    "max": c.value.max,
                    "values": list(c.value.values),
                    "delta": None
                    if c.delta is None
                    else {
                        "absolute": c.delta.absolute,
                        "relative": c.delta.relative,
                        "noise": c.delta.noise,
                        "exceeds_noise": c.delta.exceeds_noise,
                    },
                }
                for key, c in cells.items()
            }
            for group, cells in point.cells.items()
        },
    }


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "variant": f.variant,
        "where": f.where,
        "value": f.value,
        "threshold": f.threshold,
        "holds": f.holds,
        "detail": f.detail,
    }


_MISSING = object()
StepKey = tuple[float | None, int]  # (x, its occurrence: a ramp may come back to a rate)


def _lookup(data: Mapping[str, Any], key: str) -> Any:
    value: Any = data
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _spread(figures: Sequence[Mapping[str, Any] | None], key: str) -> Spread:
    values = tuple(None if f is None else _number(_lookup(f, key)) for f in figures)
    known = [v for v in values if v is not None]
    if not known:
        return Spread(0, None, None, None, values)
    return Spread(len(known), sum(known) / len(known), min(known), max(known), values)


def _delta(value: Spread, base: Spread) -> Delta:
    if value.mean is None or base.mean is None:
        return Delta(None, None, None, None)
    absolute = value.mean - base.mean
    relative = absolute / base.mean if base.mean != 0 else None
    noise = None
    if value.n >= 2 and base.n >= 2:
        noise = (value.half_range or 0.0) + (base.half_range or 0.0)
    exceeds = None if noise is None else abs(absolute) > noise
    return Delta(absolute, relative, noise, exceeds)


def _x(step: Mapping[str, Any]) -> float | None:
    for key in ("target_qps", "target_users"):
        if (value := _number(step.get(key))) is not None:
            return value
    return None


def _keyed_steps(summary: Mapping[str, Any]) -> dict[StepKey, dict[str, Any]]:
    out: dict[StepKey, dict[str, Any]] = {}
    for step in summary.get("steps") or []:
        x = _x(step)
        k = 0
        while (x, k) in out:
            k += 1
        out[(x, k)] = step
    return out


Figures = dict[str, list[Mapping[str, Any] | None]]  # per group, per run: a summary or a step


def _figures(groups: Sequence[Group], axis: Sequence[StepKey]) -> tuple[Figures, list[Figures]]:
    run: Figures = {g.name: [r.summary for r in g.runs] for g in groups}
    keyed = {g.name: [_keyed_steps(r.summary) for r in g.runs] for g in groups}
    steps: list[Figures] = [
        {name: [k.get(x) for k in runs] for name, runs in keyed.items()} for x in axis
    ]
    return run, steps


def _point(
    x: float | None,
    figures: Mapping[str, list[Mapping[str, Any] | None]],
    keys: Sequence[str],
    baseline: str,
) -> Point:
    cells: dict[str, dict[str, Cell]] = {}
    for name, runs in figures.items():
        cells[name] = {}
        for key in keys:
            value = _spread(runs, key)
            delta = None if name == baseline else _delta(value, _spread(figures[baseline], key))
            cells[name][key] = Cell(value, delta)
    return Point(x, cells)


def _axis(groups: Sequence[Group], baseline: str) -> list[StepKey]:
    ordered = sorted(groups, key=lambda g: g.name != baseline)
    axis: list[StepKey] = []
    for group in ordered:
        for run in group.runs:
            for x in _keyed_steps(run.summary):
                if x not in axis:
                    axis.append(x)
    return axis


def _check_key(key: str, steps: bool, field: str, text: str, groups: Sequence[Group]) -> None:
    """A metric no summary has (a typo) is a usage error, not a condition that holds."""
    samples = [r.summary for g in groups for r in g.runs]
    if steps:
        samples = [s for r in samples for s in (r.get("steps") or [])]
    found = [_lookup(s, key) for s in samples]
    found = [v for v in found if v is not _MISSING]
    if not found:
        raise UsageError(field, f"no figure {key!r} in the summaries ({text!r})")
    if all(isinstance(v, Mapping) for v in found):
        stats = ", ".join(sorted(next(v for v in found if isinstance(v, Mapping))))
        raise UsageError(field, f"{key!r} needs a statistic ({stats}) in {text!r}")


def _evaluate(
    condition: Condition,
    field: str,
    comparison: Comparison,
) -> ConditionResult:
    if condition.step is None:
        points = [("run", comparison.run)]
    elif condition.step == "*":
        points = [
            (f"steps[{i}] (x={p.x:g})" if p.x is not None else f"steps[{i}]", p)
            for i, p in enumerate(comparison.steps)
        ]
    else:
        n = len(comparison.steps)
        if not -n <= condition.step < n:
            raise UsageError(
                field,
                f"steps[{condition.step}] is out of range ({n} steps on the "
                f"common axis) in {condition.text!r}",
            )
        i = condition.step % n
        p = comparison.steps[i]
        points = [(f"steps[{i}] (x={p.x:g})" if p.x is not None else f"steps[{i}]", p)]
    findings = []
    for group in comparison.groups:
        if group.name == comparison.baseline:
            continue
        for where, point in points:
            cell = point.cells[group.name][condition.key]
            base = point.cells[comparison.baseline][condition.key]
            assert cell.delta is not None
            env = {"baseline": base.value.mean, "noise": cell.delta.noise}
            limit = condition.threshold(env)
            verdict = condition.holds(cell.value.mean, env)
            detail = ""
            if verdict is None:
                detail = (
                    "no data"
                    if cell.value.mean is None or base.value.mean is None
                    else ("noise unknown (needs ≥ 2 repeats of both)")
                )
            findings.append(
                Finding(group.name, where, cell.value.mean, limit, verdict is not False, detail)
            )
    return ConditionResult(condition.text, any(f.holds for f in findings), tuple(findings))


def compare(
    groups: Sequence[Group],
    baseline: str | None = None,
    conditions: Sequence[Condition] = (),
    *,
    field: str = "--fail-if",
    notes: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> Comparison:
    """Compare ``groups`` against ``baseline`` (default: the first) and check ``conditions``;
    ``extra`` metrics (summary paths, ``lateness_ms.p99``) join the default ones."""
    if not groups:
        raise UsageError(
            "RUN_OR_EXPERIMENT", "nothing to compare: " + ("; ".join(notes) or "no finished run")
        )
    names = [g.name for g in groups]
    base = baseline if baseline is not None else names[0]
    if base not in names:
        raise UsageError("--baseline", f"{base!r} is none of: {', '.join(names)}")
    for i, c in enumerate(conditions):
        _check_key(c.key, c.step is not None, f"{field}[{i}]", c.text, groups)
    keys = [m.key for m in METRICS]
    for i, key in enumerate(extra):
        if key not in keys:
            _check_key(key, True, f"--metric[{i}]", key, groups)
            keys.append(key)
    keys = list(dict.fromkeys([*keys, *(c.key for c in conditions)]))
    metrics = METRICS + tuple(Metric(k, k, "", "lower") for k in keys[len(METRICS) :])
    axis = _axis(groups, base)
    run_figures, step_figures = _figures(groups, axis)
    closed = any(
        s.get("target_qps") is None and s.get("target_users") is not None
        for g in groups
        for r in g.runs
        for s in (r.summary.get("steps") or [])
    )
    comparison = Comparison(
        x_axis="target_users" if closed else "target_qps",
        baseline=base,
        metrics=metrics,
        groups=tuple(groups),
        steps=tuple(_point(x[0], f, keys, base) for x, f in zip(axis, step_figures, strict=True)),
        run=_point(None, run_figures, keys, base),
        notes=tuple(notes),
    )
    results = tuple(_evaluate(c, f"{field}[{i}]", comparison) for i, c in enumerate(conditions))
    return replace(comparison, conditions=results)
