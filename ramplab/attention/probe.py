"""The needle probe: a filler context of a chosen length with the key fact at a chosen depth.

One probe is a token sequence, built at the level of token ids so that its length is exact and
the answer token's position is known without re-tokenising the whole text::

    [specials before] filler[:a] · needle · filler[a:] · question [specials after]

- the **needle** is the key fact (``DEFAULT_NEEDLE``); its **answer token** is the first token of
  its last word (the run of letters and digits nearest its end: "marmalade" in the default, whose
  first WordPiece is ``mar``);
- the **depth** ``d`` (0–100 %) places the needle after ``a = round(d/100 × F)`` of the ``F``
  filler tokens: 0 % right after the opening special tokens, 100 % right before the question;
- the **question** ends the context, as a retrieval prompt would;
- the special tokens are the tokenizer's own (``[CLS]``/``[SEP]`` for BERT, a BOS for most causal
  LMs, none for GPT-2), found by encoding one word with and without them.

Every piece but the filler is encoded with a leading space, so that a byte-level BPE sees word
starts as it would inside running text (WordPiece ignores the space).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ramplab.errors import UsageError

__all__ = [
    "DEFAULT_DEPTHS",
    "DEFAULT_NEEDLE",
    "DEFAULT_QUESTION",
    "FILLER",
    "Encoded",
    "Encoder",
    "Probe",
    "TokenizerEncoder",
    "answer_offset",
    "build_probes",
    "parse_depths",
]

DEFAULT_NEEDLE = "The secret passphrase for the archive is marmalade."
DEFAULT_QUESTION = "What is the secret passphrase for the archive?"
DEFAULT_DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
# Neutral sentences about other things, cycled: varied enough that no stretch of filler is an
# exact repeat of its neighbour within a sentence's length.
FILLER = (
    "The river runs past the old mill before it turns toward the sea.",
    "Most of the village market opens early on Tuesdays and Fridays.",
    "A narrow road climbs the hill to a chapel built of grey stone.",
    "In winter the lake freezes and children skate near the reeds.",
    "The library keeps its maps in long drawers beside the windows.",
    "Farmers bring apples, cheese and honey to sell in the square.",
    "A bell rings at noon, and the baker closes his shop for an hour.",
    "Fishing boats leave the harbour when the tide begins to rise.",
    "The museum shows tools that weavers used two centuries ago.",
    "On clear nights the lighthouse beam sweeps across the bay.",
)
_LAST_WORD = re.compile(r"[^\W_]+(?=[\W_]*\Z)")


@dataclass(frozen=True, slots=True)
class Encoded:
    ids: list[int]
    offsets: list[tuple[int, int]]  # each token's character span in the encoded text


class Encoder(Protocol):
    """What the probe needs of a tokenizer."""

    def encode(self, text: str) -> Encoded:
        """The text's tokens, without special tokens, with character offsets."""
        ...

    def specials(self) -> tuple[list[int], list[int]]:
        """The special tokens the model expects before and after a text."""
        ...

    def tokens(self, ids: Sequence[int]) -> list[str]: ...


class TokenizerEncoder:
    """A Hugging Face fast tokenizer as an ``Encoder``."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def encode(self, text: str) -> Encoded:
        out = self._tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return Encoded(list(out["input_ids"]), [tuple(o) for o in out["offset_mapping"]])

    def specials(self) -> tuple[list[int], list[int]]:
        bare = self._tokenizer("a", add_special_tokens=False)["input_ids"]
        full = list(self._tokenizer("a", add_special_tokens=True)["input_ids"])
        for start in range(len(full) - len(bare) + 1):
            if full[start : start + len(bare)] == bare:
                return full[:start], full[start + len(bare) :]
        return [], []

    def tokens(self, ids: Sequence[int]) -> list[str]:
        return list(self._tokenizer.convert_ids_to_tokens(list(ids)))


@dataclass(frozen=True, slots=True)
class Probe:
    """One context: ``ids`` to feed the model, ``answer`` the answer token's index in them."""

    depth: float
    ids: list[int]
    answer: int
    needle: tuple[int, int]  # the needle's token span [start, end)
    question: tuple[int, int]  # the question's token span [start, end)


def parse_depths(text: str, field: str = "--depths") -> list[float]:
    """``"0,25,50,75,100"`` → depths in percent; each in [0, 100], no repeats."""
    depths: list[float] = []
    for part in text.split(","):
        try:
            depth = float(part.strip())
        except ValueError:
            raise UsageError(field, f"{part.strip()!r} is not a number (percent)") from None
        if not 0.0 <= depth <= 100.0:
            raise UsageError(field, f"{depth:g} is out of range: depths are 0 to 100 (percent)")
        if depth in depths:
            raise UsageError(field, f"{depth:g} is given twice")
        depths.append(depth)
    return depths


def answer_offset(needle: str, encoded: Encoded, field: str = "--needle") -> int:
    """The index, within the needle's tokens, of the first token of its last word."""
    match = _LAST_WORD.search(needle)
    if match is None:
        raise UsageError(field, f"{needle!r} has no word to be the answer")
    for i, (start, end) in enumerate(encoded.offsets):
        if end > match.start() and start < match.end():
            return i
    raise UsageError(field, f"no token of {needle!r} covers its last word {match.group(0)!r}")


def _filler(encoder: Encoder, tokens: int) -> list[int]:
    ids: list[int] = []
    sentences = " ".join(FILLER)
    while len(ids) < tokens:
        ids += encoder.encode(" " + sentences).ids
    return ids[:tokens]


def build_probes(
    encoder: Encoder,
    depths: Sequence[float],
    context_tokens: int,
    needle: str = DEFAULT_NEEDLE,
    question: str = DEFAULT_QUESTION,
) -> list[Probe]:
    """One probe of exactly ``context_tokens`` tokens (special tokens included) per depth."""
    needle_enc = encoder.encode(" " + needle)
    answer = answer_offset(" " + needle, needle_enc)
    question_ids = encoder.encode(" " + question).ids if question else []
    before, after = encoder.specials()
    fixed = len(before) + len(needle_enc.ids) + len(question_ids) + len(after)
    filler_tokens = context_tokens - fixed
    if filler_tokens < 0:
        raise UsageError(
            "--context-tokens",
            f"{context_tokens} is too few: the needle, the question and the special tokens "
            f"alone take {fixed}",
        )
    filler = _filler(encoder, filler_tokens)
    probes = []
    for depth in depths:
        at = round(depth / 100.0 * filler_tokens)
        ids = [*before, *filler[:at], *needle_enc.ids, *filler[at:], *question_ids, *after]
        start = len(before) + at
        q_start = len(before) + filler_tokens + len(needle_enc.ids)
        probes.append(
            Probe(
                depth=depth,
                ids=ids,
                answer=start + answer,
                needle=(start, start + len(needle_enc.ids)),
                question=(q_start, q_start + len(question_ids)),
            )
        )
    return probes
