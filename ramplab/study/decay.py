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
  the median sign phase at low load — the knee should lie just below it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ramplab.experiment.sources import expand
from ramplab.study.decay_charts import rate_chart, share_chart
from ramplab.study.decay_knee import DROP, MIN_STREAMS, PLATEAU_STEPS, Knee, find_knee, lock_capacity
from ramplab.study.decay_steps import PHASES, ModeCurve, read_curve
from ramplab.study.result import StudyResult, StudyTable

if TYPE_CHECKING:
    from ramplab.experiment.manifest import Manifest

__all__ = ["RATE_DEFINITION", "analyse", "attribute", "expected_knee"]

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


def expected_knee(curve: ModeCurve) -> dict[str, Any] | None:
    """The lock's capacity from the low-load sign phase of a ``locked`` curve."""
    sign_ms, streams = curve.low_load_sign_ms(PLATEAU_STEPS)
    if curve.mode != "locked" or sign_ms is None or sign_ms <= 0:
        return None
    capacity = lock_capacity(sign_ms)
    return {
        "variant": curve.name,
        "sign_ms_low_load": sign_ms,
        "streams": streams,
        "work_factor": curve.work_factor,
        "capacity_qps": capacity,
        "capacity_signatures_per_s": capacity * curve.work_factor,
    }


def attribute(curve: ModeCurve, knee: Knee) -> dict[str, Any] | None:
    """At the knee step: each phase's mean growth since the plateau, and the dominant one."""
    step = next((s for s in curve.steps if s.offered_qps == knee.high_qps), None)
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


def _conclusions(
    curves: list[ModeCurve],
    knees: list[Knee],
    expected: dict[str, Any] | None,
    cause: dict[str, Any] | None,
) -> list[str]:
    out = []
    for curve, knee in zip(curves, knees, strict=True):
        steps = [s for s in curve.steps if s.streams >= MIN_STREAMS]
        last = steps[-1] if steps else None
        tail = (
            f"; at {last.offered_qps:g} QPS it is {_fmt(last.rate())} tokens/s"
            if last is not None
            else ""
        )
        if knee.found:
            head = f"knee at {knee.describe()}"
        else:
            head = knee.reason
        out.append(
            f"{curve.name} ({curve.mode}, work_factor {curve.work_factor}): plateau "
            f"{_fmt(knee.plateau)} tokens/s per stream; {head}{tail} (method: {METHOD})."
        )
    if expected is not None:
        knee = knees[[c.name for c in curves].index(expected["variant"])]
        where = (
            f"the measured knee ({knee.qps:.3g} QPS) is {knee.qps / expected['capacity_qps']:.0%} "
            "of it"
            if knee.found and knee.qps is not None
            else "yet no knee was found within the ramp"
        )
        out.append(
            f"First principles: at low load the {expected['variant']} sign phase takes "
            f"{expected['sign_ms_low_load']:.3g} ms (median of {expected['streams']} streams of "
            f"the {PLATEAU_STEPS} lowest steps) for {expected['work_factor']} signatures, so the "
            f"lock serves at most {expected['capacity_qps']:.3g} requests/s "
            f"({expected['capacity_signatures_per_s']:.4g} signatures/s); {where} — a queue in "
            "front of a lock costs 20 % of a stream just below its capacity (M/D/1)."
        )
    if cause is not None:
        shares = cause["shares_at_knee"] or {}
        out.append(
            f"Attribution ({cause['variant']}, knee step {cause['step_qps']:g} QPS, target's "
            f"server_timing_ms): {LABELS[cause['cause']]} grew by "
            f"{cause['added_ms'][cause['cause']]:.0f} ms per stream since the plateau, "
            f"{_fmt(cause['cause_share_of_added'], '.0%')} of all server-side growth, and is "
            f"{_fmt(shares.get(cause['cause']), '.0%')} of the server-side time at that step "
            f"(lock wait {_fmt(shares.get('lock_wait'), '.0%')}, sign "
            f"{_fmt(shares.get('sign'), '.0%')}): the dominant cause is "
            f"{LABELS[cause['cause']]}."
        )
    fixed = [
        f"{c.name}: {k.describe() if k.found else 'no knee'}"
        for c, k in zip(curves, knees, strict=True)
        if c.mode != "locked"
    ]
    if fixed:
        out.append("The fix, side by side (same ramp, same seed): " + "; ".join(fixed) + ".")
    return out


def _tables(
    curves: list[ModeCurve], knees: list[Knee], expected: dict[str, Any] | None
) -> list[StudyTable]:
    rows: list[list[str | int | float | None]] = []
    for curve, knee in zip(curves, knees, strict=True):
        sign, _ = curve.low_load_sign_ms(PLATEAU_STEPS)
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
    expected = expected_knee(locked) if locked is not None else None
    cause = attribute(locked, locked_knee) if locked and locked_knee else None
    if locked is None:
        notes.append("no variant runs signing.mode locked: no lock capacity, no attribution")
    elif expected is None:
        notes.append(f"{locked.name}: no server timings of the sign phase (not the reference target?)")
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
        conclusions=_conclusions(curves, knees, expected, cause) if curves else [],
        tables=tables,
        charts=charts,
        data={
            "definition": RATE_DEFINITION,
            "method": {"rule": METHOD, "drop": DROP, "plateau_steps": PLATEAU_STEPS,
                       "min_streams": MIN_STREAMS},
            "variants": [
                {"name": c.name, "mode": c.mode, "work_factor": c.work_factor, "runs": c.runs,
                 "knee": k.to_json(), "steps": [s.to_json(MIN_STREAMS) for s in c.steps]}
                for c, k in zip(curves, knees, strict=True)
            ],
            "expected": expected,
            "attribution": cause,
        },  # fmt: skip
        notes=notes,
    )
