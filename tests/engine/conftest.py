"""One vLLM for the tier: started once (about 30-70 s here), stopped at the end, and checked to
have left no process behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.engine import model, server


@pytest.fixture(scope="session")
def tiny_model() -> model.Model:
    return model.ensure(seed=0)


@pytest.fixture(scope="session")
def engine(
    tiny_model: model.Model, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[server.Engine]:
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    # cached_tokens in every usage: test_prefix_counters holds them against vLLM's counters.
    settings = server.Settings(extra=("--enable-prompt-tokens-details",))
    with server.serving(tiny_model, settings, log=log) as running:
        yield running
    assert not server.group_members(running.pid), "vLLM left processes behind"
