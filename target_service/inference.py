"""The inference model: how long a simulated LLM takes, in one place.

With ``P`` prompt tokens, ``N`` output tokens and ``R`` sequences running on the engine:

* queue wait ``W``: time from arrival until the scheduler admits the sequence (``scheduler.py``);
* prefill, with ``C`` of the ``P`` prompt tokens found in the prefix cache (``prefix_cache.py``;
  ``C = 0`` when it is off)::

      T_prefill = prefill_overhead + (P − C) × prefill_per_token + C × prefill_cached_per_token
                  + (P² − C²) × prefill_per_token_sq

  the last term is attention's: prompt token ``i`` attends to the ``i`` before it, so computing
  tokens ``C … P`` costs ``Σ i ≈ (P² − C²) / 2`` (the ½ is folded into the coefficient), and
  cached tokens are not recomputed but still attended to. ``prefill_cached_per_token`` is 0 by
  default (a KV-cache hit is free); with ``prefill_per_token_sq = 0`` (the default) prefill is
  linear in ``P`` as before;
* TTFT (server side) ``= W + T_prefill``: the first token is due when prefill ends;
* decode: token ``i ≥ 2`` is due at ``d_i = d_{i−1} + itl × s(R)``, with the slowdown
  ``s(R) = 1 + slowdown_per_seq × (R − 1)`` read at each step, so the nominal deadlines are
  absolute and sleeping until them cannot drift, however long the output;
* jitter: each token is sent at ``d_i + ε_i``, ``ε_i ~ N(0, itl_jitter)`` clipped to
  ``[−itl/2, +itl/2]``; ``ε`` never feeds back into ``d``, so jitter does not accumulate either;
* output length ``N``: ``max_tokens`` exactly with ``ignore_eos``, otherwise a normal draw
  (``length_mean``, ``length_std``) rounded and clipped to ``[1, max_tokens]``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from target_service.settings import LatencySettings, OutputSettings


@dataclass(frozen=True, slots=True)
class OutputPlan:
    tokens: int
    finish_reason: str  # "length" when max_tokens cut it, "stop" otherwise


class InferenceModel:
    """Pure functions of the settings and of the random generator or seed passed in."""

    def __init__(self, latency: LatencySettings, output: OutputSettings) -> None:
        self.latency = latency
        self.output = output

    def prefill_s(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        lat = self.latency
        computed = prompt_tokens - cached_tokens
        ms = (
            lat.prefill_overhead_ms
            + computed * lat.prefill_per_token_ms
            + cached_tokens * lat.prefill_cached_per_token_ms
            + (prompt_tokens * prompt_tokens - cached_tokens * cached_tokens)
            * lat.prefill_per_token_sq_ms
        )
        return ms / 1000.0

    def slowdown(self, running: int) -> float:
        return 1.0 + self.latency.slowdown_per_seq * max(0, running - 1)

    def token_interval_s(self, running: int) -> float:
        """Nominal gap between two tokens' deadlines with ``running`` sequences on the engine."""
        return self.latency.itl_ms * self.slowdown(running) / 1000.0

    def jitter_s(self, rng: random.Random) -> float:
        sigma = self.latency.itl_jitter_ms
        if sigma <= 0:
            return 0.0
        bound = self.latency.itl_ms / 2.0
        return max(-bound, min(bound, rng.gauss(0.0, sigma))) / 1000.0

    def plan_output(self, max_tokens: int, ignore_eos: bool, seed: int) -> OutputPlan:
        """The output length, drawn from ``random.Random(seed)`` (built only when a draw is
        needed: seeding costs more than the rest of planning)."""
        if ignore_eos:
            return OutputPlan(max_tokens, "length")
        out = self.output
        drawn = (
            round(random.Random(seed).gauss(out.length_mean, out.length_std))
            if out.length_std
            else 0
        )
        length = drawn if out.length_std else round(out.length_mean)
        if length >= max_tokens:
            return OutputPlan(max_tokens, "length")
        return OutputPlan(max(1, length), "stop")
