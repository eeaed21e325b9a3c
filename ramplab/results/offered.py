"""The x-axis of every per-step chart and rule: the load a step offered.

An open-loop step offered its ``target_qps``; a step without one (a plain Locust run) is placed
at its ``offered_qps`` when a schedule gave one, else at what it achieved; a closed-loop step
at its number of users. The unit says which, so a chart or a sentence never calls users QPS.
"""

from __future__ import annotations

from ramplab.results.summary import StepStats

__all__ = ["offered_load", "where"]


def offered_load(step: StepStats) -> tuple[float, str]:
    """(value, unit): ``(8.0, "QPS")``, ``(16.0, "users")`` or ``(3.2, "QPS achieved")``."""
    if step.target_qps is not None:
        return step.target_qps, "QPS"
    if step.target_users is not None:
        return step.target_users, "users"
    if step.offered_qps is not None:
        return step.offered_qps, "QPS"
    return step.achieved_qps, "QPS achieved"


def where(flagged: list[StepStats], steps: tuple[StepStats, ...]) -> str:
    """``"at ≥ 8 QPS"`` when the flagged steps are every step from the lowest flagged load up,
    ``"at every step (2–10 QPS)"``, else ``"at 4, 16 QPS"``; a run of one step: its load."""
    if len(steps) == 1 and flagged:
        value, unit = offered_load(steps[0])
        return f"at {value:g} {unit}"
    chosen = {s.index for s in flagged}
    ranked = sorted(steps, key=lambda s: offered_load(s)[0])
    marks = [s.index in chosen for s in ranked]
    first = marks.index(True)
    unit = offered_load(ranked[first])[1]
    if all(marks):
        low, high = offered_load(ranked[0])[0], offered_load(ranked[-1])[0]
        return f"at every step ({low:g}–{high:g} {unit})"
    if all(marks[first:]):
        return f"at ≥ {offered_load(ranked[first])[0]:g} {unit}"
    loads = ", ".join(f"{offered_load(s)[0]:g}" for s, m in zip(ranked, marks, strict=True) if m)
    return f"at {loads} {unit}"
