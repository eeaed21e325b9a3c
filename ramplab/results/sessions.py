"""The sessions part of a summary: sessions per second offered and achieved, and TTFT by turn.

A session is one arrival of the open-loop schedule, so the offered rate of sessions is the
schedule's (``scheduled`` ÷ window), and the achieved rate counts the first turns that were sent
in the measured windows. Later turns are placed by their own intended start (the end of the
think time), like any request; TTFT by turn shows what a growing history costs the server.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ramplab.measure.record import RequestRecord
from ramplab.results.steps import percentiles
from ramplab.results.summary import SessionsSummary, TurnStats

__all__ = ["sessions_summary"]


def sessions_summary(
    records: Sequence[RequestRecord], window_s: float, scheduled: int | None
) -> SessionsSummary | None:
    """Over the measured records of a run; ``None`` when none belongs to a session."""
    by_turn: dict[int, list[RequestRecord]] = defaultdict(list)
    for record in records:
        if record.turn is not None:
            by_turn[record.turn].append(record)
    if not by_turn:
        return None
    started = sum(1 for r in by_turn.get(1, ()) if r.attempts > 0)
    turns = tuple(
        TurnStats(
            turn=turn,
            requests=len(group),
            ok=sum(1 for r in group if r.ok),
            ttft_ms=percentiles(r.ttft_ms for r in group if r.ok and r.ttft_ms is not None),
            prompt_tokens=percentiles(
                r.prompt_tokens for r in group if r.ok and r.prompt_tokens is not None
            ),
            cached_tokens=percentiles(
                r.cached_tokens for r in group if r.ok and r.cached_tokens is not None
            ),
        )
        for turn, group in sorted(by_turn.items())
    )
    has_window = window_s > 0
    return SessionsSummary(
        sessions=started,
        offered_sessions_per_s=scheduled / window_s
        if scheduled is not None and has_window
        else None,
        achieved_sessions_per_s=started / window_s if has_window else 0.0,
        turns=turns,
    )
