"""``POST /v1/completions``: the legacy text completions API, as vLLM serves it.

The prompt is one string (or a list holding one: a batch of several prompts is refused, as ``n``
above 1 is in chat); no chat template, and so no reasoning phase — vLLM's completions endpoint
has no reasoning parser. The stream is chat's without the role chunk: ``data:`` chunks of
``object: text_completion`` whose ``choices[0].text`` carries the tokens, a chunk with the
``finish_reason``, the usage chunk (``choices: []``) when ``stream_options.include_usage`` asks
for it, then ``data: [DONE]``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson
from pydantic import Field, field_validator, model_validator

from target_service.wire import (
    DONE_EVENT,
    ChunkEncoder,
    GenerationRequest,
    StreamEncoder,
    StreamOptions,
    TokenCounts,
    usage_body,
)


class CompletionRequest(GenerationRequest):
    """``POST /v1/completions``."""

    PROMPT_PARAM: ClassVar[str] = "prompt"
    REASONS: ClassVar[bool] = False
    ID_PREFIX: ClassVar[str] = "cmpl-"

    prompt: str | list[str]
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1, le=1)
    echo: bool = False

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | list[str]) -> str | list[str]:
        if isinstance(prompt, list) and len(prompt) != 1:
            raise ValueError("exactly one prompt per request (a list of one is accepted)")
        return prompt

    @model_validator(mode="after")
    def _checks(self) -> CompletionRequest:
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        if self.echo:
            raise ValueError("echo is not supported")
        return self

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens

    def prompt_text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]

    def encoder(self, completion_id: str, created: int) -> StreamEncoder:
        return TextChunkEncoder(completion_id, created, self.model, self.include_usage)

    def whole_body(
        self,
        completion_id: str,
        created: int,
        text: str,
        reasoning: str | None,
        finish_reason: str,
        usage: TokenCounts,
    ) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "text_completion",
            "created": created,
            "model": self.model,
            "system_fingerprint": "ramplab-sim",
            "choices": [
                {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": usage_body(
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
                usage.reasoning_tokens,
            ),
        }


class TextChunkEncoder:
    """The events of one streamed text completion, from byte templates as chat's are."""

    def __init__(self, completion_id: str, created: int, model: str, include_usage: bool) -> None:
        self._include_usage = include_usage
        usage = ',"usage":null' if include_usage else ""
        head = (
            f'data: {{"id":"{completion_id}","object":"text_completion","created":{created},'
            f'"model":{orjson.dumps(model).decode()},"system_fingerprint":"ramplab-sim",'
            f'"choices":[{{"index":0,"text":'
        )
        self._head = head.encode()
        self._tail_open = f',"logprobs":null,"finish_reason":null}}]{usage}}}\n\n'.encode()
        self._usage_tail = usage.encode()
        self._meta = {
            "id": completion_id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "system_fingerprint": "ramplab-sim",
        }

    def open(self) -> bytes:
        return b""  # no role chunk: the first chunk carries the first token

    def content(self, text: str) -> bytes:
        return self._head + orjson.dumps(text) + self._tail_open

    def reasoning(self, text: str) -> bytes:
        return self.content(text)  # never asked for: CompletionRequest.REASONS is False

    def closing(self, finish_reason: str, usage: TokenCounts, comments: bytes) -> bytes:
        out = (
            self._head
            + b'"","logprobs":null,"finish_reason":"'
            + finish_reason.encode()
            + b'"}]'
            + self._usage_tail
            + b"}\n\n"
        )
        if self._include_usage:
            body = usage_body(
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
                usage.reasoning_tokens,
            )
            out += b"data: " + orjson.dumps({**self._meta, "choices": [], "usage": body}) + b"\n\n"
        return out + comments + DONE_EVENT

    def failure(self, message: str, error_type: str, code: str) -> bytes:
        return ChunkEncoder.error(message, error_type, code) + DONE_EVENT
