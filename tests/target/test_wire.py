"""The OpenAI wire format, checked with the official SDK and with raw HTTP."""

from __future__ import annotations

import math

import httpx
import openai
import pytest

from tests.support.processes import TargetProcess

MODEL = "ramplab-sim-1"
MESSAGES = [{"role": "user", "content": "Say something, please."}]


def client_for(target: TargetProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=target.url + "/v1", api_key="sk-test", max_retries=0)


@pytest.mark.parametrize("chunk_size", [1, 3, 16])
def test_sdk_streams_with_exact_event_count_and_usage(
    fast_target: TargetProcess, chunk_size: int
) -> None:
    tokens = 37
    stream = client_for(fast_target).chat.completions.create(
        model=MODEL,
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        max_tokens=tokens,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "chunk_size": chunk_size},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) == math.ceil(tokens / chunk_size)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length"
    assert all(reason is None for reason in finishes[:-1])
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens == tokens
    assert usage_chunk.usage.total_tokens == tokens + usage_chunk.usage.prompt_tokens
    text = "".join(c.choices[0].delta.content or "" for c in content_chunks)
    assert len(text.split()) == tokens  # one word per token in the simulator's vocabulary


def test_sdk_non_streaming_and_deterministic_text(fast_target: TargetProcess) -> None:
    client = client_for(fast_target)

    def ask() -> openai.types.chat.ChatCompletion:
        return client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            max_completion_tokens=12,
            seed=1234,
            extra_body={"ignore_eos": True},
        )

    first, second = ask(), ask()
    assert first.choices[0].message.content == second.choices[0].message.content
    assert first.usage is not None
    assert first.usage.completion_tokens == 12
    assert first.choices[0].finish_reason == "length"
    streamed = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=12,
        seed=1234,
        stream=True,
        extra_body={"ignore_eos": True, "chunk_size": 5},
    )
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == first.choices[0].message.content


def test_sampled_length_ends_with_stop_within_max_tokens(fast_target: TargetProcess) -> None:
    client = client_for(fast_target)
    reasons = set()
    for seed in range(8):
        reply = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            max_tokens=100,
            seed=seed,
        )
        assert reply.usage is not None
        assert 1 <= reply.usage.completion_tokens <= 100
        reasons.add(reply.choices[0].finish_reason)
    # Mean 128 ± 48 against a cap of 100: both endings occur over 8 seeds.
    assert reasons == {"stop", "length"}


def test_timing_comment_and_server_timing_header(fast_target: TargetProcess) -> None:
    body = {
        "model": MODEL,
        "messages": MESSAGES,
        "stream": True,
        "max_tokens": 4,
        "ignore_eos": True,
    }
    with httpx.stream("POST", fast_target.url + "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert "queue;dur=" in response.headers["server-timing"]
        assert "prefill;dur=" in response.headers["server-timing"]
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    assert lines[-2].startswith(": ramplab-timing {")
    assert '"output_tokens":4' in lines[-2]


def test_models_endpoint(fast_target: TargetProcess) -> None:
    models = client_for(fast_target).models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client_for(fast_target).models.retrieve(MODEL).id == MODEL


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b"{not json", 400, None),
        (b"[1, 2]", 400, None),
        (b'{"model": "ramplab-sim-1"}', 400, "messages"),
        (b'{"model": "ramplab-sim-1", "messages": []}', 400, "messages"),
        (b'{"model": 7, "messages": [{"role": "user", "content": "x"}]}', 400, "model"),
        (
            b'{"model": "ramplab-sim-1", "messages": [{"role": "user", "content": "x"}],'
            b' "max_tokens": 0}',
            400,
            "max_tokens",
        ),
        (
            b'{"model": "ramplab-sim-1", "messages": [{"role": "wizard", "content": "x"}]}',
            400,
            "messages.0.role",
        ),
        (
            b'{"model": "ramplab-sim-1", "messages": [{"role": "user", "content": "x"}],'
            b' "stream_options": {"include_usage": true}}',
            400,
            None,
        ),
        (b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', 404, "model"),
    ],
)
def test_bad_requests_get_openai_errors(
    fast_target: TargetProcess, body: bytes, status: int, param: str | None
) -> None:
    response = httpx.post(
        fast_target.url + "/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code", "param"}
    assert error["param"] == param
    assert error["message"]
    # Never pydantic's internals: no error URLs, no echo of the input, no 422.
    assert "pydantic" not in response.text
    assert "errors.pydantic.dev" not in response.text


def test_sdk_raises_typed_errors(fast_target: TargetProcess) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client_for(fast_target).chat.completions.create(
            model="missing",
            messages=MESSAGES,  # type: ignore[arg-type]
        )
    assert info.value.code == "model_not_found"


def test_oversized_body_is_413(fast_target: TargetProcess) -> None:
    huge = b'{"model": "ramplab-sim-1", "messages": [{"role": "user", "content": "'
    huge += b"x" * 1_100_000 + b'"}]}'
    response = httpx.post(fast_target.url + "/v1/chat/completions", content=huge)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"

    def chunks() -> list[bytes]:
        return [huge[i : i + 65536] for i in range(0, len(huge), 65536)]

    # Without a Content-Length (chunked upload) the limit still holds.
    chunked = httpx.post(fast_target.url + "/v1/chat/completions", content=iter(chunks()))
    assert chunked.status_code == 413


def test_context_length_exceeded(fast_target: TargetProcess) -> None:
    response = httpx.post(
        fast_target.url + "/v1/chat/completions",
        json={"model": MODEL, "messages": MESSAGES, "max_tokens": 131072},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"


def test_unknown_route_and_method(fast_target: TargetProcess) -> None:
    missing = httpx.get(fast_target.url + "/v2/nothing")
    assert missing.status_code == 404
    assert "error" in missing.json()
    wrong_method = httpx.get(fast_target.url + "/v1/chat/completions")
    assert wrong_method.status_code == 405
    assert "error" in wrong_method.json()


def test_health_and_readiness(fast_target: TargetProcess) -> None:
    assert httpx.get(fast_target.url + "/healthz").json()["status"] == "ok"
    ready = httpx.get(fast_target.url + "/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "redis": "ok"}


def test_history_counts_every_message_and_the_session_header_is_echoed(
    fast_target: TargetProcess,
) -> None:
    """A session's later turn: every message's text counts into the prompt, answers included."""

    def prompt_tokens(messages: list[dict[str, str]], headers: dict[str, str]) -> httpx.Response:
        body = {"model": MODEL, "messages": messages, "max_tokens": 1}
        return httpx.post(
            fast_target.url + "/v1/chat/completions", json=body, headers=headers, timeout=10
        )

    first = [{"role": "user", "content": "time data load"}]  # 3 tokens
    later = [*first, {"role": "assistant", "content": " kalo mi"}, *first]  # + 2 + 3
    one = prompt_tokens(first, {"x-session-id": "abc123"})
    two = prompt_tokens(later, {})
    assert one.json()["usage"]["prompt_tokens"] == 3
    assert two.json()["usage"]["prompt_tokens"] == 8
    assert one.headers["x-session-id"] == "abc123"
    assert "x-session-id" not in two.headers
