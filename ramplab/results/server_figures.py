"""Figures of what the workload looked like to the server: reasoning phases and prefix-cache hits.

Definitions (``docs/summary.md`` quotes these; the per-request values: ``measure/phases.py``):

- ``answer_ttft_ms``, ``reasoning_tokens``: over successful records that have them;
  ``reasoning_itl_ms``/``answer_itl_ms`` pool the phases' per-token gaps of every successful
  record (without reasoning every gap is an answer gap, so ``answer_itl_ms`` equals ``itl_ms``);
- ``cached_tokens_ratio``: Σ ``cached_tokens`` ÷ Σ ``prompt_tokens`` over the records whose
  server reported ``usage.prompt_tokens_details.cached_tokens``; ``prefix_hit_ratio``: the share
  of those records with any cached token. Both ``None`` when no record carried the field — a
  server that does not report its cache is not a cache that never hits.
- ``prompt_tokens_requested``: the mean ``requested_prompt_tokens`` (the size the client wrote
  the prompt to, in ``workload.tokenizer``'s tokens) over the records sent (≥ 1 attempt) that
  carry one; ``prompt_tokens_served``: the mean ``prompt_tokens`` the server reported in
  ``usage`` over the records sent that carry it — its chat template included. Each ``None``
  when no record carries it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ramplab.measure.reasoning import phase_itls
from ramplab.measure.record import RequestRecord
from ramplab.results.summary import Percentiles

__all__ = ["workload_figures"]


def workload_figures(
    records: Sequence[RequestRecord], percentiles: Callable[[Iterable[float]], Percentiles]
) -> dict[str, Any]:
    """The workload fields of ``Figures`` for the records of one window (``percentiles``: the
    one definition in ``steps.py``)."""
    ok = [r for r in records if r.ok]
    reasoning: list[float] = []
    answer: list[float] = []
    for record in ok:
        thoughts, said = phase_itls(record)
        reasoning.extend(thoughts)
        answer.extend(said)
    reported = [r for r in records if r.cached_tokens is not None and r.prompt_tokens]
    prompt = sum(r.prompt_tokens or 0 for r in reported)
    cached = sum(r.cached_tokens or 0 for r in reported)
    hits = sum(1 for r in reported if (r.cached_tokens or 0) > 0)
    sent = [r for r in records if r.attempts > 0]
    requested = [r.requested_prompt_tokens for r in sent if r.requested_prompt_tokens is not None]
    served = [r.prompt_tokens for r in sent if r.prompt_tokens is not None]
    return {
        "answer_ttft_ms": percentiles(r.answer_ttft_ms for r in ok if r.answer_ttft_ms is not None),
        "reasoning_itl_ms": percentiles(reasoning),
        "answer_itl_ms": percentiles(answer),
        "reasoning_tokens": percentiles(
            float(r.reasoning_tokens) for r in ok if r.reasoning_tokens is not None
        ),
        "cached_tokens_ratio": cached / prompt if prompt else None,
        "prefix_hit_ratio": hits / len(reported) if reported else None,
        "prompt_tokens_requested": sum(requested) / len(requested) if requested else None,
        "prompt_tokens_served": sum(served) / len(served) if served else None,
    }
