"""Reading a dataset file into conversations' first exchange: the prompt and, if any, its answer.

Formats (``--dataset-format``; ``auto`` picks by suffix and the first record):

``sharegpt``
    A JSON array, or JSONL, of objects with ``conversations``: a list of turns, either
    ``{"from": "human"|"gpt"|"system", "value": "…"}`` (ShareGPT) or ``{"role": "user"|
    "assistant"|"system", "content": "…"}`` (OpenAI-style). The first human turn is the prompt
    (with the system turns before it), the first gpt turn after it is the answer whose length is
    the dataset's output length. A conversation without a human turn is skipped and counted.
``prompts``
    JSONL, ``{"prompt": "…"}`` or ``{"messages": [...]}`` a line (the ``--prompts-file`` format),
    with an optional ``"output_tokens": N``.
``text``
    One prompt a line; blank lines are skipped.

A record that does not fit is a ``UsageError`` naming ``FILE:LINE`` (JSONL, text) or ``FILE item
N`` (a JSON array) and the field, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from ramplab.errors import UsageError

__all__ = ["FORMATS", "Exchange", "Format", "Skipped", "detect", "read_exchanges"]

Format = Literal["auto", "sharegpt", "prompts", "text"]
FORMATS: tuple[Format, ...] = ("auto", "sharegpt", "prompts", "text")
Messages = list[dict[str, Any]]

# Speaker names of the ShareGPT dumps in circulation (ShareGPT_V3, its forks, OpenAI-style).
_HUMAN = frozenset({"human", "user"})
_MODEL = frozenset({"gpt", "chatgpt", "assistant", "bard", "bing", "model"})
_SYSTEM = frozenset({"system"})


@dataclass(frozen=True, slots=True)
class Exchange:
    """A prompt (as chat messages), its answer's text or declared length, and where it came from."""

    where: str
    messages: Messages
    answer: str | None = None  # sharegpt: the first model turn's text
    output_tokens: int | None = None  # prompts: the declared output length


@dataclass(frozen=True, slots=True)
class Skipped:
    where: str
    why: str


def _json(where: str, field: str, raw: bytes | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(field, f"{where}: not valid JSON ({exc})") from None


def _turn(turn: Any, where: str, index: int, field: str) -> tuple[str, str]:
    if not isinstance(turn, dict):
        raise UsageError(field, f"{where}: conversations[{index}] is not an object")
    if "from" in turn or "value" in turn:
        speaker, text, names = turn.get("from"), turn.get("value"), ("from", "value")
    else:
        speaker, text, names = turn.get("role"), turn.get("content"), ("role", "content")
    if not isinstance(speaker, str):
        raise UsageError(field, f"{where}: conversations[{index}].{names[0]} must be a string")
    if not isinstance(text, str):
        raise UsageError(field, f"{where}: conversations[{index}].{names[1]} must be a string")
    return speaker.lower(), text


def _conversation(item: Any, where: str, field: str) -> Exchange | Skipped:
    if not isinstance(item, dict) or not isinstance(item.get("conversations"), list):
        raise UsageError(field, f'{where}: expected an object with a "conversations" list')
    system: Messages = []
    prompt: str | None = None
    for index, turn in enumerate(item["conversations"]):
        speaker, text = _turn(turn, where, index, field)
        if prompt is None:
            if speaker in _SYSTEM:
                system.append({"role": "system", "content": text})
            elif speaker in _HUMAN:
                prompt = text
        elif speaker in _MODEL:
            return Exchange(where, [*system, {"role": "user", "content": prompt}], answer=text)
    if prompt is None:
        return Skipped(where, "no human turn")
    return Exchange(where, [*system, {"role": "user", "content": prompt}])


def _prompt_record(item: Any, where: str, field: str) -> Exchange:
    if not isinstance(item, dict):
        raise UsageError(field, f'{where}: expected an object with "prompt" or "messages"')
    length = item.get("output_tokens")
    if length is not None and (not isinstance(length, int) or isinstance(length, bool)
                               or length < 1):  # fmt: skip
        raise UsageError(field, f"{where}: output_tokens must be a whole number ≥ 1")
    if isinstance(item.get("prompt"), str):
        return Exchange(where, [{"role": "user", "content": item["prompt"]}], None, length)
    messages = item.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UsageError(field, f'{where}: needs "prompt" (a string) or "messages" (a list)')
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise UsageError(field, f"{where}: messages[{index}].content must be a string")
    return Exchange(where, messages, None, length)


def _read(path: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(field, f"{str(path)!r}: {exc.strerror}") from None


def _lines(path: Path, data: bytes, field: str) -> Iterator[tuple[str, bytes]]:
    for number, line in enumerate(data.splitlines(), 1):
        if line.strip():
            yield f"{path}:{number}", line


def detect(path: Path, data: bytes) -> Format:
    """The format of a file: by its suffix, and for JSONL by its first record."""
    suffix = path.suffix.lower()
    if suffix == ".json" or data.lstrip().startswith(b"["):
        return "sharegpt"
    if suffix in (".jsonl", ".ndjson"):
        first = next((line for line in data.splitlines() if line.strip()), b"")
        return "sharegpt" if b'"conversations"' in first else "prompts"
    return "text"


def read_exchanges(
    path: Path, fmt: Format = "auto", field: str = "--dataset"
) -> tuple[Format, list[Exchange], list[Skipped]]:
    """The format read (``auto`` resolved), every exchange of ``path``, and the records skipped
    (with why)."""
    data = _read(path, field)
    if fmt == "auto":
        fmt = detect(path, data)
    found: list[Exchange | Skipped] = []
    if fmt == "text":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(field, f"{str(path)!r} is not UTF-8 text ({exc.reason})") from None
        for number, prompt in enumerate(text.splitlines(), 1):
            if prompt.strip():
                found.append(Exchange(f"{path}:{number}", [{"role": "user", "content": prompt}]))
    elif fmt == "sharegpt" and (data.lstrip().startswith(b"[") or path.suffix.lower() == ".json"):
        items = _json(str(path), field, data)
        if not isinstance(items, list):
            raise UsageError(field, f"{str(path)!r}: expected a JSON array of conversations")
        for index, item in enumerate(items):
            found.append(_conversation(item, f"{path} item {index}", field))
    else:
        read = _conversation if fmt == "sharegpt" else _prompt_record
        for where, line in _lines(path, data, field):
            found.append(read(_json(where, field, line), where, field))
    exchanges = [e for e in found if isinstance(e, Exchange)]
    skipped = [e for e in found if isinstance(e, Skipped)]
    if not exchanges:
        raise UsageError(field, f"{str(path)!r} holds no prompt")
    return fmt, exchanges, skipped
