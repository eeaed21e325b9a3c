"""Prompt token inflation (study §3.3): ``ramplab prompts analyse|normalise``.

- ``tokenizers``: the tokenizers a prompt is counted with (cl100k_base offline, any local
  Hugging Face ``tokenizer.json``, the named ``approx`` fallback);
- ``redundancy``: the kinds of redundancy, one removal rule each;
- ``corpus``: prompt files (JSONL or plain text), read and written back;
- ``analyse``: the inflation coefficient of each kind per tokenizer, as a table and JSON;
- ``normalise``: the preprocessor that removes them, rule by rule.

Plain Python: imports ``errors`` and ``measure.tokens`` only; the CLI is in ``ramplab.stack.cli``.
"""
