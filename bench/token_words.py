"""What writing prompts in a real tokenizer's tokens costs the generator, per prompt.

A byte-level BPE of 16k tokens is trained here on the repository's docs (as the issue's vLLM
model's was, offline). Per prompt of 256 and 8,000 tokens, CPU time of one process, median of
interleaved rounds: the word path (``approx``: four-letter words) against the token path
(``token_words.py``: the tokenizer's single-token words), for synthetic prompts (a fresh draw)
and trace fillers (a slice of a pool); what one encode of the text costs — what the token path
saves by proving, once, that this tokenizer's tokens never span a space; and the whole cost for
a BPE trained without a pre-tokenizer, whose texts are verified and resized until exact. Beside
it, what the word path's N words count under the BPE: the gap the token path closes. The
one-time cost of finding the words is timed for this BPE and for cl100k_base.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ramplab.workload.filler import filler_text
from ramplab.workload.prompts import SyntheticPrompts
from ramplab.workload.token_words import TokenWords, token_words
from ramplab.workload.tokenizers import load_tokenizer

LENGTHS = (256, 8000)
ROUNDS = 15
REPEAT = 20  # prompts per timing
DOCS = Path(__file__).resolve().parents[1] / "docs"


def _train(folder: Path, vocab: int = 16000, *, split_words: bool = True) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    lines = [line for path in sorted(DOCS.glob("*.md"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]  # fmt: skip
    tokenizer = Tokenizer(models.BPE())
    if split_words:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(lines, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def _per_prompt_ms(make: Callable[[], object]) -> float:
    start = time.process_time()
    for _ in range(REPEAT):
        make()
    return (time.process_time() - start) / REPEAT * 1000


def _found_in(spec: str) -> tuple[float, TokenWords]:
    tokenizer = load_tokenizer(spec)
    start = time.process_time()
    words = token_words(tokenizer)
    assert words is not None
    return (time.process_time() - start) * 1000, words


def run() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        bpe_ms, words = _found_in(str(_train(Path(tmp) / "bpe")))
        _, spanning = _found_in(str(_train(Path(tmp) / "raw", 32000, split_words=False)))
    assert not spanning.local
    cl100k_ms, cl100k = _found_in("cl100k_base")
    count = words.tokenizer.count
    rng = random.Random(1)
    cases: dict[str, Callable[[int], Callable[[], object]]] = {
        "synthetic, words (approx)": lambda n: SyntheticPrompts(n, 0, rng).next,
        "synthetic, tokens (BPE)": lambda n: SyntheticPrompts(n, 0, rng, words).next,
        "filler, words (approx)": lambda n: lambda: filler_text(n, rng),
        "filler, tokens (BPE)": lambda n: lambda: filler_text(n, rng, words),
        "verify: encode the text once": lambda n: lambda: count(words.text(n, rng)),
        "synthetic, tokens (BPE without a pre-tokenizer)": (
            lambda n: SyntheticPrompts(n, 0, rng, spanning).next
        ),
    }
    times: dict[tuple[str, int], list[float]] = {}
    for n in LENGTHS:
        filler_text(n, rng)  # the pools are drawn once per process: not a prompt's cost
        filler_text(n, rng, words)
    for _ in range(ROUNDS):
        for n in LENGTHS:
            for name, make in cases.items():
                times.setdefault((name, n), []).append(_per_prompt_ms(make(n)))
    median = {key: statistics.median(values) for key, values in times.items()}
    verify = "verify: encode the text once"
    for n in LENGTHS:  # encoding includes drawing: what the encode alone adds
        median[(verify, n)] -= median[("synthetic, tokens (BPE)", n)]
    inflation = {
        n: count(SyntheticPrompts(n, 0, random.Random(n)).next()[0]["content"]) for n in LENGTHS
    }
    lines = [
        "## Prompts in a real tokenizer's tokens (per prompt)",
        "",
        "CPU ms per prompt of one process (median of "
        f"{ROUNDS} interleaved rounds of {REPEAT} prompts): the word path (`approx`) against "
        "the token path (`workload/token_words.py`) with a 16k byte-level BPE trained here on "
        f"the docs ({len(words.words)} single-token words, `local`: {words.local}, so no "
        "prompt is re-encoded). *verify* is one encode of the text. The last row is a 32k BPE "
        "trained without a pre-tokenizer: its merges span spaces, so each text is encoded, "
        "resized and encoded again until exact (a median of 4 encodes).",
        "",
        "| case | " + " | ".join(f"{n:,} tokens" for n in LENGTHS) + " |",
        "|---|" + "---:|" * len(LENGTHS),
    ]
    for name in cases:
        label = "verify (one encode, added)" if name == verify else name
        lines.append(
            f"| {label} | " + " | ".join(f"{median[(name, n)]:.3f}" for n in LENGTHS) + " |"
        )
    lines += [
        "",
        "What the word path's N words count under this BPE (the gap the token path closes): "
        + ", ".join(f"{n:,} → {inflation[n]:,}" for n in LENGTHS)
        + f". Finding the words, once per process: {bpe_ms:.0f} ms for the 16k BPE, "
        f"{cl100k_ms:.0f} ms for cl100k_base ({len(cl100k.words):,} words).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
