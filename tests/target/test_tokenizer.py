"""The target's prompt-token counting: the same names and counts as ramplab's ``--tokenizer``
(duplicated on purpose: neither package imports the other), and bad settings named."""

from __future__ import annotations

from pathlib import Path

import pytest

from ramplab.workload.prompt_file import read_prompts
from ramplab.workload.tokenizers import load_tokenizer
from target_service.errors import SettingsError
from target_service.settings import load_settings
from target_service.tokenizer import make_tokenizer
from tests.ramplab.workload.conftest import MINILM, SAMPLE


@pytest.mark.parametrize("spec", ["approx", "cl100k_base", str(MINILM)])
def test_counts_equal_ramplabs_on_the_sample_corpus(spec: str) -> None:
    target, ours = make_tokenizer(spec), load_tokenizer(spec)
    texts = [t for p in read_prompts(SAMPLE) for t in p.texts]
    assert [target.count(t) for t in texts] == [ours.count(t) for t in texts]


def test_a_tokenizer_that_is_not_one_is_refused_naming_the_key() -> None:
    with pytest.raises(SettingsError, match=r"tokenizer=.*'gpt-17': expected approx, cl100k_base"):
        load_settings(tokenizer="gpt-17")


def test_a_file_that_is_not_a_tokenizer_fails_at_load_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(SettingsError, match=r"tokenizer=.* cannot be loaded"):
        make_tokenizer(str(bad))
