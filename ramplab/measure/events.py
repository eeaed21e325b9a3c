"""What one stream event carries, read per API: output text, usage, the stream's end, errors.

One reader per wire format, over the events of the one SSE parser (``sse.py``): ``chat`` and
``completions`` share the ``choices`` reader (``delta.content`` and legacy ``text``), ``responses``
reads typed events by their ``type``. Each fills the same ``AttemptResult`` — a ``TokenEvent`` per
event that carried text, stamped with the arrival of the event's first byte, answer or reasoning;
the usage; the end — so TTFT, ITL, TPOT, TTLT and the token counts are measured the same way
whatever the API (``apis.py`` says what each sends).

A reader returns the failure it saw (``(error_kind, detail)``) rather than raising: the caller
(``attempt.py``) ends the stream with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ramplab.measure.apis import Api
from ramplab.measure.result import AttemptResult, TokenEvent
from ramplab.measure.sse import SSEEvent

__all__ = ["REASONING_KEYS", "Failure", "apply_usage", "read_data", "read_whole"]

Failure = tuple[str, str]  # (error_kind, detail)

# Where servers put a reasoning model's thoughts: vLLM and DeepSeek ``reasoning_content``, newer
# vLLM and OpenRouter ``reasoning``.
REASONING_KEYS = ("reasoning_content", "reasoning")


def _take_content(result: AttemptResult, choices: list[Any] | None, at: float) -> None:
    """Record an event's output text in one walk over its choices: the first choice's
    ``delta.content`` as signed (``content_parts``), and every choice's answer and reasoning text
    as one ``TokenEvent``."""
    text = ""
    answer = False
    first = True
    # orjson gives only dicts as JSON objects, so ``isinstance(..., dict)`` is the cheap exact
    # test for a Mapping here.
    for choice in choices or ():
        if isinstance(choice, dict):
            delta = choice.get("delta") or {}
            if isinstance(delta, dict):
                value = delta.get("content")
                if isinstance(value, str):
                    if first:
                        # Only the first choice's ``delta.content``: exactly what the target signs.
                        result.content_parts.append(value)
                    if value:
                        text += value
                        answer = True
                if value is None or len(delta) > 1:  # else "content" is its only key
                    for key in REASONING_KEYS:
                        value = delta.get(key)
                        if isinstance(value, str):
                            text += value
                    if delta.get("tool_calls"):
                        result.tool_calls = True
            value = choice.get("text")  # legacy completions stream
            if isinstance(value, str):
                if first:
                    result.content_parts.append(value)  # what the target signs, as above
                if value:
                    text += value
                    answer = True
        first = False
    if text:
        result.token_events.append(TokenEvent(at, text, answer))


def apply_usage(result: AttemptResult, usage: Any) -> None:
    """Chat's and legacy completions' ``usage``."""
    if isinstance(usage, Mapping):
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        if isinstance(prompt, int):
            result.prompt_tokens = prompt
        if isinstance(completion, int):
            result.completion_tokens = completion
        details = usage.get("completion_tokens_details")
        if isinstance(details, Mapping) and isinstance(details.get("reasoning_tokens"), int):
            result.reasoning_tokens = details["reasoning_tokens"]
        details = usage.get("prompt_tokens_details")
        if isinstance(details, Mapping) and isinstance(details.get("cached_tokens"), int):
            result.cached_tokens = details["cached_tokens"]


def _apply_response_usage(result: AttemptResult, usage: Any) -> None:
    """The Responses API's ``usage``: ``input_tokens``/``output_tokens`` and their details."""
    if not isinstance(usage, Mapping):
        return
    prompt = usage.get("input_tokens")
    completion = usage.get("output_tokens")
    if isinstance(prompt, int):
        result.prompt_tokens = prompt
    if isinstance(completion, int):
        result.completion_tokens = completion
    details = usage.get("output_tokens_details")
    thoughts = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    # Only a count above 0: vLLM sends 0 with every response, which says no more than chat's
    # absent field — the record's None ("no reasoning seen") stays the same for both APIs.
    if isinstance(thoughts, int) and thoughts > 0:
        result.reasoning_tokens = thoughts
    details = usage.get("input_tokens_details")
    if isinstance(details, Mapping) and isinstance(details.get("cached_tokens"), int):
        result.cached_tokens = details["cached_tokens"]


def read_data(result: AttemptResult, event: SSEEvent, api: Api = "chat") -> Failure | None:
    """Read one data event (comments are the caller's) into ``result``."""
    if event.event == "error":
        return ("stream_error", event.data[:500])
    if event.data.strip() == "[DONE]":
        # The Responses API ends with response.completed; a [DONE] after it (a proxy's) is no
        # more than the end of the bytes.
        if api != "responses":
            result.saw_done = True
        return None
    try:
        chunk = orjson.loads(event.data)
    except orjson.JSONDecodeError as exc:
        return ("malformed_json", f"{exc}: {event.data[:200]!r}")
    if not isinstance(chunk, dict):
        return ("malformed_json", f"event is not a JSON object: {event.data[:200]!r}")
    if api == "responses":
        return _read_response_event(result, event, chunk)
    choices = chunk.get("choices")
    if "error" in chunk and not choices:
        return ("stream_error", event.data[:500])
    if choices and not isinstance(choices, list):
        return ("malformed_json", f"choices is not an array: {event.data[:200]!r}")
    usage = chunk.get("usage")
    if usage is not None:
        apply_usage(result, usage)
    if result.completion_id is None and isinstance(chunk.get("id"), str):
        result.completion_id = chunk["id"]
    _take_content(result, choices or None, event.first_byte_at)
    return None


# Typed events that carry output: answer text, reasoning, tool calls.
_ANSWER = ("response.output_text.delta", "response.refusal.delta")
_REASONING = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta")
_TOOL = ("response.function_call_arguments.delta", "response.output_item.added")
_ENDS = ("response.completed", "response.incomplete")


def _read_response_event(
    result: AttemptResult, event: SSEEvent, chunk: dict[str, Any]
) -> Failure | None:
    kind = chunk.get("type")
    if not isinstance(kind, str):
        kind = event.event  # the event's name says the same (vLLM and OpenAI send both)
    if kind in _ANSWER or kind in _REASONING:
        delta = chunk.get("delta")
        if not isinstance(delta, str):
            return ("malformed_json", f"{kind} without a text delta: {event.data[:200]!r}")
        answer = kind in _ANSWER
        if kind == "response.output_text.delta":
            result.content_parts.append(delta)  # exactly what the target signs
        if delta:
            result.token_events.append(TokenEvent(event.first_byte_at, delta, answer))
        return None
    if kind in _TOOL:
        item = chunk.get("item")
        if kind != "response.output_item.added" or (
            isinstance(item, dict) and item.get("type") == "function_call"
        ):
            result.tool_calls = True
        return None
    response = chunk.get("response")
    if kind in _ENDS or kind == "response.created":
        if isinstance(response, dict):
            if result.completion_id is None and isinstance(response.get("id"), str):
                result.completion_id = response["id"]
            if kind in _ENDS:
                _apply_response_usage(result, response.get("usage"))
        if kind in _ENDS:
            # An incomplete response (cut by max_output_tokens, as chat's finish_reason
            # "length") is a complete stream: vLLM says so inside response.completed.
            result.saw_done = True
        return None
    if kind == "response.failed":
        error = response.get("error") if isinstance(response, dict) else None
        return ("stream_error", (orjson.dumps(error).decode() if error else event.data)[:500])
    if kind == "error":
        return ("stream_error", event.data[:500])
    return None  # created, in_progress, item and part lifecycle, .done: nothing to measure


def read_whole(result: AttemptResult, data: dict[str, Any], api: Api = "chat") -> str:
    """A non-streaming answer's usage, id and tool calls into ``result``; its answer text."""
    if isinstance(data.get("id"), str):
        result.completion_id = data["id"]
    text = ""
    if api == "responses":
        _apply_response_usage(result, data.get("usage"))
        for item in data.get("output") or ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                result.tool_calls = True
            elif item.get("type") == "message":
                for part in item.get("content") or ():
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        text += part["text"]
        return text
    apply_usage(result, data.get("usage"))
    for choice in data.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        if isinstance(message, dict):
            if isinstance(message.get("content"), str):
                text += message["content"]
            if message.get("tool_calls"):
                result.tool_calls = True
        elif isinstance(choice.get("text"), str):  # legacy completions
            text += choice["text"]
    return text
