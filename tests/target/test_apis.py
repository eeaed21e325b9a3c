"""``/v1/completions`` and ``/v1/responses`` beside chat: one engine, three wire formats.

Checked with the official SDK (which types every Responses event it reads) and with raw HTTP for
the bytes the SDK hides: sequence numbers, the end of the stream, the 4xx bodies.
"""

from __future__ import annotations

import math
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.support.targets import ThreadTarget
from tests.target.conftest import StartThreadTarget

MODEL = "ramplab-sim-1"
PROMPT = "Say something, please."
MESSAGES: Any = [{"role": "user", "content": PROMPT}]


def client_for(target: ThreadTarget) -> openai.OpenAI:
    return openai.OpenAI(base_url=target.url + "/v1", api_key="sk-test", max_retries=0)


@pytest.fixture
def target(start_thread_target: StartThreadTarget) -> ThreadTarget:
    return start_thread_target({})


def _events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of every event of a Responses stream, comments skipped."""
    out = []
    for block in response.text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        assert lines[0].startswith("event: "), block
        assert lines[1].startswith("data: "), block
        out.append((lines[0][7:], orjson.loads(lines[1][6:])))
    return out


def _chat_usage(target: ThreadTarget, tokens: int, seed: int) -> tuple[str, int]:
    answer = client_for(target).chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=tokens,
        seed=seed,
        extra_body={"ignore_eos": True},
    )
    assert answer.usage is not None
    return answer.choices[0].message.content or "", answer.usage.prompt_tokens


@pytest.mark.parametrize("chunk_size", [1, 4])
def test_completions_stream_text_chunks_usage_and_done(
    target: ThreadTarget, chunk_size: int
) -> None:
    tokens = 13
    stream = client_for(target).completions.create(
        model=MODEL,
        prompt=PROMPT,
        stream=True,
        max_tokens=tokens,
        seed=7,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "chunk_size": chunk_size},
    )
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert len(texts) == math.ceil(tokens / chunk_size)
    assert all(c.object == "text_completion" and c.id.startswith("cmpl-") for c in chunks)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length"
    assert set(finishes[:-1]) == {None}
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    answer, prompt_tokens = _chat_usage(target, tokens, seed=7)
    # The same engine: the same text for the same seed, the same prompt count for the same text.
    assert "".join(texts) == answer
    assert chunks[-1].usage.completion_tokens == tokens
    assert chunks[-1].usage.prompt_tokens == prompt_tokens
    raw = httpx.post(
        target.url + "/v1/completions",
        json={"model": MODEL, "prompt": PROMPT, "stream": True, "max_tokens": 2},
    )
    assert raw.text.endswith("data: [DONE]\n\n")
    assert '"usage"' not in raw.text  # not asked for


def test_completions_whole_body(target: ThreadTarget) -> None:
    answer = client_for(target).completions.create(
        model=MODEL, prompt=[PROMPT], max_tokens=9, seed=3, extra_body={"ignore_eos": True}
    )
    assert answer.object == "text_completion"
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 9
    assert answer.choices[0].text == _chat_usage(target, 9, seed=3)[0]


def test_responses_stream_events_in_order_with_usage(target: ThreadTarget) -> None:
    tokens = 11
    stream = client_for(target).responses.create(
        model=MODEL,
        input=MESSAGES,
        stream=True,
        max_output_tokens=tokens,
        store=False,
        extra_body={"ignore_eos": True, "chunk_size": 3, "seed": 5},
    )
    events = list(stream)
    kinds = [e.type for e in events]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * math.ceil(tokens / 3),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = events[-1].response  # type: ignore[union-attr]
    answer, prompt_tokens = _chat_usage(target, tokens, seed=5)
    assert "".join(deltas) == answer == done.output_text
    assert done.id.startswith("resp_")
    # vLLM's way: a response cut by max_output_tokens is completed with status incomplete.
    assert done.status == "incomplete"
    assert done.incomplete_details is not None
    assert done.incomplete_details.reason == "max_output_tokens"
    assert done.usage is not None
    assert done.usage.output_tokens == tokens
    assert done.usage.input_tokens == prompt_tokens  # the same prompt as chat's messages
    assert done.usage.input_tokens_details.cached_tokens == 0
    assert done.usage.total_tokens == tokens + prompt_tokens
    raw = httpx.post(
        target.url + "/v1/responses",
        json={"model": MODEL, "input": PROMPT, "stream": True, "max_output_tokens": 2},
    )
    assert "[DONE]" not in raw.text  # the Responses API ends with response.completed
    assert _events(raw)[-1][0] == "response.completed"
    assert ": ramplab-timing " in raw.text  # the comments come before it


def test_responses_whole_body(target: ThreadTarget) -> None:
    answer = client_for(target).responses.create(
        model=MODEL,
        input=PROMPT,
        instructions="Be brief.",
        max_output_tokens=6,
        extra_body={"ignore_eos": True, "seed": 9},
    )
    assert answer.object == "response"
    assert answer.status == "incomplete"
    assert answer.output_text == _chat_usage(target, 6, seed=9)[0]
    assert answer.usage is not None
    assert answer.usage.output_tokens == 6


def test_reasoning_streams_as_reasoning_text_then_output_text(
    start_thread_target: StartThreadTarget,
) -> None:
    target = start_thread_target({"APP_REASONING__TOKENS_MEAN": "4", "APP_REASONING__ITL_MS": "1"})
    raw = httpx.post(
        target.url + "/v1/responses",
        json={"model": MODEL, "input": PROMPT, "stream": True, "max_output_tokens": 10,
              "ignore_eos": True},
    )  # fmt: skip
    events = _events(raw)
    kinds = [kind for kind, _ in events]
    thoughts = [d["delta"] for k, d in events if k == "response.reasoning_text.delta"]
    answer = [d["delta"] for k, d in events if k == "response.output_text.delta"]
    assert len(thoughts) == 4
    assert len(answer) == 6
    assert kinds.index("response.reasoning_text.done") < kinds.index("response.output_text.delta")
    added = [d["item"]["type"] for k, d in events if k == "response.output_item.added"]
    assert added == ["reasoning", "message"]
    completed = events[-1][1]["response"]
    assert [item["type"] for item in completed["output"]] == ["reasoning", "message"]
    assert completed["usage"]["output_tokens"] == 10
    assert completed["usage"]["output_tokens_details"]["reasoning_tokens"] == 4
    # Legacy completions have no reasoning phase: every token is answer text.
    text = httpx.post(
        target.url + "/v1/completions",
        json={"model": MODEL, "prompt": PROMPT, "max_tokens": 10, "ignore_eos": True},
    ).json()
    assert text["usage"]["completion_tokens"] == 10
    assert "completion_tokens_details" not in text["usage"]


def test_a_midstream_error_ends_a_response_with_response_failed(
    start_thread_target: StartThreadTarget,
) -> None:
    target = start_thread_target(
        {"APP_FAULTS__MIDSTREAM_RATIO": "1", "APP_FAULTS__MIDSTREAM_AFTER_TOKENS": "2"}
    )
    raw = httpx.post(
        target.url + "/v1/responses",
        json={"model": MODEL, "input": PROMPT, "stream": True, "max_output_tokens": 8},
    )
    kind, data = _events(raw)[-1]
    assert kind == "response.failed"
    assert data["response"]["status"] == "failed"
    assert data["response"]["error"]["code"] == "internal_error"
    text = httpx.post(
        target.url + "/v1/completions",
        json={"model": MODEL, "prompt": PROMPT, "stream": True, "max_tokens": 8},
    ).text
    assert "event: error\ndata: " in text
    assert text.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/responses"])
def test_faults_answer_429_and_503_with_retry_after(
    start_thread_target: StartThreadTarget, path: str
) -> None:
    body = {"model": MODEL, "prompt": PROMPT, "input": PROMPT, "stream": True}
    for ratio, status in (("APP_FAULTS__RATIO_429", 429), ("APP_FAULTS__RATIO_503", 503)):
        target = start_thread_target({ratio: "1", "APP_FAULTS__RETRY_AFTER_S": "2"})
        answer = httpx.post(target.url + path, json=body)
        assert answer.status_code == status
        assert answer.headers["retry-after"] == "2"
        assert set(answer.json()["error"]) >= {"message", "type", "code"}


@pytest.mark.parametrize(
    ("path", "body", "status", "param", "code"),
    [
        ("/v1/completions", {"model": MODEL}, 400, "prompt", "invalid_value"),
        ("/v1/completions", {"model": MODEL, "prompt": ["a", "b"]}, 400, "prompt", "invalid_value"),
        ("/v1/completions", {"model": MODEL, "prompt": "a", "max_tokens": 0}, 400, "max_tokens",
         "invalid_value"),
        ("/v1/completions", {"model": MODEL, "prompt": "a", "stream_options": {}}, 400, None,
         "invalid_value"),
        ("/v1/completions", {"model": "nope", "prompt": "a"}, 404, "model", "model_not_found"),
        ("/v1/completions", {"model": MODEL, "prompt": "a", "max_tokens": 10**9}, 400, "prompt",
         "context_length_exceeded"),
        ("/v1/responses", {"model": MODEL}, 400, "input", "invalid_value"),
        ("/v1/responses", {"model": MODEL, "input": []}, 400, None, "invalid_value"),
        ("/v1/responses", {"model": MODEL, "input": [{"role": "robot", "content": "a"}]}, 400,
         "input.str", "invalid_value"),
        ("/v1/responses", {"model": MODEL, "input": "a", "max_output_tokens": 0}, 400,
         "max_output_tokens", "invalid_value"),
        ("/v1/responses", {"model": MODEL, "input": "a", "previous_response_id": "resp_1"}, 400,
         None, "invalid_value"),
        ("/v1/responses", {"model": "nope", "input": "a"}, 404, "model", "model_not_found"),
        ("/v1/responses", {"model": MODEL, "input": "a", "max_output_tokens": 10**9}, 400, "input",
         "context_length_exceeded"),
    ],
)  # fmt: skip
def test_bad_input_gets_an_openai_error_body(
    target: ThreadTarget,
    path: str,
    body: dict[str, Any],
    status: int,
    param: str | None,
    code: str,
) -> None:
    answer = httpx.post(target.url + path, json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert error["type"] == ("invalid_request_error" if status == 400 else error["type"])
    assert error["param"] == param
    assert error["message"]
