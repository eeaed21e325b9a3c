"""Prompts sized in a real tokenizer's tokens: exactly N for every generator, and ``approx``'s
texts unchanged.

The tokenizers are real: byte-level BPEs trained here on the repository's docs (one with a
pre-tokenizer, as every served model has, one without, whose merges span spaces), BERT's
WordPiece (MiniLM) and cl100k_base.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from ramplab.errors import UsageError
from ramplab.options.settings import UserSettings
from ramplab.options.workload import prompt_source, prompt_words, workload_of
from ramplab.workload.filler import POOL_WORDS, filler_text
from ramplab.workload.needle import NeedlePrompts, parse_needle
from ramplab.workload.prefix import SharedPrefix
from ramplab.workload.prompts import SyntheticPrompts
from ramplab.workload.source import Workload
from ramplab.workload.token_words import MIN_WORDS, TokenWords, token_words
from ramplab.workload.tokenizers import Tokenizer, load_tokenizer
from tests.ramplab.workload.conftest import train_bpe
from tests.support.cli import TINY, ramplab_in_process

LENGTHS = [*range(1, 300), 1000, 4096]


@pytest.fixture(scope="module")
def bpe(bpe_model: Path) -> TokenWords:
    words = token_words(load_tokenizer(str(bpe_model)))
    assert words is not None
    return words


@pytest.fixture(scope="module")
def spanning(tmp_path_factory: pytest.TempPathFactory) -> TokenWords:
    folder = train_bpe(tmp_path_factory.mktemp("raw") / "raw-bpe", 32000, split_words=False)
    words = token_words(load_tokenizer(str(folder)))
    assert words is not None
    return words


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_model_directory_names_its_tokenizer(bpe_model: Path) -> None:
    by_dir = load_tokenizer(str(bpe_model))
    by_file = load_tokenizer(str(bpe_model / "tokenizer.json"))
    assert by_dir.name == by_file.name == "hf:tiny-bpe"
    assert by_dir.count("prompt sizes in tokens") == by_file.count("prompt sizes in tokens")
    with pytest.raises(UsageError, match=r"directory without a tokenizer\.json"):
        load_tokenizer(str(bpe_model.parent))


def test_the_words_are_one_token_alone_and_after_a_space(bpe: TokenWords) -> None:
    count = bpe.tokenizer.count
    assert len(bpe.words) >= MIN_WORDS
    assert bpe.local  # byte-level BPE cuts at every space: texts are exact by construction
    for word in bpe.words:
        assert count(word) == count(" " + word) == 1, word


def test_synthetic_prompts_are_exactly_n_tokens(bpe: TokenWords) -> None:
    count = bpe.tokenizer.count
    for n in LENGTHS:
        prompts = SyntheticPrompts(n, 0, random.Random(n), bpe)
        text = prompts.next()[0]["content"]
        assert count(text) == prompts.prompt_tokens == n
    spread = SyntheticPrompts(200, 50.0, random.Random(1), bpe)
    for _ in range(50):
        text = spread.next()[0]["content"]
        assert spread.prompt_tokens is not None
        assert count(text) == spread.prompt_tokens


@pytest.mark.parametrize("tokens", [1, 7, 256, 8000, POOL_WORDS + 3])
def test_fillers_are_exactly_n_tokens(bpe: TokenWords, tokens: int) -> None:
    first = filler_text(tokens, random.Random(tokens), bpe)
    assert bpe.tokenizer.count(first) == tokens
    assert filler_text(tokens, random.Random(tokens), bpe) == first
    if tokens > 1:
        assert filler_text(tokens, random.Random(tokens + 1), bpe) != first


def test_shared_prefixes_are_exactly_l_tokens_and_add_to_the_request(bpe: TokenWords) -> None:
    for length in (1, 16, 300, 2048):
        prefix = SharedPrefix(2, length, 3)
        text = prefix.text("salt", 0, bpe)
        assert bpe.tokenizer.count(text) == length
        assert prefix.text("salt", 2, bpe) == text  # the same prefix for its M requests
        assert prefix.text("salt", 1, bpe) != text
        workload = Workload(None, prefix=prefix, salt="salt", words=bpe)
        prompt = workload.next(0, SyntheticPrompts(40, 0, random.Random(3), bpe))
        assert [bpe.tokenizer.count(m["content"]) for m in prompt.messages] == [length, 40]
        assert prompt.tokens == length + 40


@pytest.mark.parametrize("shared", [True, False])
def test_needle_contexts_are_exactly_their_length(bpe: TokenWords, shared: bool) -> None:
    spec = parse_needle(
        {"lengths": [64, 500, 3000], "depths": [0, 0.3, 1], "shared_prefix": shared}
    )
    prompts = NeedlePrompts(spec, random.Random(2), words=bpe)
    for _ in range(18):
        text = prompts.next()[0]["content"]
        length = prompts.prompt_labels["needle_length"]
        assert bpe.tokenizer.count(text) == prompts.prompt_tokens == length
        assert "The secret passphrase of" in text


def test_a_tokenizer_whose_merges_span_spaces_is_verified_to_the_exact_length(
    spanning: TokenWords,
) -> None:
    count = spanning.tokenizer.count
    assert not spanning.local
    # Its words joined cost more than one token each: texts need the verifying rounds.
    joined = " ".join(spanning.words[:40])
    assert count(joined) > 40
    rng = random.Random(5)
    for n in LENGTHS:
        assert count(spanning.text(n, rng)) == n
    assert count(filler_text(777, rng, spanning)) == 777
    assert count(SharedPrefix(1, 90, 1).text("s", 0, spanning)) == 90


def test_too_few_single_token_words_is_a_usage_error_before_the_run(tmp_path: Path) -> None:
    folder = train_bpe(tmp_path / "tiny", 300)  # bytes and a few merges: hardly a word
    with pytest.raises(UsageError, match=r"workload.tokenizer.*hf:tiny has \d+ words.*approx"):
        token_words(load_tokenizer(str(folder)))
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(
        TINY.replace("prompt_tokens: 16", f"prompt_tokens: 16, tokenizer: {folder}")
    )
    done = ramplab_in_process(["validate", str(campaign)])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "workload.tokenizer" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("name", ["cl100k", "minilm"])
def test_shipped_real_tokenizers_size_exactly_too(
    name: str, request: pytest.FixtureRequest
) -> None:
    tokenizer: Tokenizer = request.getfixturevalue(name)
    words = token_words(tokenizer)
    assert words is not None
    assert words.local
    assert len(words.words) > 1000
    for n in (1, 33, 512):
        assert (
            tokenizer.count(SyntheticPrompts(n, 0, random.Random(n), words).next()[0]["content"])
            == n
        )


def test_approx_keeps_its_four_letter_texts_bit_for_bit() -> None:
    # The texts the word path wrote before prompts could be sized in a real tokenizer's tokens.
    assert token_words(load_tokenizer("approx")) is None
    settings = UserSettings()
    assert settings.tokenizer == "approx"
    assert prompt_words(settings) is None
    synthetic = SyntheticPrompts(64, 8.0, random.Random(7))
    assert [sha(synthetic.next()[0]["content"]) for _ in range(3)] == [
        "edfa88de5a96bda8", "990c89ee7d1e3edb", "cefd0232fa68ee40"
    ]  # fmt: skip
    assert sha(filler_text(300, random.Random(7))) == "548c74b0387e5e69"
    assert sha(SharedPrefix(2, 50, 3).text("salt", 4)) == "a04818211ffa8aec"
    needle = NeedlePrompts(parse_needle({"lengths": [64, 500], "depths": [0, 0.5, 1]}),
                           random.Random(7))  # fmt: skip
    assert [sha(needle.next()[0]["content"]) for _ in range(6)] == [
        "fb8c0f20a478c801", "86b2b03e8298a39d", "60a7973939975507", "ec66571a67379569",
        "a1141ece9862aba2", "2e0b929deaa7a70d",
    ]  # fmt: skip


def test_the_settings_tokenizer_sizes_every_generator(bpe_model: Path) -> None:
    settings = UserSettings(
        tokenizer=str(bpe_model),
        prompt_tokens=77,
        shared_prefix={"prefixes": 1, "prefix_tokens": 33, "requests_per_prefix": 2},
    )
    words = prompt_words(settings)
    assert words is not None
    assert prompt_words(settings) is words  # found once per process
    count = words.tokenizer.count
    source = prompt_source(settings, random.Random(1))
    workload = workload_of(settings)
    assert workload is not None
    prompt = workload.next(0, source)
    assert [count(m["content"]) for m in prompt.messages] == [33, 77]
    assert prompt.tokens == 110
    needle = UserSettings(tokenizer=str(bpe_model), needle={"lengths": [200], "depths": [0.5]})
    contexts = prompt_source(needle, random.Random(1))
    assert isinstance(contexts, NeedlePrompts)
    assert count(contexts.next()[0]["content"]) == contexts.prompt_tokens == 200
