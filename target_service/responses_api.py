"""``POST /v1/responses``: the Responses API, streamed as typed events, as vLLM serves it.

The events follow vLLM's implementation (``vllm/entrypoints/openai/responses/``), which follows
OpenAI's: each is ``event: <type>`` and ``data: {"type": <type>, "sequence_number": n, ...}``,
numbered from 0. A stream is ``response.created``, ``response.in_progress``; with a reasoning
phase, a ``reasoning`` output item (``output_item.added``, ``content_part.added``,
``response.reasoning_text.delta`` per event, then the three ``.done`` events); the ``message``
item the same way with ``response.output_text.delta``; and ``response.completed`` carrying the
whole response and its ``usage`` (``input_tokens``, ``input_tokens_details.cached_tokens``,
``output_tokens``, ``output_tokens_details.reasoning_tokens``). As in vLLM, a response cut by
``max_output_tokens`` still ends with ``response.completed``, its ``status`` ``incomplete``
(OpenAI sends ``response.incomplete``); no ``data: [DONE]`` follows. An error after the head
ends the stream with ``response.failed``. The ramplab comments (signature, timing) come just
before ``response.completed``, where chat's come before ``[DONE]``.

Nothing is stored: ``store`` is accepted and ignored (vLLM's default), and what needs a stored
response (``previous_response_id``, ``background``) is refused with a 400.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from target_service.wire import GenerationRequest, StreamEncoder, TokenCounts


class InputPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class InputMessage(BaseModel):
    """An input item: a message (OpenAI's ``EasyInputMessage`` or ``type: message``)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputPart]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content)


class ResponsesRequest(GenerationRequest):
    """``POST /v1/responses``."""

    PROMPT_PARAM: ClassVar[str] = "input"
    ID_PREFIX: ClassVar[str] = "resp_"

    input: str | list[InputMessage]
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    store: bool = True
    background: bool = False
    previous_response_id: str | None = None

    @model_validator(mode="after")
    def _stateless(self) -> ResponsesRequest:
        if isinstance(self.input, list) and not self.input:
            raise ValueError("input must hold at least one message")
        if self.background:
            raise ValueError("background is not supported: this server stores no responses")
        if self.previous_response_id is not None:
            raise ValueError("previous_response_id is not supported: this server stores none")
        return self

    @property
    def include_usage(self) -> bool:
        return True

    def requested_max_tokens(self) -> int | None:
        return self.max_output_tokens

    def prompt_text(self) -> str:
        texts = [self.instructions] if self.instructions else []
        if isinstance(self.input, str):
            texts.append(self.input)
        else:
            texts.extend(message.text() for message in self.input)
        return "\n".join(texts)

    def encoder(self, completion_id: str, created: int) -> StreamEncoder:
        return ResponseEventEncoder(self, completion_id, created)

    def whole_body(
        self,
        completion_id: str,
        created: int,
        text: str,
        reasoning: str | None,
        finish_reason: str,
        usage: TokenCounts,
    ) -> dict[str, Any]:
        output = []
        if reasoning is not None:
            output.append(_reasoning_item("rs_" + _hex(), reasoning, "completed"))
        output.append(_message_item("msg_" + _hex(), text, "completed"))
        return response_object(self, completion_id, created, _status(finish_reason), output, usage)


def _hex() -> str:
    return uuid.uuid4().hex[:24]


def _status(finish_reason: str) -> str:
    return "incomplete" if finish_reason == "length" else "completed"


def usage_object(usage: TokenCounts) -> dict[str, Any]:
    """The Responses API's usage: its details are always there (0 without a prefix cache)."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def response_object(
    request: ResponsesRequest,
    response_id: str,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    usage: TokenCounts | None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": error,
        "incomplete_details": ({"reason": "max_output_tokens"} if status == "incomplete" else None),
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "model": request.model,
        "output": output,
        "parallel_tool_calls": True,
        "store": False,
        "temperature": request.temperature,
        "tool_choice": "auto",
        "tools": [],
        "top_p": request.top_p,
        "usage": None if usage is None else usage_object(usage),
    }


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content if status == "completed" else [],
    }


def _reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": [], "status": status}
    if status == "completed":
        item["content"] = [{"type": "reasoning_text", "text": text}]
    return item


Phase = Literal["reasoning", "message"]
_PART_TYPE = {"reasoning": "reasoning_text", "message": "output_text"}
_DELTA_TYPE = {
    "reasoning": "response.reasoning_text.delta",
    "message": "response.output_text.delta",
}
_DONE_TYPE = {"reasoning": "response.reasoning_text.done", "message": "response.output_text.done"}


class ResponseEventEncoder:
    """The typed events of one streamed response. Stateful: it opens an output item at the
    first event of each phase, closes it when the phase ends, and keeps the texts for the
    ``.done`` events and the final response."""

    def __init__(self, request: ResponsesRequest, response_id: str, created: int) -> None:
        self._request = request
        self._id = response_id
        self._created = created
        self._sequence = 0
        self._phase: Phase | None = None
        self._item_id = ""
        self._parts: list[str] = []
        self._output: list[dict[str, Any]] = []  # the items closed so far
        self._delta_head = b""  # the current phase's delta event up to its sequence number
        self._delta_mid = b""  # from after the sequence number to the delta's text

    def _event(self, kind: str, fields: dict[str, Any]) -> bytes:
        data = orjson.dumps({"type": kind, "sequence_number": self._sequence, **fields})
        self._sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"

    def open(self) -> bytes:
        response = response_object(self._request, self._id, self._created, "in_progress", [], None)
        return self._event("response.created", {"response": response}) + self._event(
            "response.in_progress", {"response": response}
        )

    def content(self, text: str) -> bytes:
        return self._delta("message", text)

    def reasoning(self, text: str) -> bytes:
        return self._delta("reasoning", text)

    def _delta(self, phase: Phase, text: str) -> bytes:
        out = b"" if self._phase == phase else self._close() + self._start(phase)
        self._parts.append(text)
        # The hot path (one event per token at chunk size 1): a byte template, as chat's.
        out += (
            self._delta_head
            + str(self._sequence).encode()
            + self._delta_mid
            + orjson.dumps(text)
            + b',"logprobs":[]}\n\n'
        )
        self._sequence += 1
        return out

    def _start(self, phase: Phase) -> bytes:
        self._phase = phase
        self._item_id = ("rs_" if phase == "reasoning" else "msg_") + _hex()
        self._parts = []
        index = len(self._output)
        item = (
            _reasoning_item(self._item_id, "", "in_progress")
            if phase == "reasoning"
            else _message_item(self._item_id, "", "in_progress")
        )
        where = {"item_id": self._item_id, "output_index": index, "content_index": 0}
        kind = _DELTA_TYPE[phase]
        self._delta_head = f'event: {kind}\ndata: {{"type":"{kind}","sequence_number":'.encode()
        self._delta_mid = (
            f',"item_id":"{self._item_id}","output_index":{index},"content_index":0,"delta":'
        ).encode()
        part: dict[str, Any] = {"type": _PART_TYPE[phase], "text": ""}
        if phase == "message":
            part["annotations"] = []
        return self._event(
            "response.output_item.added", {"output_index": index, "item": item}
        ) + self._event("response.content_part.added", {**where, "part": part})

    def _close(self) -> bytes:
        if self._phase is None:
            return b""
        phase, text = self._phase, "".join(self._parts)
        index = len(self._output)
        where = {"item_id": self._item_id, "output_index": index, "content_index": 0}
        part: dict[str, Any] = {"type": _PART_TYPE[phase], "text": text}
        done: dict[str, Any] = {**where, "text": text}
        if phase == "message":
            part["annotations"] = []
            done["logprobs"] = []
            item = _message_item(self._item_id, text, "completed")
        else:
            item = _reasoning_item(self._item_id, text, "completed")
        self._output.append(item)
        self._phase = None
        return (
            self._event(_DONE_TYPE[phase], done)
            + self._event("response.content_part.done", {**where, "part": part})
            + self._event("response.output_item.done", {"output_index": index, "item": item})
        )

    def closing(self, finish_reason: str, usage: TokenCounts, comments: bytes) -> bytes:
        out = b"" if self._phase == "message" else self._close() + self._start("message")
        out += self._close()
        response = response_object(
            self._request, self._id, self._created, _status(finish_reason), self._output, usage
        )
        return out + comments + self._event("response.completed", {"response": response})

    def failure(self, message: str, error_type: str, code: str) -> bytes:
        response = response_object(
            self._request,
            self._id,
            self._created,
            "failed",
            self._output,
            None,
            {"code": code, "message": message},
        )
        return self._event("response.failed", {"response": response})
