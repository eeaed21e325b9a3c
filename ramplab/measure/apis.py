"""The three OpenAI-style APIs a run can drive, and what differs between them in a request.

- ``chat``: ``POST /v1/chat/completions``, ``messages``, ``max_tokens``; a stream of ``data:``
  chunks whose ``choices[].delta`` carries the text, ended by ``data: [DONE]``;
- ``completions``: ``POST /v1/completions`` (legacy text completions), one ``prompt`` string —
  the messages' texts joined by newlines, with no chat template, as a text-completion client
  sends them —, ``max_tokens``; ``choices[].text`` chunks, ``data: [DONE]``;
- ``responses``: ``POST /v1/responses`` (the Responses API), the messages as ``input``,
  ``max_output_tokens``, ``store: false`` (nothing to keep); typed events
  (``response.output_text.delta``, ``response.reasoning_text.delta``, ...), ended by
  ``response.completed`` (or OpenAI's ``response.incomplete``) which carries the usage —
  always, so it takes no ``stream_options``.

How a stream's events are read per API is ``events.py``; every figure is then measured the same
way whatever the API (``attempt.py``, ``chain.py``).
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

__all__ = ["APIS", "LIMIT_KEYS", "PATHS", "STREAM_ENDS", "Api", "prompt_fields"]

Api = Literal["chat", "completions", "responses"]
APIS: Final[tuple[Api, ...]] = get_args(Api)
PATHS: Final[dict[Api, str]] = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "responses": "/v1/responses",
}
# The body's field of the output token limit.
LIMIT_KEYS: Final[dict[Api, str]] = {
    "chat": "max_tokens",
    "completions": "max_tokens",
    "responses": "max_output_tokens",
}
# What ends a complete stream (a stream without it fails as ``no_done``).
STREAM_ENDS: Final[dict[Api, str]] = {
    "chat": "data: [DONE]",
    "completions": "data: [DONE]",
    "responses": "response.completed",
}


def prompt_fields(api: Api, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The body's prompt fields for ``messages`` (chat messages, as the workload makes them)."""
    if api == "chat":
        return {"messages": messages}
    if api == "completions":
        return {"prompt": "\n".join(_text(message.get("content")) for message in messages)}
    # EasyInputMessage items: the same roles and contents as chat's, read by OpenAI and vLLM.
    return {
        "input": [{"role": m.get("role"), "content": _input(m.get("content"))} for m in messages]
    }


def _input(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    # Chat's text parts are the Responses API's input_text parts.
    return [
        {**part, "type": "input_text"} if isinstance(part, dict) and part.get("type") == "text"
        else part
        for part in content
    ]  # fmt: skip


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: their text
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""
