"""The prefix-cache model: which leading tokens of a prompt a real server would not recompute.

Like vLLM's automatic prefix caching, the prompt is cut into blocks of ``block_tokens`` tokens
and each *whole* block gets a hash chained on the hash of the block before it, so a block's
hash names the whole prefix that ends with it. A request's cached prefix is the run of leading
blocks whose hashes are in the cache; the trailing partial block is never cached, and at least
the last prompt token is always computed (vLLM recomputes it to produce the first logits), so
``cached ≤ ⌊(P − 1) / B⌋ × B``.

Decisions, defended here because they shape the numbers:

* **Tokens are the approximate tokenizer's** (``tokenizer.py``: a word is one token per started
  four characters, punctuation one each), so block edges fall inside words exactly where that
  tokenizer's counts put them; a block's hash covers its text up to the end of its last token,
  whitespace included. One pass of a regex over the prompt and one built-in ``hash`` per block:
  Python's string hash (SipHash) is randomised per process, which is fine because each process
  has its own cache. The same pass yields the token count, so with the approximate tokenizer a
  request with the cache on still reads its prompt once (``bench/prefix_cache.py``).
* **Per process.** Each worker process keeps its own LRU, as each GPU's engine does; with several
  workers a repeated prompt hits only when it reaches the process that saw it. No Redis round
  trip on the hot path.
* **Blocks enter the cache when prefill ends**, not at lookup: a request that arrives while an
  identical one is still in prefill finds nothing yet (vLLM caches only computed blocks).
* **LRU over blocks, bounded by ``max_cached_tokens``** (``// block_tokens`` blocks). A request's
  blocks are touched last-to-first, so its first block is the most recent and eviction takes
  sequences from the tail, as vLLM's free-block queue does: a cached prefix loses its end before
  its start, never a hole in the middle.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

from target_service.metrics import TargetMetrics
from target_service.settings import PrefixCacheSettings

# The approximate tokenizer's pieces (``tokenizer.py``); a test keeps the two counts equal.
_PIECES = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    """A prompt's token count (the approximate tokenizer's) and its whole blocks' hashes."""

    tokens: int
    hashes: list[int]


def scan(text: str, block_tokens: int) -> PromptBlocks:
    """One pass over ``text``: its approximate token count and the chained hashes of the whole
    blocks of ``block_tokens`` tokens that start it."""
    hashes: list[int] = []
    previous = 0
    start = 0
    in_block = 0
    total = 0
    for match in _PIECES.finditer(text):
        begin, end = match.span()
        tokens = (end - begin + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN
        total += tokens
        while in_block + tokens >= block_tokens:
            # The block ends inside (or at the end of) this piece, after ``needed`` of its tokens.
            needed = block_tokens - in_block
            cut = min(end, begin + needed * _CHARS_PER_TOKEN)
            previous = hash((previous, text[start:cut]))
            hashes.append(previous)
            start = cut
            begin = cut
            tokens -= needed
            in_block = 0
        in_block += tokens
    return PromptBlocks(total, hashes)


def block_hashes(text: str, block_tokens: int) -> list[int]:
    """Chained hashes of the whole blocks of ``block_tokens`` tokens that start ``text``."""
    return scan(text, block_tokens).hashes


class PrefixCache:
    """A per-process LRU of block hashes; every method is O(blocks of the prompt)."""

    def __init__(self, settings: PrefixCacheSettings, metrics: TargetMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self._blocks: OrderedDict[int, None] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def cached_tokens(self) -> int:
        """Tokens this process's cache holds now."""
        return len(self._blocks) * self.settings.block_tokens

    def scan(self, text: str) -> PromptBlocks:
        """The prompt's blocks, cut at this cache's block size (before admission: the same pass
        gives the approximate tokenizer's count, so a request reads its prompt once)."""
        return scan(text, self.settings.block_tokens)

    def lookup(self, hashes: list[int], prompt_tokens: int) -> int:
        """Tokens of the longest cached prefix of whole blocks; counted in the metrics."""
        block = self.settings.block_tokens
        hits = 0
        for digest in hashes:
            if digest not in self._blocks:
                break
            hits += 1
        cached = min(hits * block, max(0, (prompt_tokens - 1) // block * block))
        self.metrics.prefix_cache_lookups_total.inc()
        self.metrics.prefix_cache_queried_tokens_total.inc(prompt_tokens)
        if cached:
            self.metrics.prefix_cache_hits_total.inc()
            self.metrics.prefix_cache_hit_tokens_total.inc(cached)
        return cached

    def insert(self, hashes: list[int]) -> None:
        """Record a prefilled prompt's blocks as most recently used, then evict to the bound."""
        capacity = self.settings.max_cached_tokens // self.settings.block_tokens
        blocks = self._blocks
        for digest in reversed(hashes):
            if digest in blocks:
                blocks.move_to_end(digest)
            else:
                blocks[digest] = None
        while len(blocks) > capacity:
            blocks.popitem(last=False)
        self.metrics.prefix_cache_blocks.set(len(blocks))

    def clear(self) -> None:
        self._blocks.clear()
        self.metrics.prefix_cache_blocks.set(0)
