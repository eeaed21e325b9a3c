"""Text of exactly N tokens in a real tokenizer's own tokens: what generated prompts are made of.

With ``workload.tokenizer: approx`` (the default) a generated prompt of N tokens is N four-letter
words, each one token for the reference target's counter (``prompts.py``, ``filler.py``,
``prefix.py``). A real server's tokenizer cuts those words differently: under the 16k byte-level
BPE of the vLLM model in ``docs/engines.md`` N synthetic words were 1.10 N tokens and a shared
prefix's random four-letter strings several each — a request asked as 296 tokens was served as
~512 (``docs/workloads.md``) — so "1,024-token prompts" overflowed a 2,048 context. When the
campaign names a real tokenizer (``cl100k_base``, a ``tokenizer.json`` or a model directory
holding one), prompts are written in its tokens instead:

1. **The words** (once per process): every token of the vocabulary whose text is a lowercase
   ASCII word of 3–10 letters and which the tokenizer encodes as one token both alone and after a
   space (``"time"`` and ``" time"``), sorted. A byte-level BPE of 16k tokens trained on the
   docs has ~1,300, the vLLM model's 2,272, cl100k_base 6,549, BERT's WordPiece thousands.
   Fewer than ``MIN_WORDS`` is a ``UsageError`` that says to use ``approx``: so few words make
   a text too repetitive to stand for a prompt (and nearly every real tokenizer has far more).
2. **A text of N tokens** is N of those words drawn at random, joined by single spaces.
3. **Why it is exact.** A tokenizer cuts a text into pieces before its model runs (the
   pre-tokenizer: byte-level BPE, WordPiece, tiktoken's pattern, SentencePiece's Metaspace all cut
   at each space) and encodes each piece alone, so no token spans two pieces. When a sample text
   of these words is cut into one piece per word (checked once, at load: ``local``), a text of N
   words is N pieces of one token each — exactly N tokens, by construction, for any text made of
   them; nothing needs re-encoding. A tokenizer that does not cut at spaces (a BPE trained
   without a pre-tokenizer learns merges across them: "ule ", "it ") gets its texts verified
   instead. First the number of words is scaled a few times by what a word cost on average
   (``SCALINGS``), which lands within a few tokens; then words are dropped from the end until
   the text is at most N tokens, and added one at a time, each drawn word kept only when the
   text stays at most N — a last word that merges with any next one is dropped after ``STUCK``
   draws that do not fit. Each kept word brings the count closer and none passes N, so it ends
   exact within a few dozen encodes in practice; after ``TRIES`` draws it is a ``UsageError``
   naming the tokenizer rather than a prompt of the wrong length.
   Every length from 1 to 300 is exact under 16k and 32k BPEs trained without a pre-tokenizer
   (``tests/ramplab/workload/test_token_words.py``).

The count is the text's own, without special tokens. A chat template adds its own tokens on the
server (role markers, a BOS: a few per message), so the server's ``usage.prompt_tokens`` is
larger than the text's count by them; the run reports both (``docs/workloads.md``).

Cost per prompt (``bench/token_words.py``, 2026-12-04 on the shared 2-core machine, a 16k
byte-level BPE trained on the docs: 1,318 words, ``local``), CPU ms, median of interleaved rounds:

    prompt                               256 tokens   8,000 tokens
    synthetic, approx's words               0.043        1.30
    synthetic, the BPE's tokens             0.025        0.42   (one ``choices``, not N ``choice``)
    filler, approx's words                  0.004        0.051
    filler, the BPE's tokens                0.004        0.080  (longer words: a longer join)
    one encode of the text                  0.31         8.2    (what ``local`` saves)
    synthetic, a BPE without pre-tokenizer  1.2         45      (verified: a median of 4 encodes)

So sizing in a real tokenizer's tokens costs the generator nothing per prompt where its
pre-tokenizer cuts at spaces (every served model's tokenizer measured here); one that does not
pays a few encodes per prompt — 45 ms of a worker's CPU for 8,000 tokens, a rate limit for long
prompts. A needle context is encoded once whole per prompt (``needle.py``: its prose is not made
of these words). Finding the words: 34 ms per process for the 16k BPE, 144 ms for cl100k_base
(6,549 words). The word path's N words were 1.10 N of this BPE's tokens (256 → 283).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ramplab.errors import UsageError
from ramplab.workload.tokenizers import Tokenizer, Vocabulary

__all__ = ["MIN_WORDS", "ROUNDS", "TokenWords", "token_words"]

MIN_WORDS = 32
SCALINGS = 4  # rounds of scaling the number of words (a tokenizer without ``local``)
TRIES = 512  # words tried, one at a time, to reach the exact length after them
STUCK = 8  # words tried after one last word before that word goes
ROUNDS = 8  # rounds a needle context's haystack is resized until exact (``needle.py``)
_SAMPLE_WORDS = 512  # the text the ``local`` check cuts: every word, several times over


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: a cache key per process
class TokenWords:
    """The single-token words of one tokenizer, and texts of an exact length made of them."""

    tokenizer: Tokenizer
    words: tuple[str, ...]
    local: bool  # a text of these words is cut into one piece per word: its length is exact

    def draw(self, tokens: int, rng: random.Random) -> list[str]:
        return rng.choices(self.words, k=tokens)

    def text(self, tokens: int, rng: random.Random) -> str:
        """A text of exactly ``tokens`` tokens (``tokens`` ≥ 1)."""
        return self.exact(self.draw(tokens, rng), tokens, rng)

    def exact(self, words: list[str], tokens: int, rng: random.Random) -> str:
        """``words`` joined, made exactly ``tokens`` tokens long (module docstring, 3)."""
        text = " ".join(words)
        if self.local:
            return text
        count = self.tokenizer.count
        # Near: scale the number of words by what a word cost on average, a few times.
        n = count(text)
        for _ in range(SCALINGS):
            wanted = max(1, round(len(words) * tokens / n))
            if n == tokens or wanted == len(words):
                break
            if wanted < len(words):
                del words[wanted:]
            else:
                words += self.draw(wanted - len(words), rng)
            text = " ".join(words)
            n = count(text)
        # Exact: below the length, then one word at a time, each one that keeps it at most the
        # length. A last word that merges with whatever follows it ("suit" + " x": "su", "it ",
        # "x") makes every next word cost two: after ``STUCK`` draws that do not fit it goes.
        while n > tokens and len(words) > 1:
            words.pop()
            n = count(" ".join(words))
        tries = stuck = 0
        while n < tokens and tries < TRIES:
            tries += 1
            word = rng.choice(self.words)
            more = count(" ".join([*words, word]))
            if n < more <= tokens:
                words.append(word)
                n, stuck = more, 0
            elif (stuck := stuck + 1) >= STUCK:
                words.pop()
                words = words or [rng.choice(self.words)]  # a first word goes for another
                n, stuck = count(" ".join(words)), 0
        text = " ".join(words)
        if n == tokens:
            return text
        raise UsageError(
            "workload.tokenizer",
            f"{self.tokenizer.name}: no text of exactly {tokens} tokens after {TRIES} tries "
            "(its tokens span the spaces between words); use approx",
        )


def _words(tokenizer: Vocabulary) -> tuple[str, ...]:
    candidates = sorted(
        {
            word
            for word in (piece.strip() for piece in tokenizer.vocabulary())
            if 3 <= len(word) <= 10 and word.isascii() and word.isalpha() and word.islower()
        }
    )
    return tuple(
        word
        for word in candidates
        if tokenizer.count(word) == 1 and tokenizer.count(" " + word) == 1
    )


def token_words(tokenizer: Tokenizer) -> TokenWords | None:
    """The words of ``tokenizer`` (a process finds them once: ``options/workload.py``); ``None``
    for one that is not a ``Vocabulary`` (``approx``: prompts keep their four-letter words)."""
    if not hasattr(tokenizer, "vocabulary") or not hasattr(tokenizer, "pretokens"):
        return None
    vocabulary: Vocabulary = tokenizer  # type: ignore[assignment]
    words = _words(vocabulary)
    if len(words) < MIN_WORDS:
        raise UsageError(
            "workload.tokenizer",
            f"{tokenizer.name} has {len(words)} words of one token (at least {MIN_WORDS} are "
            "needed to write prompts in its tokens); use approx",
        )
    sample = [words[i % len(words)] for i in range(max(_SAMPLE_WORDS, len(words)))]
    text = " ".join(sample)
    pieces = vocabulary.pretokens(text)
    local = len(pieces) == len(sample) and tokenizer.count(text) == len(sample)
    return TokenWords(tokenizer, words, local)
