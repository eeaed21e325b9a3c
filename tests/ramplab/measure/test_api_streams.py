"""Reading ``/v1/completions`` and Responses API streams: the same figures as chat's, per API.

The captured streams below are in vLLM's shapes (``CompletionStreamResponse`` chunks; the
Responses events of ``vllm/entrypoints/openai/responses/``, with ``event:`` lines and sequence
numbers, ending in ``response.completed``), reasoning included. Each is fed to the one SSE parser
cut at every byte and one byte at a time — an event split across reads must read as whole — and
then sent for real by a purpose-built server, its events split across writes, through the
request chain that measures chat.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ramplab.measure.apis import Api, prompt_fields
from ramplab.measure.attempt import _handle_event, _StreamFailure
from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.result import AttemptResult
from ramplab.measure.sse import SSEParser
from tests.support.tiny_server import Reply, TinyServer


def _completion(text: str, finish: str | None = None) -> bytes:
    data = {
        "id": "cmpl-7",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
             "stop_reason": None}
        ],
        "usage": None,
    }  # fmt: skip
    return b"data: " + json.dumps(data).encode() + b"\n\n"


COMPLETIONS = [
    _completion(" Hello"),
    _completion(" wor"),
    _completion("ld"),
    _completion("", "length"),
    b'data: {"id":"cmpl-7","object":"text_completion","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,'
    b'"prompt_tokens_details":{"cached_tokens":0}}}\n\n',
    b"data: [DONE]\n\n",
]


def _event(kind: str, sequence: int, **fields: Any) -> bytes:
    data = {"type": kind, "sequence_number": sequence, **fields}
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def _response(status: str, usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": "resp_9", "object": "response", "created_at": 1, "model": "m",
            "status": status, "output": [], "usage": usage}  # fmt: skip


USAGE = {
    "input_tokens": 21,
    "input_tokens_details": {"cached_tokens": 16},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 2},
    "total_tokens": 26,
}
_AT = {"output_index": 0, "content_index": 0}


def _responses(end: bytes) -> list[bytes]:
    return [
        _event("response.created", 0, response=_response("in_progress", None)),
        _event("response.in_progress", 1, response=_response("in_progress", None)),
        _event("response.output_item.added", 2, output_index=0,
               item={"id": "rs_1", "type": "reasoning", "summary": []}),
        _event("response.reasoning_text.delta", 3, item_id="rs_1", delta="Let", **_AT),
        _event("response.reasoning_text.delta", 4, item_id="rs_1", delta=" me", **_AT),
        _event("response.reasoning_text.done", 5, item_id="rs_1", text="Let me", **_AT),
        _event("response.output_item.added", 6, output_index=1,
               item={"id": "msg_1", "type": "message", "role": "assistant", "content": []}),
        _event("response.output_text.delta", 7, item_id="msg_1", delta="Hi", logprobs=[], **_AT),
        _event("response.output_text.delta", 8, item_id="msg_1", delta=" thé", logprobs=[],
               **_AT),
        _event("response.output_text.delta", 9, item_id="msg_1", delta="re", logprobs=[], **_AT),
        _event("response.output_text.done", 10, item_id="msg_1", text="Hi thére", **_AT),
        end,
    ]  # fmt: skip


RESPONSES = _responses(_event("response.completed", 11, response=_response("incomplete", USAGE)))


def _read(stream: bytes, api: Api, cuts: list[int]) -> AttemptResult:
    """``stream`` fed in the pieces ``cuts`` make, each piece stamped with its index."""
    result = AttemptResult(sent_at=0.0, sent_epoch=0.0)
    parser = SSEParser()
    bounds = [0, *cuts, len(stream)]
    for index, (start, end) in enumerate(itertools.pairwise(bounds)):
        for event in parser.feed(stream[start:end], float(index)):
            _handle_event(result, event, api)
    assert not parser.has_partial
    return result


def _every_cut(stream: bytes) -> Iterator[list[int]]:
    yield []
    yield list(range(1, len(stream)))  # one byte at a time
    for at in range(1, len(stream)):
        yield [at]


def test_a_completions_stream_reads_as_chat_does_cut_anywhere() -> None:
    stream = b"".join(COMPLETIONS)
    for cuts in _every_cut(stream):
        result = _read(stream, "completions", cuts)
        assert [e.text for e in result.token_events] == [" Hello", " wor", "ld"]
        assert all(e.answer for e in result.token_events)
        assert "".join(result.content_parts) == " Hello world"
        assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (5, 3, 0)
        assert result.saw_done
        assert result.completion_id == "cmpl-7"
    # Each token event is stamped with the read that held its first byte.
    second = stream.index(COMPLETIONS[1])
    result = _read(stream, "completions", [second, second + 40])
    assert [e.at for e in result.token_events] == [0.0, 1.0, 2.0]
    result = _read(stream, "completions", [second + 3, second + 40])
    assert [e.at for e in result.token_events] == [0.0, 0.0, 2.0]


def test_a_responses_stream_reads_reasoning_answer_and_usage_cut_anywhere() -> None:
    stream = b"".join(RESPONSES)
    for cuts in _every_cut(stream):
        result = _read(stream, "responses", cuts)
        assert [(e.text, e.answer) for e in result.token_events] == [
            ("Let", False),
            (" me", False),
            ("Hi", True),
            (" thé", True),
            ("re", True),
        ]
        assert "".join(result.content_parts) == "Hi thére"  # the answer only, as signed
        assert result.prompt_tokens == 21
        assert result.completion_tokens == 5
        assert result.cached_tokens == 16
        assert result.reasoning_tokens == 2
        assert result.saw_done  # an incomplete status (max_output_tokens) is a complete stream
        assert result.completion_id == "resp_9"
        assert result.events == len(RESPONSES)


def test_responses_openai_endings_errors_and_zero_reasoning() -> None:
    incomplete = _event("response.incomplete", 11, response=_response("incomplete", USAGE))
    assert _read(b"".join(_responses(incomplete)), "responses", []).saw_done
    # vLLM reports reasoning_tokens 0 on every response: read as chat's absent field.
    plain = {**USAGE, "output_tokens_details": {"reasoning_tokens": 0}}
    done = _event("response.completed", 11, response=_response("completed", plain))
    assert _read(b"".join(_responses(done)), "responses", []).reasoning_tokens is None
    # A [DONE] does not end a Responses stream: only response.completed does.
    assert not _read(b"".join(RESPONSES[:-1]) + b"data: [DONE]\n\n", "responses", []).saw_done
    failed = _event(
        "response.failed",
        11,
        response={**_response("failed", None), "error": {"code": "server_error", "message": "x"}},
    )
    error = _event("error", 11, code="ERR", message="engine died", param=None)
    for end, says in ((failed, "server_error"), (error, "engine died")):
        with pytest.raises(_StreamFailure) as caught:
            _read(b"".join(_responses(end)), "responses", [])
        assert caught.value.kind == "stream_error"
        assert says in caught.value.detail
    broken = _event("response.output_text.delta", 7, item_id="msg_1", **_AT)  # no delta
    with pytest.raises(_StreamFailure) as caught:
        _read(b"".join([*RESPONSES[:7], broken]), "responses", [])
    assert caught.value.kind == "malformed_json"


def test_prompt_fields_per_api() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert prompt_fields("chat", messages) == {"messages": messages}
    assert prompt_fields("completions", messages) == {"prompt": "Be brief.\nHi"}
    assert prompt_fields("responses", messages) == {"input": messages}
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert prompt_fields("completions", parts) == {"prompt": "Hi"}
    assert prompt_fields("responses", parts)["input"][0]["content"] == [
        {"type": "input_text", "text": "Hi"}
    ]


def _split(events: list[bytes]) -> list[bytes | tuple[str, float] | str]:
    """Every event in two writes 20 ms apart (split inside its data), 10 ms between events."""
    out: list[bytes | tuple[str, float] | str] = []
    for event in events:
        half = len(event) // 2
        out += [event[:half], ("sleep", 0.02), event[half:], ("sleep", 0.01)]
    return out


def handler(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    sse = {"content-type": "text/event-stream"}
    match path:
        case "/v1/completions":
            return Reply(body=_split(COMPLETIONS), headers=sse)
        case "/v1/responses":
            return Reply(body=_split(RESPONSES), headers=sse)
        case "/cut/v1/responses":  # no response.completed: the stream is incomplete
            return Reply(body=_split(RESPONSES[:-1]), headers=sse)
        case "/bad/v1/responses":
            error = {
                "error": {
                    "message": "max_output_tokens: must be >= 1",
                    "type": "invalid_request_error",
                    "param": "max_output_tokens",
                    "code": None,
                }
            }
            return Reply(400, {"content-type": "application/json"}, [json.dumps(error).encode()])
    return Reply(404, {}, [b"{}"])


@pytest.fixture(scope="module")
def server() -> Iterator[TinyServer]:
    with TinyServer(handler) as srv:
        yield srv


def _run(server: TinyServer, path: str, api: Api) -> Any:
    client = make_client(ClientOptions())
    try:
        chain = RequestChain(client, Endpoint(server.url + path, 10.0, api))
        body = {"model": "m", **prompt_fields(api, [{"role": "user", "content": "hi"}]),
                "stream": True}  # fmt: skip
        return chain.run(body)
    finally:
        client.close()


def test_completions_over_a_socket_measured_as_chat(server: TinyServer) -> None:
    record = _run(server, "/v1/completions", "completions")
    assert record.ok, record.error_detail
    assert (record.output_tokens, record.output_tokens_source) == (3, "usage")
    assert record.prompt_tokens == 5
    assert record.tokens_per_event == [1, 1, 1]
    assert len(record.itl_ms) == 2
    # Each event took 20 ms between its halves and 10 ms after: its first byte is its stamp.
    assert all(25.0 <= gap < 200.0 for gap in record.itl_ms), record.itl_ms
    assert record.ttft_ms <= record.ttlt_ms


def test_responses_over_a_socket_with_reasoning(server: TinyServer) -> None:
    record = _run(server, "/v1/responses", "responses")
    assert record.ok, record.error_detail
    assert (record.output_tokens, record.output_tokens_source) == (5, "usage")
    assert (record.prompt_tokens, record.cached_tokens) == (21, 16)
    assert record.reasoning_tokens == 2
    assert record.reasoning_events == 2
    assert record.tokens_per_event == [1, 1, 1, 1, 1]
    assert len(record.itl_ms) == 4
    assert record.completion_id == "resp_9"
    # The first output is the first thought; the first answer token comes after it.
    assert record.ttft_ms < record.answer_ttft_ms <= record.ttlt_ms


def test_responses_failures_over_a_socket(server: TinyServer) -> None:
    cut = _run(server, "/cut/v1/responses", "responses")
    assert cut.error_kind == "no_done"
    assert "response.completed" in (cut.error_detail or "")
    bad = _run(server, "/bad/v1/responses", "responses")
    assert (bad.error_kind, bad.status) == ("http_status", 400)
    assert "max_output_tokens" in (bad.error_detail or "")
