"""The OpenAI chat-completions wire format, and what the three APIs share.

The target serves three OpenAI-style APIs with one engine (``generation.py``): chat completions
(here), legacy text completions (``completions_api.py``) and the Responses API
(``responses_api.py``). Each is a request model derived from ``GenerationRequest`` — the fields
the engine acts on, the same in all three — that names its stream encoder (``StreamEncoder``)
and its non-streaming body; the engine never looks at which API it serves.

Stream events are built from byte templates rather than by serialising a dict per event: only the
token text is JSON-encoded per event. At chunk size 1 this is the dominant per-event cost, and the
template halves it (measured in ``bench/target_stream.py``). The output is byte-for-byte what
``json.dumps`` of the same chunk would give, minus whitespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from target_service.errors import InvalidRequest

DONE_EVENT = b"data: [DONE]\n\n"


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """One completion's usage, whatever API reports it."""

    prompt_tokens: int
    completion_tokens: int  # reasoning included
    cached_tokens: int | None = None  # None: the prefix cache is off
    reasoning_tokens: int = 0


class StreamEncoder(Protocol):
    """The bytes of one streamed completion, in its API's events."""

    def open(self) -> bytes:
        """What goes out before the first token (b"" for nothing)."""
        ...

    def content(self, text: str) -> bytes:
        """One event of answer text."""
        ...

    def reasoning(self, text: str) -> bytes:
        """One event of reasoning text (only for an API with ``REASONS``)."""
        ...

    def closing(self, finish_reason: str, usage: TokenCounts, comments: bytes) -> bytes:
        """Everything after the last token, in one write: the finish, the usage when asked for,
        the ``comments`` (SSE comment lines: signature, timing) and the stream's end."""
        ...

    def failure(self, message: str, error_type: str, code: str) -> bytes:
        """An error that ends the stream after its head went out, with the stream's end."""
        ...


class GenerationRequest(BaseModel):
    """The fields the engine acts on, common to the three APIs; other OpenAI parameters are
    accepted and ignored. Each API adds its prompt and its token limit."""

    model_config = ConfigDict(extra="allow")

    # Per API: where the prompt is (named by a context-length error), whether the engine may
    # think before the answer (legacy completions have no reasoning), the id's prefix.
    PROMPT_PARAM: ClassVar[str] = "messages"
    REASONS: ClassVar[bool] = True
    ID_PREFIX: ClassVar[str] = "chatcmpl-"

    model: str = Field(min_length=1)
    stream: bool = False
    seed: int | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    user: str | None = None
    # Extensions (send them with the SDK's extra_body=):
    ignore_eos: bool = False
    chunk_size: int | None = Field(None, ge=1, le=4096)
    # Disclose each content event's send time in the final timing comment (``events_ms``), so a
    # client can measure its own timestamp error against the server's (bench/stream_accuracy.py).
    timing_detail: bool = False

    @property
    def include_usage(self) -> bool:
        """Whether the stream ends with the usage (the Responses API always sends it)."""
        return False

    def requested_max_tokens(self) -> int | None:
        raise NotImplementedError

    def prompt_text(self) -> str:
        raise NotImplementedError

    def encoder(self, completion_id: str, created: int) -> StreamEncoder:
        raise NotImplementedError

    def whole_body(
        self,
        completion_id: str,
        created: int,
        text: str,
        reasoning: str | None,
        finish_reason: str,
        usage: TokenCounts,
    ) -> dict[str, Any]:
        """The non-streaming answer."""
        raise NotImplementedError


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionRequest(GenerationRequest):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1, le=1)

    @model_validator(mode="after")
    def _usage_needs_stream(self) -> ChatCompletionRequest:
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def prompt_text(self) -> str:
        return "\n".join(message.text() for message in self.messages)

    def encoder(self, completion_id: str, created: int) -> StreamEncoder:
        return ChunkEncoder(completion_id, created, self.model, self.include_usage)

    def whole_body(
        self,
        completion_id: str,
        created: int,
        text: str,
        reasoning: str | None,
        finish_reason: str,
        usage: TokenCounts,
    ) -> dict[str, Any]:
        return completion_body(
            completion_id,
            created,
            self.model,
            text,
            finish_reason,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            reasoning,
            usage.reasoning_tokens,
        )


Request = TypeVar("Request", bound=GenerationRequest)


def parse_request(body: bytes, model: type[Request]) -> Request:
    """Validate a request body; every failure becomes a 400 naming the parameter."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(
            f"request body is not valid JSON: {exc.msg} at position {exc.pos}",
            code="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object", code="invalid_json")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        message = first["msg"].removeprefix("Value error, ")
        text = f"invalid value for '{param}': {message}" if param else message
        raise InvalidRequest(text, code="invalid_value", param=param) from None


def parse_chat_request(body: bytes) -> ChatCompletionRequest:
    return parse_request(body, ChatCompletionRequest)


class ChunkEncoder:
    """Encodes one completion's SSE events (``data: {...}\\n\\n``)."""

    def __init__(self, completion_id: str, created: int, model: str, include_usage: bool) -> None:
        usage = ',"usage":null' if include_usage else ""
        head = (
            f'data: {{"id":"{completion_id}","object":"chat.completion.chunk",'
            f'"created":{created},"model":{orjson.dumps(model).decode()},'
            f'"system_fingerprint":"ramplab-sim","choices":[{{"index":0,"delta":'
        )
        self._head = head.encode()
        self._tail_open = f',"logprobs":null,"finish_reason":null}}]{usage}}}\n\n'.encode()
        self._usage_tail = usage.encode()
        self._meta = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "ramplab-sim",
        }

    def role(self) -> bytes:
        return self._head + b'{"role":"assistant","content":""}' + self._tail_open

    def open(self) -> bytes:
        return self.role()

    def content(self, text: str) -> bytes:
        return self._head + b'{"content":' + orjson.dumps(text) + b"}" + self._tail_open

    def reasoning(self, text: str) -> bytes:
        """A reasoning delta, as vLLM and DeepSeek send it (``reasoning.py``)."""
        return self._head + b'{"reasoning_content":' + orjson.dumps(text) + b"}" + self._tail_open

    def finish(self, reason: str) -> bytes:
        return (
            self._head
            + b'{},"logprobs":null,"finish_reason":"'
            + reason.encode()
            + b'"}]'
            + self._usage_tail
            + b"}\n\n"
        )

    def usage(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int | None = None,
        reasoning_tokens: int = 0,
    ) -> bytes:
        payload = {
            **self._meta,
            "choices": [],
            "usage": usage_body(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens),
        }
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    def closing(self, finish_reason: str, usage: TokenCounts, comments: bytes) -> bytes:
        # The closing events are all known now: one write instead of up to five (each send
        # costs a timeout scope and the middleware chain), the same bytes on the wire.
        out = self.finish(finish_reason)
        if self._usage_tail:
            out += self.usage(
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
                usage.reasoning_tokens,
            )
        return out + comments + DONE_EVENT

    @staticmethod
    def error(message: str, error_type: str, code: str) -> bytes:
        body = {"error": {"message": message, "type": error_type, "code": code}}
        return b"event: error\ndata: " + orjson.dumps(body) + b"\n\n"

    def failure(self, message: str, error_type: str, code: str) -> bytes:
        return self.error(message, error_type, code) + DONE_EVENT


def sse_comment(name: str, payload: dict[str, Any]) -> bytes:
    """An SSE comment line: every SSE parser, the openai SDK's included, discards it."""
    return b": " + name.encode() + b" " + orjson.dumps(payload) + b"\n\n"


def usage_body(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int | None = None,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """OpenAI's usage object; ``prompt_tokens_details.cached_tokens`` only while the target's
    prefix cache is on (``None``), ``completion_tokens_details.reasoning_tokens`` only with a
    reasoning phase, so the body is unchanged when both are off."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def completion_body(
    completion_id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int | None = None,
    reasoning: str | None = None,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": "ramplab-sim",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage_body(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens),
    }


def models_body(models: list[str], created: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "ramplab"}
            for name in models
        ],
    }
