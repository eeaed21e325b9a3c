"""The reasoning phase: ``reasoning_content`` deltas streamed before the answer.

A reasoning model thinks before it answers; a client that stamps its TTFT on the first delta of
any kind sees the first *thought*, not the first answer token. This module decides how long the
thinking lasts, so the client's two figures (time to first output, time to first answer) differ by
a known amount:

* ``R`` reasoning tokens per request: ``tokens_mean`` exactly when ``tokens_std`` is 0, else a
  normal draw from ``random.Random(seed ^ SALT)`` rounded and clipped to ``[0, max_tokens − 1]``;
  ``max_tokens`` bounds reasoning and answer together, as OpenAI's ``max_completion_tokens``
  does, and the answer keeps at least one token;
* reasoning token ``k`` is due at ``first_due + k × reasoning_itl × s(running)``, the first answer
  token at ``first_due + R × reasoning_itl × s(running)``: the reasoning phase lasts
  ``R × reasoning.itl_ms`` (times the decode slowdown, as every token does), then the answer is
  paced by ``latency.itl_ms`` as without reasoning;
* usage: ``completion_tokens`` = ``R`` + answer tokens, and
  ``completion_tokens_details.reasoning_tokens`` = ``R``. The signature (``signing.py``) covers
  the answer's text only, as before.

Off by default (``tokens_mean = 0``): the stream is then byte for byte what it was without this
module.
"""

from __future__ import annotations

import random

from target_service.settings import ReasoningSettings
from target_service.textgen import generate_tokens

# Thoughts are drawn from their own stream of the request's seed, so the answer's text for a seed
# is the same with reasoning on or off (clients verify it: ``--verify-text``).
SALT = 0x5EA5_0000


def reasoning_tokens(settings: ReasoningSettings, max_tokens: int, seed: int) -> int:
    """How many reasoning tokens a request with ``max_tokens`` and ``seed`` thinks for."""
    if settings.tokens_mean <= 0 or max_tokens <= 1:
        return 0
    if settings.tokens_std > 0:
        drawn = round(random.Random(seed ^ SALT).gauss(settings.tokens_mean, settings.tokens_std))
    else:
        drawn = round(settings.tokens_mean)
    return max(0, min(drawn, max_tokens - 1))


def reasoning_text(seed: int, count: int) -> list[str]:
    """The ``count`` reasoning tokens of a request with ``seed`` (deterministic, as answers are)."""
    return generate_tokens(seed ^ SALT, count) if count else []


def gap_steps(first: int, count: int, reasoning: int) -> tuple[int, int]:
    """Token gaps an event of tokens ``[first, first + count)`` waits for: (reasoning, answer).

    The gap before token ``i ≥ 1`` is a reasoning interval while ``i ≤ reasoning`` (the first
    answer token follows the last thought by one reasoning interval), an answer interval after.
    """
    start = max(first, 1)
    end = first + count
    if end <= start:
        return 0, 0
    in_reasoning = max(0, min(end, reasoning + 1) - start)
    return in_reasoning, (end - start) - in_reasoning
