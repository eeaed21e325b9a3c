"""Filler prompts: the exact length as the target counts it, distinct, beyond the pool's size."""

from __future__ import annotations

import random

import pytest

from ramplab.workload.filler import POOL_WORDS, filler_prompt, filler_text
from target_service.tokenizer import ApproxTokenizer


@pytest.mark.parametrize("tokens", [1, 7, 4096, POOL_WORDS + 3, 2 * POOL_WORDS])
def test_the_length_is_exact_as_the_target_counts_it(tokens: int) -> None:
    text = filler_text(tokens, random.Random(tokens))
    assert len(text.split()) == tokens
    assert ApproxTokenizer().count(text) == tokens


def test_prompts_differ_and_repeat_with_the_seed() -> None:
    rng = random.Random(3)
    first, second = filler_prompt(64, rng), filler_prompt(64, rng)
    assert first != second
    assert first == filler_prompt(64, random.Random(3))
    assert first[0]["role"] == "user"
