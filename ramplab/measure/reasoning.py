"""A reasoning model's two phases in one stream: thoughts first, then the answer.

Definitions (``docs/metrics.md``):

- an event is an *answer* event when it carries ``delta.content`` (or legacy ``text``); one that
  carries only ``reasoning_content``/``reasoning`` is a *reasoning* event. The answer phase begins
  at the first answer event; the events before it are the reasoning phase
  (``reasoning_events`` of them);
- ``ttft_ms`` stays the first output of any kind (time to first output), ``answer_ttft_ms`` is
  the first answer event (time to first answer token); without reasoning they are equal;
- reasoning ITL: the per-token gaps between reasoning events; answer ITL: those between answer
  events. The one gap from the last thought to the first answer token belongs to neither (it is
  part of ``answer_ttft_ms − ttft_ms``); ``itl_ms`` keeps every gap, as before;
- ``reasoning_tokens``: the server's ``usage.completion_tokens_details.reasoning_tokens``, else
  the tokens counted in the reasoning events, ``None`` when neither shows any reasoning.

The record stores one count (``reasoning_events``) rather than two more gap lists: the phases'
gaps are slices of ``itl_ms``, found through ``tokens_per_event``.
"""

from __future__ import annotations

from ramplab.measure.record import RequestRecord
from ramplab.measure.result import AttemptResult

__all__ = ["note_phases", "phase_itls"]


def note_phases(record: RequestRecord, result: AttemptResult, intended: float) -> None:
    """Set the record's phase fields from the attempt that produced its stream."""
    events = result.token_events
    first_answer = next((i for i, event in enumerate(events) if event.answer), len(events))
    record.reasoning_events = first_answer
    if first_answer < len(events):
        record.answer_ttft_ms = (events[first_answer].at - intended) * 1000.0
    if result.reasoning_tokens is not None:
        record.reasoning_tokens = result.reasoning_tokens
    elif first_answer > 0:
        record.reasoning_tokens = sum(record.tokens_per_event[:first_answer])


def phase_itls(record: RequestRecord) -> tuple[list[float], list[float]]:
    """The record's per-token gaps of the reasoning phase and of the answer phase."""
    thoughts = record.reasoning_events
    if thoughts == 0:
        return [], record.itl_ms
    counts = record.tokens_per_event
    # ``itl_ms`` holds ``counts[j]`` gaps for each event j ≥ 1, in order.
    reasoning = sum(counts[1:thoughts])
    transition = counts[thoughts] if thoughts < len(counts) else 0
    return record.itl_ms[:reasoning], record.itl_ms[reasoning + transition :]
