"""A shared-prefix run against the real target reports the hit rate its prefix cache implies.

The target's model (``target_service/prefix_cache.py``): whole blocks of 16 tokens, chained
hashes, cached once prefill ends, at most ``⌊(P − 1) / 16⌋ × 16`` tokens. Here every prompt is a
64-token prefix (4 whole blocks) and a 20-token synthetic question (ten four-letter words drawn
per user: two questions share their first block with probability 10⁻¹⁶), so P = 84 and a request
whose prefix an earlier request sent hits exactly 64 tokens. With 3 prefixes × 4 requests each,
arrival ``a`` is a first use iff ``a mod 12 < 3``; at 8 QPS its prefix's previous request ended
prefill ~0.4 s before (the prefill model: 5 ms), and the cache holds 1 M tokens, far more than the
run sends. So the expected figures follow from the arrival indices alone, and are compared exactly:
``prefix_hit_ratio = hits / n``, ``cached_tokens_ratio = 64 × hits / (84 × n)``.

The second run gets a fresh salt (no ``--prefix-salt``): the cache still holds the first run's
prefixes, and the figures must be those of a cold start again. That is what the salt is for (a
fixed salt giving the same prefixes again is checked on the prefixes themselves, in
``test_datasets.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ramp_runs import RampRun, run_ramp
from tests.support.targets import SharedTarget

pytestmark = pytest.mark.slow

N, L, M, QUESTION = 3, 64, 4, 20
ARGS = [
    "--ramplab-shape", "8@3s", "--ramplab-arrivals", "constant",
    "--shared-prefix", json.dumps({"prefixes": N, "prefix_tokens": L, "requests_per_prefix": M}),
    "--prompt-tokens", str(QUESTION), "--max-tokens", "4",
]  # fmt: skip


def check_cold_figures(run: RampRun) -> None:
    assert run.returncode == 0, run.tail()
    records = run.records
    summary = run.summary
    assert summary["dropped"] == 0  # every first use was sent, so every later use can hit
    arrivals = [r["arrival"] for r in records]
    assert len(set(arrivals)) == len(records) == summary["requests"] >= 20
    hits = sum(1 for a in arrivals if a % (N * M) >= N)
    for r in records:
        assert r["prompt_tokens"] == L + QUESTION
        assert r["cached_tokens"] == (L if r["arrival"] % (N * M) >= N else 0), r["arrival"]
    assert summary["prefix_hit_ratio"] == pytest.approx(hits / len(records))
    assert summary["cached_tokens_ratio"] == pytest.approx(
        L * hits / ((L + QUESTION) * len(records))
    )


def test_hit_rate_is_the_cache_models_and_a_new_salt_starts_cold(
    shared_target: SharedTarget, tmp_path: Path
) -> None:
    target = shared_target.reset({"prefix_cache": {"enabled": True, "block_tokens": 16}})
    first = run_ramp(tmp_path / "a", target.url, [*ARGS, "--prefix-salt", "first"])
    check_cold_figures(first)
    second = run_ramp(tmp_path / "b", target.url, ARGS)  # a salt of its own
    check_cold_figures(second)
