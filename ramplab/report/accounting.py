"""The conservation law, as a table: where every scheduled arrival went, step by step.

``scheduled = dispatched + dropped + lost`` and ``dispatched = completed + failed + unfinished``
(``docs/summary.md``); ``unaccounted`` is what breaks the second one (requests sent without a
record). The terminal, ``report.md`` and ``report.html`` show the same table and the run's
reasons for being incomplete, worded by ``results/conservation.py``.
"""

from __future__ import annotations

from ramplab.report.tables import Table
from ramplab.results.summary import RunSummary, StepStats

__all__ = ["ACCOUNTING_NOTE", "accounting_table", "incomplete_lines"]

ACCOUNTING_NOTE = (
    "scheduled = dispatched + dropped + lost; dispatched = completed + failed + unfinished. "
    "unfinished: sent, and cut by the run's end, an interruption or a dead worker (each has a "
    "record); unaccounted: sent without a record (0 when the law holds)."
)
HEADERS = ["step", "scheduled", "dispatched", "dropped", "lost", "completed", "failed",
           "unfinished", "unaccounted"]  # fmt: skip


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:d}"


def _row(label: str, step: StepStats | RunSummary) -> list[str]:
    return [
        label,
        _count(step.scheduled),
        _count(step.dispatched),
        _count(step.dropped),
        _count(step.lost),
        _count(step.completed),
        _count(step.failed),
        _count(step.unfinished),
        _count(step.unaccounted),
    ]


def accounting_table(summary: RunSummary) -> Table:
    """One row per step and one for the run; ``-`` where a count is not known (a plain run has
    no schedule; a closed loop schedules nothing)."""
    body = [_row(str(step.index), step) for step in summary.steps]
    if len(summary.steps) > 1:
        body.append(_row("run", summary))
    return HEADERS, body


def incomplete_lines(summary: RunSummary) -> list[str]:
    """``incomplete: …`` lines, one per reason; none for a complete run. Then a line on the
    requests cut in flight, when there were any: the tail they would have made is unknown."""
    lines = [f"incomplete: {reason}" for reason in summary.incomplete]
    if summary.unfinished:
        lines.append(
            f"unfinished: {summary.unfinished} of {summary.requests} requests were still in "
            "flight when the run ended or was stopped (records of kind unfinished); the "
            "latency tail is over the requests that finished. A longer drain (drain_s) lets "
            "them end on their own."
        )
    return lines
