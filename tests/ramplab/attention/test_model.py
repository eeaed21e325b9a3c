"""The real model: the packaged all-MiniLM-L6-v2, loaded once, and a tiny causal LM saved here.

"Near" the answer token, for the constructed example (the default needle in 128 tokens of
filler, at 0/50/100 % depth), means: the peak of the relevance vector lies within 8 tokens of
the answer token (the needle is 12 WordPieces long) and the answer token's own relevance is at
least 5× the uniform share 1/n. Measured on 2026-12-03 at 128 tokens it is 11–17× uniform
(0.086–0.131 against 0.0078) and the peak is at distance 0 or +1 (0 % depth: +1, the
answer's next WordPiece ``##mal``), so both margins hold with room.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ramplab.attention.model import LoadedModel, default_model_dir, load_model
from ramplab.attention.probe import TokenizerEncoder, build_probes
from ramplab.attention.relevance import Relevance, measure
from ramplab.errors import UsageError

# One model load for every test here: the module runs on one xdist worker, not once on each.
pytestmark = pytest.mark.xdist_group("attention-model")
TOKENS = 128
NEAR = 8


@pytest.fixture(scope="module")
def minilm() -> LoadedModel:
    return load_model(None)


@pytest.fixture(scope="module")
def results(minilm: LoadedModel) -> list[Relevance]:
    probes = build_probes(TokenizerEncoder(minilm.tokenizer), [0, 50, 100], TOKENS)
    return measure(minilm, probes)


def test_the_packaged_model_is_minilm_with_its_window(minilm: LoadedModel) -> None:
    assert (minilm.window, minilm.layers, minilm.heads) == (512, 6, 12)
    assert minilm.directory == default_model_dir()


def test_one_relevance_per_position_and_a_peak_near_the_answer(results: list[Relevance]) -> None:
    for r in results:
        assert r.positions == TOKENS
        assert r.answer_token == "mar"  # the first WordPiece of "marmalade"
        assert not r.causal
        assert np.all(r.values >= 0)
        assert abs(r.peak_distance()) <= NEAR, (r.depth, r.peak_distance())
        assert r.values[r.answer] >= 5 * r.uniform, (r.depth, r.values[r.answer])


def test_a_directory_without_a_model_is_refused_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--model: .* not a Hugging Face model directory"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UsageError, match="--model: cannot load a model"):
        load_model(tmp_path)


def test_a_causal_lm_sees_the_answer_only_from_after_it(tmp_path: Path) -> None:
    """Any local model directory works: a two-layer GPT-2 with random weights, MiniLM's
    tokenizer beside it. Its mask zeroes the relevance of every query before the answer."""
    import torch
    import transformers

    torch.manual_seed(7)
    config = transformers.GPT2Config(
        vocab_size=30522, n_positions=96, n_embd=32, n_layer=2, n_head=2
    )
    transformers.GPT2Model(config).save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(default_model_dir() / name, tmp_path / name)
    tiny = load_model(tmp_path)
    assert (tiny.window, tiny.layers, tiny.heads) == (96, 2, 2)
    [r] = measure(tiny, build_probes(TokenizerEncoder(tiny.tokenizer), [50], 96))
    assert r.causal
    assert r.positions == 96
    assert np.all(r.values[: r.answer] == 0)
    assert np.all(r.values[r.answer :] > 0)
