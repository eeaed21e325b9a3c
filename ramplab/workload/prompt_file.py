"""A prompt file: JSONL records or one plain-text prompt, read and written back.

JSONL (``.jsonl``/``.ndjson``), one object per line, blank lines skipped::

    {"prompt": "…", "lang": "zh"}
    {"messages": [{"role": "system", "content": "…"}, {"role": "user", "content": "…"}]}

Any other file is one plain-text prompt. ``lang`` (optional) groups the analyser's table;
every other field is carried through the normaliser untouched. A line that is not such an object
is a ``UsageError`` naming ``FILE:LINE`` and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ramplab.errors import UsageError

__all__ = ["JSONL_SUFFIXES", "Prompt", "is_jsonl", "read_prompts", "write_prompts"]

JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: its texts (the ``prompt``, each message's ``content``, or the file's text)."""

    where: str  # FILE:LINE, or FILE for a plain-text prompt
    texts: tuple[str, ...]
    lang: str | None = None
    record: dict[str, Any] | None = None  # the JSONL object, written back with the new texts

    def with_texts(self, texts: Sequence[str]) -> Prompt:
        return replace(self, texts=tuple(texts))


def is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in JSONL_SUFFIXES


def _read_text(path: Path, field: str) -> str:
    if not path.is_file():
        raise UsageError(field, f"no such file: {str(path)!r}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(field, f"{str(path)!r} is not UTF-8 text ({exc.reason})") from None


def _record(where: str, line: str) -> Prompt:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(where, f"not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise UsageError(where, 'expected an object with "prompt" or "messages"')
    lang = obj.get("lang")
    if lang is not None and not isinstance(lang, str):
        raise UsageError(f"{where} lang", f"expected a string, got {lang!r}")
    if "prompt" in obj:
        if not isinstance(obj["prompt"], str):
            raise UsageError(f"{where} prompt", "expected a string")
        return Prompt(where, (obj["prompt"],), lang, obj)
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UsageError(where, 'expected "prompt" (a string) or "messages" (a non-empty list)')
    texts = []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise UsageError(f"{where} messages[{i}].content", "expected a string")
        texts.append(content)
    return Prompt(where, tuple(texts), lang, obj)


def read_prompts(path: Path, field: str = "FILE") -> list[Prompt]:
    """The prompts of ``path``; a ``UsageError`` for a missing, empty or malformed file."""
    text = _read_text(path, field)
    if not is_jsonl(path):
        if not text.strip():
            raise UsageError(field, f"{str(path)!r} is empty")
        return [Prompt(str(path), (text,))]
    prompts = [
        _record(f"{path}:{n}", line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not prompts:
        raise UsageError(field, f"{str(path)!r} holds no prompt")
    return prompts


def _updated(prompt: Prompt) -> dict[str, Any]:
    record = dict(prompt.record or {})
    if "prompt" in record:
        record["prompt"] = prompt.texts[0]
    else:
        record["messages"] = [
            {**message, "content": text}
            for message, text in zip(record["messages"], prompt.texts, strict=True)
        ]
    return record


def write_prompts(path: Path, prompts: Iterable[Prompt], jsonl: bool) -> None:
    """JSONL records (non-ASCII kept as is) or the single plain-text prompt."""
    if jsonl:
        lines = [json.dumps(_updated(p), ensure_ascii=False) + "\n" for p in prompts]
        path.write_text("".join(lines), encoding="utf-8")
    else:
        path.write_text("".join(p.texts[0] for p in prompts), encoding="utf-8")
