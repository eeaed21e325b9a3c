"""§4.2 Token-rate decay under a 1 → 100 QPS ramp: the knee, its cause, and the fix.

The study (``shared/seed/DIGEST.md`` §4.2) saw the token-generation rate per stream fall past
some load and blamed an RSA signature computed under a lock. This analysis reads an experiment
whose variants differ in the reference target's ``signing.mode`` (``campaigns/decay.yaml``) and
computes, per variant:

- the curve: median per-stream tokens/s per step against the offered rate (``decay_steps``);
- the knee, found by the threshold rule of ``decay_knee`` (or "no knee within the ramp");
- the cause, from the target's own phase timings: at the knee step, the phase whose mean grew
  most since the plateau (the three lowest steps) takes the blame, with its share of the added
  server-side time; every step's shares are tabled and charted for the locked mode;
- the expectation from first principles: the lock serves one request per ``sign`` phase, so its
  capacity is ``1000 / sign_ms`` requests/s (× ``work_factor`` signatures/s), with ``sign_ms``
  the median sign phase at low load (every stream of the steps before the knee, where the lock
  does not queue yet) — the knee should lie just below it.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from ramplab.experiment.sources import expand
from ramplab.experiment.study_result import StudyResult, StudyTable
from ramplab.study.decay.charts import rate_chart, share_chart
from ramplab.study.decay.knee import (
    DROP,
    MIN_STREAMS,
    PLATEAU_STEPS,
    Knee,
    find_knee,
    lock_capacity,
)
from ramplab.study.decay.steps import PHASES, ModeCurve, StepPoint, read_curve

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["RATE_DEFINITION", "analyse", "attribute", "expected_knee", "low_load"]

TITLE = "§4.2 Token-rate decay 1 → 100 QPS"
RATE_DEFINITION = (
    "per-stream tokens/s = (output tokens − tokens of the first content event) ÷ (TTLT − TTFT), "
    "i.e. the tokens streamed after the first ÷ first → last content event; a step's figure is "
    "the median over its successful streams"
)
METHOD = (
    f"knee = first step whose median falls more than {DROP:.0%} below the plateau (median of "
    f"the {PLATEAU_STEPS} lowest-rate steps) and stays below at the next step; interval = "
    "[last step above, knee step]; estimate = the threshold's crossing between them"
)
LABELS = {
    "auth": "auth",
    "ratelimit": "rate limit",
    "queue": "queue",
    "prefill": "prefill",
    "decode": "decode",
    "sign_queue": "sign hand-off",
    "lock_wait": "lock wait",
    "sign": "sign",
}


def _knee(curve: ModeCurve) -> Knee:
    ok = [s.rate(50) if s.streams >= MIN_STREAMS else None for s in curve.steps]
    return find_knee([s.offered_qps for s in curve.steps], ok)


def expected_knee(curve: ModeCurve, knee: Knee) -> dict[str, Any] | None:
    """The lock's capacity from the low-load sign phase of a ``locked`` curve (and, beside it,
    from the sign phase at the knee step: what CPU contention made of it there)."""
    values = low_load(curve, knee).sign_ms
    sign_ms = median(values) if values else None
    if curve.mode != "locked" or sign_ms is None or sign_ms <= 0:
        return None
    capacity = lock_capacity(sign_ms)
    at_knee = _step(curve, knee.high_qps)
    sign_at_knee = median(at_knee.sign_ms) if at_knee is not None and at_knee.sign_ms else None
    return {
        "variant": curve.name,
        "sign_ms_low_load": sign_ms,
        "streams": len(values),
        "work_factor": curve.work_factor,
        "capacity_qps": capacity,
        "capacity_signatures_per_s": capacity * curve.work_factor,
        "knee_over_capacity": knee.qps / capacity if knee.qps is not None else None,
        "sign_ms_at_knee_step": sign_at_knee,
        "capacity_at_knee_step_qps": lock_capacity(sign_at_knee) if sign_at_knee else None,
    }


def low_load(curve: ModeCurve, knee: Knee) -> StepPoint:
    """The steps before the knee pooled (the lock does not queue yet there); without a knee,
    the plateau's steps. More streams than the plateau alone, and spread over more of the
    run, so a burst of other jobs on a shared machine weighs less on the sign time."""
    if knee.found:
        return curve.pooled(below=knee.low_qps)
    return curve.pooled(PLATEAU_STEPS)


def _step(curve: ModeCurve, offered: float | None) -> StepPoint | None:
    return next((s for s in curve.steps if s.offered_qps == offered), None)


def attribute(curve: ModeCurve, knee: Knee) -> dict[str, Any] | None:
    """At the knee step: each phase's mean growth since the plateau, and the dominant one."""
    step = _step(curve, knee.high_qps)
    base = curve.pooled(PLATEAU_STEPS).phase_means_ms()
    at = step.phase_means_ms() if step is not None else None
    if not knee.found or step is None or base is None or at is None:
        return None
    added = {k: at[k] - base[k] for k in PHASES}
    total_added = sum(v for v in added.values() if v > 0)
    cause = max(PHASES, key=lambda k: added[k])
    return {
        "variant": curve.name,
        "step_qps": step.offered_qps,
        "plateau_ms": base,
        "knee_step_ms": at,
        "added_ms": added,
        "cause": cause,
        "cause_share_of_added": added[cause] / total_added if total_added > 0 else None,
        "shares_at_knee": step.shares(),
    }


def _fmt(value: float | None, digits: str = ".3g") -> str:
    return "-" if value is None else format(value, digits)


def _curve_sentence(curve: ModeCurve, knee: Knee) -> str:
    steps = [s for s in curve.steps if s.streams >= MIN_STREAMS]
    tail = f"; {_fmt(steps[-1].rate())} tokens/s at {steps[-1].offered_qps:g} QPS" if steps else ""
    head = f"knee at {knee.describe()}" if knee.found else knee.reason
    if knee.dips:
        dips = ", ".join(f"{x:g}" for x in knee.dips)
        head += f" (below the threshold at {dips} QPS but back above at the next step: not a knee)"
    return (
        f"{curve.name} (work_factor {curve.work_factor}): plateau {_fmt(knee.plateau)} tokens/s "
        f"per stream, {head}{tail}."
    )


def _expected_sentence(expected: dict[str, Any]) -> str:
    ratio = expected["knee_over_capacity"]
    where = f"the knee lies at {ratio:.0%} of it" if ratio is not None else "yet no knee was found"
    at_knee = ""
    if expected["sign_ms_at_knee_step"]:
        at_knee = (
            f" At the knee step the sign phase took {expected['sign_ms_at_knee_step']:.3g} ms "
            f"(capacity {expected['capacity_at_knee_step_qps']:.3g} req/s)"
        )
        slower = expected["sign_ms_at_knee_step"] > 1.2 * expected["sign_ms_low_load"]
        at_knee += (
            ": the signing thread shares the CPU with the event loop, the load generator and "
            "other jobs."
            if slower
            else "."
        )
    return (
        f"First principles ({expected['variant']}): at low load the sign phase takes "
        f"{expected['sign_ms_low_load']:.3g} ms (median of the {expected['streams']} streams of "
        f"the steps before the knee) for {expected['work_factor']} signatures, so the lock "
        f"serves at most {expected['capacity_qps']:.3g} requests/s "
        f"({expected['capacity_signatures_per_s']:.4g} signatures/s); {where}." + at_knee
    )


def _cause_sentence(cause: dict[str, Any]) -> str:
    shares = cause["shares_at_knee"] or {}
    name = LABELS[cause["cause"]]
    return (
        f"Attribution ({cause['variant']}, knee step {cause['step_qps']:g} QPS, the target's "
        f"server_timing_ms): {name} grew by {cause['added_ms'][cause['cause']]:.0f} ms per "
        f"stream since the plateau, {_fmt(cause['cause_share_of_added'], '.0%')} of all "
        f"server-side growth, and is {_fmt(shares.get(cause['cause']), '.0%')} of the "
        f"server-side time at that step (lock wait {_fmt(shares.get('lock_wait'), '.0%')}, "
        f"sign {_fmt(shares.get('sign'), '.0%')}, queue {_fmt(shares.get('queue'), '.0%')}): "
        f"the dominant cause is {name}."
    )


def _conclusions(
    curves: list[ModeCurve],
    knees: list[Knee],
    expected: dict[str, Any] | None,
    causes: list[dict[str, Any]],
) -> list[str]:
    out = [f"Definitions: {RATE_DEFINITION}; {METHOD}."]
    out += [_curve_sentence(c, k) for c, k in zip(curves, knees, strict=True)]
    if expected is not None:
        out.append(_expected_sentence(expected))
    out += [_cause_sentence(c) for c in causes]
    base = next((k for c, k in zip(curves, knees, strict=True) if c.mode == "locked"), None)
    fixed = [_fix(c, k, base) for c, k in zip(curves, knees, strict=True) if c.mode != "locked"]
    if fixed:
        out.append("The fix, side by side (same ramp, same seed): " + "; ".join(fixed) + ".")
    return out


def _fix(curve: ModeCurve, knee: Knee, locked: Knee | None) -> str:
    """How a variant's knee compares with the locked one's: moved (by what factor) or gone."""
    top = max((s.offered_qps for s in curve.steps if s.streams >= MIN_STREAMS), default=0.0)
    if not knee.found:
        return f"{curve.name}: no knee up to {top:g} QPS (gone)"
    if locked is None or locked.qps is None or knee.qps is None:
        return f"{curve.name}: knee at {knee.describe()}"
    return f"{curve.name}: knee at {knee.describe()}, × {knee.qps / locked.qps:.2g} the locked knee"


def _tables(
    curves: list[ModeCurve], knees: list[Knee], expected: dict[str, Any] | None
) -> list[StudyTable]:
    rows: list[list[str | int | float | None]] = []
    for curve, knee in zip(curves, knees, strict=True):
        values = low_load(curve, knee).sign_ms
        sign = median(values) if values else None
        capacity = (
            expected["capacity_qps"]
            if expected is not None and expected["variant"] == curve.name
            else None
        )
        rows.append([
            curve.name, curve.mode, curve.work_factor, curve.runs, knee.plateau, knee.qps,
            f"[{knee.low_qps:g}, {knee.high_qps:g}]" if knee.found else "no knee",
            sign, capacity,
        ])  # fmt: skip
    knee_table = StudyTable(
        "Knee per signing mode",
        ["variant", "mode", "work factor", "runs", "plateau tokens/s", "knee QPS",
         "knee interval QPS", "sign ms (low load)", "lock capacity req/s"],
        rows,
    )  # fmt: skip
    offered = sorted({s.offered_qps for c in curves for s in c.steps})
    by_x = [{s.offered_qps: s for s in c.steps} for c in curves]
    rate_rows: list[list[str | int | float | None]] = []
    for x in offered:
        row: list[str | int | float | None] = [x]
        for steps in by_x:
            step = steps.get(x)
            row.append(step.rate() if step is not None and step.streams >= MIN_STREAMS else None)
        rate_rows.append(row)
    rate_table = StudyTable(
        "Per-stream tokens/s per step (median)",
        ["offered QPS", *[c.name for c in curves]],
        rate_rows,
    )
    return [knee_table, rate_table]


def _share_table(curve: ModeCurve) -> StudyTable:
    rows: list[list[str | int | float | None]] = []
    for step in curve.steps:
        shares, means = step.shares(), step.phase_means_ms()
        rows.append([
            step.offered_qps, step.streams, step.failed,
            step.rate() if step.streams >= MIN_STREAMS else None,
            sum(means.values()) if means else None,
            *[round(100 * shares[k], 1) if shares else None for k in PHASES],
        ])  # fmt: skip
    return StudyTable(
        f"Where the server's time goes, {curve.name} (% of server-side time per step)",
        ["offered QPS", "streams", "failed", "tokens/s p50", "server ms (mean)",
         *[f"{LABELS[k]} %" for k in PHASES]],
        rows,
    )  # fmt: skip


def analyse(directory: Path, manifest: Manifest) -> StudyResult:
    """The decay study of an experiment directory (``study: decay``)."""
    notes: list[str] = []
    groups = expand([directory], notes)
    curves = [read_curve(g) for g in groups]
    knees = [_knee(c) for c in curves]
    locked = next((c for c in curves if c.mode == "locked"), None)
    locked_knee = knees[curves.index(locked)] if locked is not None else None
    expected = expected_knee(locked, locked_knee) if locked and locked_knee else None
    causes = [a for c, k in zip(curves, knees, strict=True) if (a := attribute(c, k))]
    cause = next((a for a in causes if locked and a["variant"] == locked.name), None)
    if locked is None:
        notes.append("no variant runs signing.mode locked: no lock capacity, no attribution")
    elif expected is None:
        notes.append(
            f"{locked.name}: no server timings of the sign phase (not the reference target?)"
        )
    for curve in curves:
        if not any(s.timed for s in curve.steps):
            notes.append(f"{curve.name}: no server_timing_ms in its records: no attribution")
    tables = _tables(curves, knees, expected)
    charts = [rate_chart(curves, knees, expected["capacity_qps"] if expected else None)]
    if locked is not None:
        tables.append(_share_table(locked))
        charts.append(share_chart(locked))
    return StudyResult(
        study="decay",
        title=TITLE,
        conclusions=_conclusions(curves, knees, expected, causes) if curves else [],
        tables=tables,
        charts=charts,
        data={
            "definition": RATE_DEFINITION,
            "method": {
                "rule": METHOD,
                "drop": DROP,
                "plateau_steps": PLATEAU_STEPS,
                "min_streams": MIN_STREAMS,
            },
            "variants": [
                {
                    "name": c.name,
                    "mode": c.mode,
                    "work_factor": c.work_factor,
                    "runs": c.runs,
                    "knee": k.to_json(),
                    "steps": [s.to_json(MIN_STREAMS) for s in c.steps],
                }
                for c, k in zip(curves, knees, strict=True)
            ],
            "expected": expected,
            "attribution": cause,
            "attributions": causes,
        },
        notes=notes,
    )
