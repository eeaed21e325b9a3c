"""A dataset ready to send: exchanges counted in tokens, filtered, sampled and ordered by seed.

The prompt's tokens are those of its messages' text, the dataset's output length those of the
answer (ShareGPT) or the declared ``output_tokens``; both counted with the tokenizer named by
``--dataset-tokenizer`` (``approx`` unless told: ``ramplab.workload.tokenizers``). Filters keep
the entries whose counts lie in the given ranges (an entry without an output length passes an
output filter only when the filter is open). Sampling: the kept entries are shuffled with
``random.Random(seed)`` and the first ``sample`` taken; request ``i`` of a run gets entry
``i mod n`` of that order, so a run is the same whichever worker sends which request.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ramplab.errors import UsageError
from ramplab.workload.dataset_formats import Exchange, Format, Messages, Skipped, read_exchanges
from ramplab.workload.tokenizers import Tokenizer

__all__ = ["Dataset", "Entry", "TokenRange", "parse_range"]


@dataclass(frozen=True, slots=True)
class TokenRange:
    """``[low, high]`` in tokens; ``None`` leaves that side open."""

    low: int | None = None
    high: int | None = None

    @property
    def open(self) -> bool:
        return self.low is None and self.high is None

    def holds(self, value: int | None) -> bool:
        if value is None:
            return self.open
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def __str__(self) -> str:
        return f"{'' if self.low is None else self.low}..{'' if self.high is None else self.high}"


def parse_range(text: str, field: str) -> TokenRange:
    """``LOW..HIGH``, ``LOW..`` or ``..HIGH`` in whole tokens; empty: no filter."""
    text = text.strip()
    if not text:
        return TokenRange()
    low, sep, high = text.partition("..")
    try:
        lo = int(low) if low.strip() else None
        hi = int(high) if high.strip() else None
    except ValueError:
        lo = hi = -1
    if not sep or (lo is not None and lo < 0) or (hi is not None and hi < 0):
        raise UsageError(field, f"expected LOW..HIGH in tokens (either side may be left out), "
                                f"got {text!r}")  # fmt: skip
    if lo is not None and hi is not None and lo > hi:
        raise UsageError(field, f"LOW {lo} is above HIGH {hi}")
    return TokenRange(lo, hi)


def prompt_text(messages: Messages) -> str:
    # As the reference target joins them: what it counts is what we count.
    return "\n".join(str(m.get("content") or "") for m in messages)


@dataclass(frozen=True, slots=True)
class Entry:
    where: str
    messages: Messages
    prompt_tokens: int
    output_tokens: int | None  # the dataset's output length, None when it has none


@dataclass(frozen=True, slots=True)
class Dataset:
    """The kept entries in the run's order, and what was left out (for ``dataset inspect``)."""

    path: Path
    format: Format
    tokenizer: str
    entries: tuple[Entry, ...]
    read: int
    skipped: tuple[Skipped, ...]
    filtered: int

    @classmethod
    def load(
        cls,
        path: Path,
        tokenizer: Tokenizer,
        fmt: Format = "auto",
        prompt_range: TokenRange = TokenRange(),
        output_range: TokenRange = TokenRange(),
        sample: int | None = None,
        seed: int = 0,
        field: str = "--dataset",
    ) -> Dataset:
        fmt, exchanges, skipped = read_exchanges(path, fmt, field)
        counted = [_count(e, tokenizer) for e in exchanges]
        kept = [
            e for e in counted if prompt_range.holds(e.prompt_tokens)
            and output_range.holds(e.output_tokens)
        ]  # fmt: skip
        if not kept:
            raise UsageError(
                field,
                f"{str(path)!r}: none of its {len(counted)} prompts is within prompt tokens "
                f"{prompt_range} and output tokens {output_range} ({tokenizer.name})",
            )
        filtered = len(counted) - len(kept)
        random.Random(seed).shuffle(kept)
        if sample is not None:
            kept = kept[:sample]
        return cls(path, fmt, tokenizer.name, tuple(kept), len(exchanges), tuple(skipped),
                   filtered)  # fmt: skip

    def entry(self, index: int) -> Entry:
        """The entry of request ``index`` (the order cycles)."""
        return self.entries[index % len(self.entries)]

    def __len__(self) -> int:
        return len(self.entries)


def _count(exchange: Exchange, tokenizer: Tokenizer) -> Entry:
    output = exchange.output_tokens
    if exchange.answer is not None:
        output = tokenizer.count(exchange.answer)
    return Entry(
        exchange.where,
        exchange.messages,
        tokenizer.count(prompt_text(exchange.messages)),
        output if output is None or output > 0 else None,
    )


def lengths(entries: Sequence[Entry]) -> tuple[list[int], list[int]]:
    """Prompt and output lengths of ``entries`` (entries without an output length left out)."""
    return [e.prompt_tokens for e in entries], [
        e.output_tokens for e in entries if e.output_tokens is not None
    ]
