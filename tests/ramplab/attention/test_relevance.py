"""Relevance, causality and the distance bins on hand-made attention matrices."""

from __future__ import annotations

import numpy as np
import pytest

from ramplab.attention.relevance import by_distance, check_window, head_mean, is_causal
from ramplab.errors import UsageError


def test_head_mean_is_the_column_of_the_answer_averaged_over_heads() -> None:
    attention = np.zeros((2, 3, 3))
    attention[0, :, 1] = [0.2, 0.4, 0.6]
    attention[1, :, 1] = [0.0, 0.2, 0.2]
    assert head_mean(attention, 1).tolist() == pytest.approx([0.1, 0.3, 0.4])


def test_a_lower_triangular_matrix_is_causal_a_full_one_is_not() -> None:
    full = np.full((1, 4, 4), 0.25)
    lower = np.tril(np.ones((1, 4, 4)))
    lower /= lower.sum(axis=-1, keepdims=True)
    assert not is_causal(full)
    assert is_causal(lower)


def test_bins_hold_every_position_once_with_their_mean() -> None:
    values = np.arange(20, dtype=np.float64)  # relevance = position
    bins = by_distance(values, answer=3)
    assert sum(b.positions for b in bins) == 20
    by_label = {b.label: b for b in bins}
    assert by_label["0"].mean == 3.0
    assert by_label["-1"].mean == 2.0
    assert by_label["-4 … -2"].positions == 2  # positions 0 and 1
    assert by_label["-4 … -2"].mean == 0.5
    assert by_label["+5 … +16"].positions == 12  # positions 8 … 19
    assert by_label["≥ +257"].mean is None


def test_a_context_beyond_the_window_is_refused_naming_the_option() -> None:
    check_window(512, 512)
    check_window(4096, None)  # a window the config does not state: not checked
    with pytest.raises(UsageError, match=r"--context-tokens: 513 tokens is beyond .* 512"):
        check_window(513, 512)
