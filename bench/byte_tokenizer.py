"""Writes a byte-level tokenizer (256 tokens, no merges) in Hugging Face's format to a directory.

AIPerf needs a tokenizer to build its synthetic prompts, and every one it can name is fetched
from the network at run time (its ``builtin`` downloads tiktoken's ``o200k_base``). This one is
generated on the spot, offline; output tokens are counted from the server's ``usage``
(``--use-server-token-count``), so its coarseness touches only the prompts' lengths.
Run with the peer's interpreter: ``python bench/byte_tokenizer.py DIR``.
"""

from __future__ import annotations

import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast


def write(directory: str) -> None:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {char: index for index, char in enumerate(alphabet)}
    vocab["<|end|>"] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|end|>")
    fast.save_pretrained(directory)


if __name__ == "__main__":
    write(sys.argv[1])
