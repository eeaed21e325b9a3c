"""Counting output tokens when the server does not report ``usage``.

An exact BPE needs vocabulary files that cannot be fetched here, so the default is an
approximation (one token per started four characters of a word, one per punctuation mark; within
~15 % of cl100k on English prose). Records counted this way are flagged
``output_tokens_source="tokenizer"``; ``--tokenizer`` (``workload.tokenizer``) picks a real one
(``cl100k_base``, a ``tokenizer.json``: ``ramplab.workload.tokenizers``, imported only then, so
this module stays light) and ``run.json`` names the one a run counted with.
Kept separate from the target's tokenizer on purpose: ramplab must not import ``target_service``.
"""

from __future__ import annotations

import re
from typing import Protocol

_PIECES = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


APPROX = "approx"


def token_counter(spec: str, field: str = "--tokenizer") -> TokenCounter:
    """The counter ``spec`` names: ``approx`` (this module's), ``cl100k_base`` or a path to a
    ``tokenizer.json`` (``UsageError`` naming ``field`` for anything else, or a missing extra)."""
    if spec == APPROX:
        return ApproxTokenCounter()
    from ramplab.workload.tokenizers import load_tokenizer

    return load_tokenizer(spec, field)


class ApproxTokenCounter:
    """~4-character word pieces plus one per punctuation mark; at least 1 for any text."""

    def count(self, text: str) -> int:
        n = sum((len(piece) + 3) // 4 for piece in _PIECES.findall(text))
        return max(n, 1) if text else 0
