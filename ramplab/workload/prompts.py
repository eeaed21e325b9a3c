"""What each request asks for: prompt sources and the chat-completions body built from settings."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ramplab.errors import UsageError
from ramplab.workload.redundancy import RULE_NAMES, apply_rules
from ramplab.workload.token_words import TokenWords

Messages = list[dict[str, Any]]
# Words of a fixed shape, so the synthetic prompt's length in tokens is predictable: each is
# one ~4-character piece (one token for ``ApproxTokenizer``; a real tokenizer's prompts are made
# of its own single-token words: ``token_words.py``).
_WORDS = ("time", "data", "load", "rate", "node", "step", "line", "task", "wave", "peak")


class PromptSource(Protocol):
    """Where a user's prompts come from; ``prompt_tokens`` is the size in tokens the last
    prompt was written to (``None``: not known, the prompt was read, not written)."""

    prompt_tokens: int | None

    def next(self) -> Messages: ...


class SyntheticPrompts:
    """User prompts whose length in tokens follows a normal distribution (clipped at 1): tokens
    of the ``approx`` counter, or of ``words``' tokenizer when given."""

    def __init__(
        self,
        mean_tokens: int,
        std_tokens: float,
        rng: random.Random,
        words: TokenWords | None = None,
    ) -> None:
        self.mean = mean_tokens
        self.std = std_tokens
        self.rng = rng
        self.words = words
        self.prompt_tokens: int | None = None

    def next(self) -> Messages:
        n = self.mean if self.std == 0 else max(1, round(self.rng.gauss(self.mean, self.std)))
        if self.words is None:
            text = " ".join(self.rng.choice(_WORDS) for _ in range(n))
        else:
            text = self.words.text(n, self.rng)
        self.prompt_tokens = n
        return [{"role": "user", "content": text}]


class FilePrompts:
    """Prompts from a JSONL file, cycled: ``{"prompt": str}`` or ``{"messages": [...]}`` a line."""

    def __init__(self, prompts: Sequence[Messages], start: int = 0) -> None:
        if not prompts:
            raise UsageError("--prompts-file", "the file holds no prompts")
        self.prompts = prompts
        self.index = start % len(prompts)
        self.prompt_tokens: int | None = None  # read from a file, not written to a size

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


def normalise_rules(spec: str | None, field: str = "--normalise") -> list[str]:
    """The rules ``--normalise`` names: ``all``, rule names, ``-RULE`` to leave one out
    (``all,-markdown``); empty or ``None``: none. Unknown names are a ``UsageError``."""
    chosen: list[str] = []
    for part in (p.strip() for p in (spec or "").split(",")):
        if not part or part == "none":
            continue
        name = part.removeprefix("-")
        if name == "all":
            chosen = [] if part.startswith("-") else list(RULE_NAMES)
        elif name not in RULE_NAMES:
            raise UsageError(
                field, f"unknown rule {name!r}: expected all or {', '.join(RULE_NAMES)}"
            )
        elif part.startswith("-"):
            chosen = [r for r in chosen if r != name]
        elif name not in chosen:
            chosen.append(name)
    return [r for r in RULE_NAMES if r in chosen]


def normalised(prompts: Sequence[Messages], rules: Sequence[str]) -> list[Messages]:
    """``prompts`` with the rules of ``ramplab.workload.normalise`` applied to each one's message
    contents together (a line repeated across messages is a duplicate), once, at load: the
    requests then carry what the analyser counts for the same rules."""
    if not rules:
        return list(prompts)
    out = []
    for messages in prompts:
        texts = [m.get("content") for m in messages]
        if not all(isinstance(t, str) for t in texts):
            out.append(messages)  # structured content parts: sent as written
            continue
        new = apply_rules([t for t in texts if isinstance(t, str)], rules)
        out.append([{**m, "content": t} for m, t in zip(messages, new, strict=True)])
    return out
