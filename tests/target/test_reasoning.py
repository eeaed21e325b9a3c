"""The reasoning phase's plan and pacing arithmetic (``target_service/reasoning.py``)."""

from __future__ import annotations

import pytest

from target_service.reasoning import gap_steps, reasoning_text, reasoning_tokens
from target_service.settings import ReasoningSettings
from target_service.textgen import generate_tokens


def test_off_by_default() -> None:
    assert reasoning_tokens(ReasoningSettings(), 256, seed=1) == 0


def test_fixed_count_is_capped_so_the_answer_keeps_a_token() -> None:
    settings = ReasoningSettings(tokens_mean=40)
    assert reasoning_tokens(settings, 256, seed=1) == 40
    assert reasoning_tokens(settings, 16, seed=1) == 15
    assert reasoning_tokens(settings, 1, seed=1) == 0


def test_drawn_count_is_deterministic_by_seed() -> None:
    settings = ReasoningSettings(tokens_mean=100, tokens_std=30)
    drawn = [reasoning_tokens(settings, 1000, seed) for seed in range(200)]
    assert drawn == [reasoning_tokens(settings, 1000, seed) for seed in range(200)]
    assert len(set(drawn)) > 20
    assert sum(drawn) / len(drawn) == pytest.approx(100, abs=8)  # 200 draws: σ/√n ≈ 2.1


def test_thoughts_do_not_change_the_answer_text() -> None:
    assert reasoning_text(7, 5) != generate_tokens(7, 5)
    assert reasoning_text(7, 0) == []


@pytest.mark.parametrize(
    ("first", "count", "reasoning", "expected"),
    [
        (0, 1, 0, (0, 0)),  # the first token of a plain stream waits for no gap
        (0, 4, 0, (0, 3)),
        (4, 4, 0, (0, 4)),
        (0, 5, 12, (4, 0)),  # thoughts 0-4
        (10, 2, 12, (2, 0)),  # the last thoughts
        (12, 5, 12, (1, 4)),  # the first answer token follows the last thought by one
        (17, 5, 12, (0, 5)),
    ],
)
def test_gap_steps(first: int, count: int, reasoning: int, expected: tuple[int, int]) -> None:
    assert gap_steps(first, count, reasoning) == expected
