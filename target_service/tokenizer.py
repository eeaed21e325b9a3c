"""Counting prompt tokens.

The target only needs counts, not ids, so a fast approximation stands in for a model's BPE:
a word counts one token per started four characters, each punctuation mark counts one. On English
prose this lands within ~15 % of cl100k. A real tokenizer can be plugged in through ``Tokenizer``.
"""

from __future__ import annotations

import re
from typing import Protocol

_PIECES = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...


class ApproxTokenizer:
    """Counts tokens as ~4-character word pieces plus one per punctuation mark."""

    def count(self, text: str) -> int:
        return sum((len(piece) + 3) // 4 for piece in _PIECES.findall(text))
