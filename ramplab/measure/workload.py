"""What each request asks for: prompt sources and the chat-completions body built from settings."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ramplab.errors import UsageError
from ramplab.options.settings import UserSettings

Messages = list[dict[str, Any]]
# Words of a fixed shape, so the synthetic prompt's length in tokens is predictable: each is
# one ~4-character piece (one token for any BPE-like counter, and for ``ApproxTokenCounter``).
_WORDS = ("time", "data", "load", "rate", "node", "step", "line", "task", "wave", "peak")


class PromptSource(Protocol):
    def next(self) -> Messages: ...


class SyntheticPrompts:
    """User prompts whose length in tokens follows a normal distribution (clipped at 1)."""

    def __init__(self, mean_tokens: int, std_tokens: float, rng: random.Random) -> None:
        self.mean = mean_tokens
        self.std = std_tokens
        self.rng = rng

    def next(self) -> Messages:
        n = self.mean if self.std == 0 else max(1, round(self.rng.gauss(self.mean, self.std)))
        text = " ".join(self.rng.choice(_WORDS) for _ in range(n))
        return [{"role": "user", "content": text}]


class FilePrompts:
    """Prompts from a JSONL file, cycled: ``{"prompt": str}`` or ``{"messages": [...]}`` a line."""

    def __init__(self, prompts: Sequence[Messages], start: int = 0) -> None:
        if not prompts:
            raise UsageError("--prompts-file", "the file holds no prompts")
        self.prompts = prompts
        self.index = start % len(prompts)

    @classmethod
    def load(cls, path: Path, start: int = 0) -> FilePrompts:
        return cls(load_prompts(path), start)

    def next(self) -> Messages:
        messages = self.prompts[self.index]
        self.index = (self.index + 1) % len(self.prompts)
        return messages


def load_prompts(path: Path) -> list[Messages]:
    """Every prompt of a JSONL file; ``UsageError`` names the file and line of a bad one."""
    prompts: list[Messages] = []
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise UsageError("--prompts-file", f"{str(path)!r}: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    "--prompts-file", f"{str(path)!r} line {number}: {exc.msg}"
                ) from None
            if isinstance(item, dict) and isinstance(item.get("prompt"), str):
                prompts.append([{"role": "user", "content": item["prompt"]}])
            elif isinstance(item, dict) and isinstance(item.get("messages"), list):
                prompts.append(item["messages"])
            else:
                raise UsageError(
                    "--prompts-file", f'{str(path)!r} line {number}: needs "prompt" or "messages"'
                )
    if not prompts:
        raise UsageError("--prompts-file", f"{str(path)!r}: the file holds no prompts")
    return prompts


def prompt_source(
    settings: UserSettings, rng: random.Random, loaded: Sequence[Messages] | None = None
) -> PromptSource:
    """The prompts of one user; ``loaded`` is the file's prompts read once per process."""
    if settings.prompts_file is not None:
        prompts = loaded if loaded is not None else load_prompts(settings.prompts_file)
        return FilePrompts(prompts, start=rng.randrange(1 << 30))
    return SyntheticPrompts(settings.prompt_tokens, settings.prompt_tokens_std, rng)


def request_body(
    settings: UserSettings, model: str, messages: Messages, max_tokens: int | None = None
) -> dict[str, Any]:
    """The OpenAI body; extensions (``chunk_size``, ``ignore_eos``) only when asked for;
    ``max_tokens`` (a dataset's output length) overrides ``--max-tokens``."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": settings.max_tokens if max_tokens is None else max_tokens,
        "stream": settings.stream,
    }
    if settings.stream and settings.include_usage:
        body["stream_options"] = {"include_usage": True}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.ignore_eos:
        body["ignore_eos"] = True
    if settings.chunk_size is not None:
        body["chunk_size"] = settings.chunk_size
    body.update(settings.extra_body)
    return body
