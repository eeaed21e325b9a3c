"""`--tokenizer`: the load generator counts with the tokenizer it names; approx the fallback."""

from __future__ import annotations

import pytest

from ramplab.errors import UsageError
from ramplab.options.settings import UserSettings
from ramplab.plugin.context import UserContext
from ramplab.workload.tokenizers import ApproxTokenizer, load_tokenizer
from tests.ramplab.workload.conftest import MINILM

TEXT = "Tokens are what prefill pays for — 中文也一样。"


def test_approx_is_the_light_fallback() -> None:
    assert isinstance(load_tokenizer("approx"), ApproxTokenizer)


@pytest.mark.parametrize("spec", ["cl100k_base", str(MINILM)])
def test_a_real_tokenizer_counts_as_the_analyser_does(spec: str) -> None:
    assert load_tokenizer(spec).count(TEXT) == load_tokenizer(spec).count(TEXT)
    assert load_tokenizer(spec).count(TEXT) != ApproxTokenizer().count(TEXT)


def test_an_unknown_tokenizer_is_refused_naming_the_option() -> None:
    with pytest.raises(UsageError, match="--tokenizer: unknown tokenizer 'gpt-17'"):
        load_tokenizer("gpt-17")


def test_the_process_context_holds_the_counter_its_settings_name() -> None:
    context = UserContext.create(UserSettings(tokenizer="cl100k_base"), "http://127.0.0.1:9", "w")
    try:
        assert context.counter.count(TEXT) == load_tokenizer("cl100k_base").count(TEXT)
    finally:
        context.client.close()
    with pytest.raises(UsageError, match="--tokenizer"):
        UserContext.create(UserSettings(tokenizer="nope.json"), "http://127.0.0.1:9", "w")
