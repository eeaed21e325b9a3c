"""Long-context "needle in a haystack" prompts (§3.2): context length × depth of the key fact.

Every prompt is one user message of exactly ``length`` tokens, counted with the workload's token
counter (``ApproxTokenizer``, or the campaign's real tokenizer: ``token_words.py``)::

    <haystack, first part> <needle> <haystack, rest>

    Question: <question>

The haystack is filler prose (sentences drawn from a fixed vocabulary); the needle states a fact
that exists nowhere else ("The secret passphrase of Lisbon is amber-4821."), a new one for each
request, and the question asks for it. ``depth`` places the needle at the first word boundary at
or after ``round(depth × H)`` of the haystack's ``H`` tokens: 0 opens the context with it, 1
puts it right before the question. One-token words (" so", or one of a real tokenizer's
single-token words) pad the haystack's end to the exact length. A real tokenizer counts a word
differently where texts join (after the header, around the needle), so its contexts are counted
whole once built and the haystack's share moved by the difference until exact (one round in
practice): one encode of the whole context per prompt.

Haystacks are deterministic: the words of a length's haystack come from ``Random(f"{seed}:{N}")``.
With ``shared_prefix`` (the default) every request of a length starts with that same text, so all
requests of a length share the text before their needle — on a server with a prefix cache a deep
needle finds more of its prompt cached and prefills faster, as on real servers. Without it each
prompt opens with a random document number ("Document 84470316."): prefix caches match whole
leading blocks only, so no two prompts share a cached prefix and depth cannot matter to them.

The cell travels with each request as the record's ``prompt_labels``
(``needle_length``, ``needle_depth``, ``needle_position`` = haystack tokens before the needle,
``needle_shared``): one run covers the whole grid and each record names its cell exactly.
Cells are taken in a random order that visits every cell once per round, per user, so each cell
gets its share of every stage of the run. A length's haystack is built once per process, on its
first use (~0.4 s of one core for 128K tokens), and every prompt is then a few slices of it.
"""

from __future__ import annotations

import json
import random
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ramplab.errors import UsageError
from ramplab.workload.token_words import ROUNDS, TokenWords
from ramplab.workload.tokenizers import ApproxTokenizer, Tokenizer

__all__ = ["NeedlePrompts", "NeedleSpec", "needle_option", "parse_needle"]

Messages = list[dict[str, Any]]

_SUBJECTS = ("The committee", "A small crew", "The river authority", "Our neighbours",
             "The night shift", "An old survey", "The harbour office", "Most visitors",
             "The archive", "A careful reader", "The weather service", "The orchestra")  # fmt: skip
_VERBS = ("noted", "described", "measured", "recorded", "questioned", "repaired", "mapped",
          "praised", "counted", "revised", "ignored", "studied")  # fmt: skip
_OBJECTS = ("the northern bridge", "a quiet market", "the spring flood", "every lantern",
            "the stone wall", "a forgotten garden", "the long corridor", "the copper roof",
            "an empty station", "the tidal chart", "the village clock",
            "a row of poplars")  # fmt: skip
_TAILS = ("before the rain came", "during the long winter", "without much fuss",
          "after the festival", "as the season turned", "with unusual care", "near the old mill",
          "for the third time", "in the early light", "despite the noise")  # fmt: skip
_CITIES = ("Lisbon", "Kyoto", "Oslo", "Quito", "Dakar", "Perth", "Tunis", "Hanoi", "Lima",
           "Riga", "Cusco", "Bergen")  # fmt: skip
_WORDS = ("amber", "cobalt", "juniper", "saffron", "granite", "willow", "ember", "harbor",
          "lilac", "falcon", "marble", "cedar")  # fmt: skip


class NeedleSpec(BaseModel):
    """``workload.needle`` / ``--needle``: the grid and how contexts are built."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lengths: list[int] = Field(min_length=1)  # prompt tokens per context
    depths: list[float] = Field(min_length=1)  # 0 … 1: where the needle sits in the haystack
    shared_prefix: bool = True
    seed: int = 0  # of the haystacks (the needles come from the user's generator)

    @field_validator("lengths")
    @classmethod
    def _lengths(cls, values: list[int]) -> list[int]:
        for value in values:
            if value < 64:
                raise ValueError(f"{value} is too short: a context needs at least 64 tokens")
        if len(set(values)) != len(values):
            raise ValueError("lengths repeat")
        return values

    @field_validator("depths")
    @classmethod
    def _depths(cls, values: list[float]) -> list[float]:
        for value in values:
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{value} is not a depth between 0 and 1")
        if len(set(values)) != len(values):
            raise ValueError("depths repeat")
        return values


def parse_needle(value: object, field: str = "workload.needle") -> NeedleSpec:
    """``value`` (a mapping, or its JSON text) as a spec; ``UsageError`` names the bad field."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise UsageError(field, f"not valid JSON ({exc.msg})") from None
    try:
        return NeedleSpec.model_validate(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join([field, *(str(p) for p in first["loc"])])
        raise UsageError(where, first["msg"].removeprefix("Value error, ")) from None


def needle_option(text: str, field: str) -> dict[str, Any]:
    """The parse of ``--needle`` / ``workload.needle``: ``{}`` (off) or a whole, checked spec."""
    # A plain dict: Locust's master sends parsed options to its workers with msgpack.
    return parse_needle(text, field).model_dump() if text.strip() not in ("", "{}") else {}


@dataclass(frozen=True, slots=True)
class _Haystack:
    """A length's filler, joined once: the text, and per word its end in tokens and in
    characters, so a prompt is a few slices of one string, not a join of 100K words."""

    text: str
    ends: list[int]  # tokens up to and including word i
    offsets: list[int]  # characters up to and including word i

    def words_within(self, tokens: int) -> int:
        """How many leading words fit in ``tokens`` tokens."""
        return bisect_right(self.ends, tokens)

    def words_reaching(self, tokens: int) -> int:
        """The fewest leading words holding at least ``tokens`` tokens."""
        return bisect_left(self.ends, tokens) + 1 if tokens > 0 else 0

    def tokens_of(self, words: int) -> int:
        return self.ends[words - 1] if words else 0

    def chars_of(self, words: int) -> int:
        return self.offsets[words - 1] if words else 0


def _sentence(rng: random.Random) -> str:
    return (
        f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."
    )


class NeedlePrompts:
    """A ``PromptSource`` of needle contexts; ``prompt_labels`` describes the last prompt."""

    def __init__(
        self,
        spec: NeedleSpec,
        rng: random.Random,
        counter: Tokenizer | None = None,
        words: TokenWords | None = None,
    ) -> None:
        self.spec = spec
        self.rng = rng
        self.words = words
        self.counter = words.tokenizer if words is not None else (counter or ApproxTokenizer())
        # Pads the haystack to the exact length: a word of one token after a space.
        self._pad = " so" if words is None else " " + words.words[0]
        self._word_tokens: dict[str, int] = {}
        self.prompt_tokens: int | None = None
        self.cells = [(n, d) for n in spec.lengths for d in spec.depths]
        self._round: list[tuple[int, float]] = []
        self._haystacks: dict[int, _Haystack] = {}
        self.prompt_labels: dict[str, Any] = {}

    def _haystack(self, tokens: int) -> _Haystack:
        """The length's filler prose, at least ``tokens`` tokens (built once per length)."""
        found = self._haystacks.get(tokens)
        if found is None:
            rng = random.Random(f"{self.spec.seed}:{tokens}")
            words: list[str] = []
            total = 0
            while total < tokens:
                sentence = _sentence(rng).split()
                words += sentence
                total += sum(self._tokens_of(word) for word in sentence)
            ends = list(accumulate(self._tokens_of(word) for word in words))
            offsets = list(accumulate(len(word) + 1 for word in words))
            found = _Haystack(" ".join(words), ends, [o - 1 for o in offsets])
            self._haystacks[tokens] = found
        return found

    def _tokens_of(self, word: str) -> int:
        """A haystack word's tokens where it stands: after a space (``approx`` ignores it)."""
        found = self._word_tokens.get(word)
        if found is None:
            found = self._word_tokens[word] = self.counter.count(" " + word)
        return found

    def next(self) -> Messages:
        if not self._round:
            self._round = self.cells[:]
            self.rng.shuffle(self._round)
        length, depth = self._round.pop()
        city = self.rng.choice(_CITIES)
        secret = f"{self.rng.choice(_WORDS)}-{self.rng.randrange(1000, 10000)}"
        needle = f"The secret passphrase of {city} is {secret}."
        question = f"\n\nQuestion: what is the secret passphrase of {city}? Answer with it only."
        # Without a shared prefix a unique opening line makes every prompt differ from its
        # first token: prefix caches match whole leading blocks only, so none can hit.
        header = "" if self.spec.shared_prefix else f"Document {self.rng.randrange(10**8):08d}. "
        count = self.counter.count
        room = max(0, length - count(header) - count(needle) - count(question))
        text, position = self._context(length, depth, room, header, needle, question)
        if self.words is not None:
            # A real tokenizer counts a word differently at the text's joins (after the header,
            # around the needle): the haystack's room moves by what the whole text is off.
            for _ in range(ROUNDS):
                off = length - count(text)
                if off == 0:
                    break
                room = max(0, room + off)
                text, position = self._context(length, depth, room, header, needle, question)
            if count(text) != length:
                raise UsageError(
                    "workload.tokenizer",
                    f"{self.counter.name}: no needle context of exactly {length} tokens",
                )
        self.prompt_tokens = length
        self.prompt_labels = {
            "needle_length": length,
            "needle_depth": depth,
            "needle_position": position,
            "needle_shared": self.spec.shared_prefix,
        }
        return [{"role": "user", "content": text}]

    def _context(
        self, length: int, depth: float, room: int, header: str, needle: str, question: str
    ) -> tuple[str, int]:
        """The prompt with ``room`` tokens of haystack, and the haystack tokens before the
        needle."""
        hay = self._haystack(length)
        kept = hay.words_within(room)
        # The next word did not fit: one-token words make up the difference exactly.
        padding = room - hay.tokens_of(kept)
        pad = self._pad * padding
        # The needle goes at the first word boundary at or after depth × filler tokens.
        split = min(hay.words_reaching(round(depth * room)), kept)
        before = hay.text[: hay.chars_of(split)]
        after = hay.text[hay.chars_of(split) : hay.chars_of(kept)].lstrip(" ") + pad
        position = hay.tokens_of(split)
        if split == kept:  # the deepest needle stays right before the question
            before, after, position = before + pad, "", position + padding
        parts = [part.strip(" ") for part in (before, needle, after) if part.strip(" ")]
        return header + " ".join(parts) + question, position
