"""The conservation law: every arrival is sent or dropped, every request sent has a record.

Per step (measured windows)::

    scheduled  = dispatched + dropped + lost
    dispatched = completed + failed + unfinished          (+ unaccounted, which must be 0)

``dropped``: arrivals no free user could take (open loop), the worker at its cap on users — below
it a user is started for the arrival (``ramplab/plugin/ondemand.py``); one whose new user the
run's stop killed before it ran counts here too. ``lost``: arrivals dealt to a worker
that died before it sent them. ``unfinished``: requests cut by the run's end, an interruption
or a crash, each with its record (error kind ``unfinished``). ``unaccounted``: requests a worker
reported as sent that have no record at all — records lost with a killed process, or a writer
that failed. A run whose law does not balance, that lost arrivals, or that was stopped early is
*incomplete*, and ``RunSummary.incomplete`` says why, one reason per line.

A multi-turn session is one arrival and several records: only its first turn is held against
``dispatched`` (later turns are not the schedule's arrivals).
"""

from __future__ import annotations

from collections.abc import Sequence

from ramplab.measure.record import RequestRecord

__all__ = ["accounted", "incomplete_reasons", "unaccounted"]


def accounted(records: Sequence[RequestRecord]) -> int:
    """The records that stand for a dispatched arrival (a session's first turn only)."""
    return sum(1 for r in records if r.turn is None or r.turn <= 1)


def unaccounted(dispatched: int | None, records: Sequence[RequestRecord]) -> int | None:
    """Dispatched requests without a record (negative: records beyond what was dispatched)."""
    return None if dispatched is None else dispatched - accounted(records)


def incomplete_reasons(
    steps: Sequence[tuple[int, int | None, int | None]],
    stopped_at_s: float | None,
    *,
    corrupt: int = 0,
    crashed: bool = False,
) -> tuple[str, ...]:
    """Why a run is incomplete, from each step's ``(index, unaccounted, lost)``, the corrupt
    lines skipped in ``requests.jsonl`` and whether the master ended without a summary
    (``crashed``: the summary was rebuilt, cut at the last record); empty when the law balances
    everywhere and the run was neither stopped early nor crashed."""
    reasons: list[str] = []
    if crashed:
        where = f" at {stopped_at_s:.1f} s" if stopped_at_s is not None else ""
        reasons.append(
            f"the master ended without writing its summary{where} (a crash, or a write that "
            "failed): rebuilt from its records, cut at the last one"
        )
    elif stopped_at_s is not None:
        reasons.append(f"the run was stopped at {stopped_at_s:.1f} s, before its schedule ended")
    if corrupt:
        reasons.append(f"{corrupt} corrupt lines in requests.jsonl were skipped")
    for index, missing, lost in steps:
        if missing is not None and missing > 0:
            reasons.append(f"step {index}: {missing} dispatched requests have no record")
        elif missing is not None and missing < 0:
            reasons.append(
                f"step {index}: {-missing} more records than dispatched requests "
                "(a worker's last report was lost)"
            )
        if lost:
            reasons.append(
                f"step {index}: {lost} scheduled arrivals were never sent "
                "(their worker died, or stopped before them)"
            )
    return tuple(reasons)
