"""vLLM serving the tiny model: a streamed chat completion of exactly ``max_tokens`` tokens, and
the server's own counters moved by exactly what was sent.

The ``engine`` tier: ``make engines`` (the venv is built on first use, 2-7 min; vLLM starts in
30-70 s here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jinja2
import pytest
from tokenizers import Tokenizer

from bench.engine import model, server
from bench.engine.errors import EngineError
from tests.support.scrape import metric

pytestmark = [pytest.mark.engine, pytest.mark.xdist_group("engine"), pytest.mark.timeout(900)]

COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")


def _counters(url: str) -> dict[str, float]:
    values = {name: metric(f"{url}/metrics", name) for name in COUNTERS}
    values["length"] = metric(
        f"{url}/metrics", "vllm:request_success_total", finished_reason="length"
    )
    values["all"] = metric(f"{url}/metrics", "vllm:request_success_total")
    return values


def _stream(url: str, name: str, content: str, max_tokens: int) -> dict[str, Any]:
    """One streamed chat completion; the tokens counted from the stream itself (one logprob
    entry a token, however vLLM merges tokens into events) and the usage it ended with."""
    body = {
        "model": name,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
    }
    tokens, events, usage, done = 0, 0, None, False
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line.removeprefix("data: ")
            if data == "[DONE]":
                done = True
                continue
            chunk = json.loads(data)
            usage = chunk.get("usage") or usage
            for choice in chunk["choices"]:
                if choice.get("logprobs"):
                    tokens += len(choice["logprobs"]["content"])
                    events += 1
    return {"tokens": tokens, "events": events, "usage": usage, "done": done}


def _prompt_tokens(made: model.Model, content: str) -> int:
    """The prompt in the model's own tokens, counted here rather than by vLLM."""
    config = json.loads((made.path / "tokenizer_config.json").read_text())
    rendered = jinja2.Template(config["chat_template"]).render(
        messages=[{"role": "user", "content": content}], add_generation_prompt=True
    )
    return len(Tokenizer.from_file(str(made.path / "tokenizer.json")).encode(rendered).ids)


def test_a_stream_is_max_tokens_long_and_the_counters_move_by_what_was_sent(
    engine: server.Engine,
) -> None:
    content = "count the tokens of this prompt in the server's own tokenizer, please"
    before = _counters(engine.url)
    sent = [_stream(engine.url, engine.model.name, content, n) for n in (24, 7)]
    after = _counters(engine.url)
    assert [s["tokens"] for s in sent] == [24, 7]
    assert all(s["done"] for s in sent)
    assert [s["usage"]["completion_tokens"] for s in sent] == [24, 7]
    prompt = _prompt_tokens(engine.model, content)
    assert [s["usage"]["prompt_tokens"] for s in sent] == [prompt, prompt]
    moved = {name: after[name] - before[name] for name in after}
    assert moved == {
        "vllm:prompt_tokens_total": 2 * prompt,
        "vllm:generation_tokens_total": 24 + 7,
        "length": 2,  # ignore_eos: every one ends on max_tokens
        "all": 2,
    }


def test_a_server_that_exits_while_starting_is_an_error_that_quotes_its_log(
    tiny_model: model.Model, tmp_path: Path
) -> None:
    # Longer than the model's 2,048 positions: vLLM refuses it once it has read the config.
    settings = server.Settings(max_model_len=4 * model.MAX_CONTEXT)
    lines: list[str] = []
    with pytest.raises(EngineError, match="vLLM exited with code 1 before it was ready") as caught:
        server.start(tiny_model, settings, log=tmp_path / "vllm.log", progress=lines.append)
    assert "max_model_len" in str(caught.value)  # vLLM's own reason, from its log
    assert lines[0].startswith("vllm: starting on http://127.0.0.1:")
    assert not _running_in(tmp_path)  # the server runs in its log's directory: none is left


def _running_in(directory: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cwd").resolve() == directory.resolve():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
