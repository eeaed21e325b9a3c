"""The workload a Locust process's settings ask for: its prompts, sessions, dataset and bodies.

``ramplab.workload`` takes plain values; this is where a process's ``UserSettings`` become them
(the only place that reads the workload options).
"""

from __future__ import annotations

import functools
import logging
import random
import secrets
from collections.abc import Sequence
from typing import Any

from ramplab.errors import UsageError
from ramplab.load.think import parse_think_time
from ramplab.measure.apis import LIMIT_KEYS, prompt_fields
from ramplab.options.settings import UserSettings
from ramplab.workload.dataset import Dataset, parse_range
from ramplab.workload.lengths import parse_output_lengths
from ramplab.workload.needle import NeedlePrompts, parse_needle
from ramplab.workload.prefix import parse_shared_prefix
from ramplab.workload.prompts import (
    FilePrompts,
    Messages,
    PromptSource,
    SyntheticPrompts,
    load_prompts,
    normalise_rules,
    normalised,
)
from ramplab.workload.session import SessionSettings
from ramplab.workload.source import Workload
from ramplab.workload.token_words import TokenWords, token_words
from ramplab.workload.tokenizers import load_tokenizer

__all__ = [
    "load_file_prompts",
    "prompt_source",
    "prompt_words",
    "request_body",
    "session_settings",
    "workload_of",
]

log = logging.getLogger(__name__)


def load_file_prompts(settings: UserSettings) -> list[Messages]:
    """The ``--prompts-file``'s prompts, normalised when ``--normalise`` asks."""
    if settings.prompts_file is None:
        raise UsageError("--prompts-file", "no prompts file is set")
    return normalised(load_prompts(settings.prompts_file), normalise_rules(settings.normalise))


@functools.cache
def _words_of(spec: str) -> TokenWords | None:
    return token_words(load_tokenizer(spec, "--tokenizer"))


def prompt_words(settings: UserSettings) -> TokenWords | None:
    """The words generated prompts are written in: ``--tokenizer``'s single-token words (found
    once per process), or ``None`` for ``approx`` (``workload/token_words.py``)."""
    return _words_of(settings.tokenizer)


def prompt_source(
    settings: UserSettings, rng: random.Random, loaded: Sequence[Messages] | None = None
) -> PromptSource:
    """The prompts of one user; ``loaded`` is the file's prompts read once per process."""
    if settings.needle:  # long-context needle contexts (needle.py); the cell: prompt_labels
        return NeedlePrompts(parse_needle(settings.needle), rng, words=prompt_words(settings))
    if settings.prompts_file is not None:
        prompts = loaded if loaded is not None else load_file_prompts(settings)
        return FilePrompts(prompts, start=rng.randrange(1 << 30))
    return SyntheticPrompts(
        settings.prompt_tokens, settings.prompt_tokens_std, rng, prompt_words(settings)
    )


def request_body(
    settings: UserSettings, model: str, messages: Messages, max_tokens: int | None = None
) -> dict[str, Any]:
    """The OpenAI body of ``--api`` (``measure/apis.py``: the prompt's and the limit's fields);
    extensions (``chunk_size``, ``ignore_eos``) only when asked for; ``max_tokens`` (a
    dataset's output length) overrides ``--max-tokens``."""
    api = settings.api
    body: dict[str, Any] = {
        "model": model,
        **prompt_fields(api, messages),
        LIMIT_KEYS[api]: settings.max_tokens if max_tokens is None else max_tokens,
        "stream": settings.stream,
    }
    if api == "responses":
        body["store"] = False  # a load test's answers are not worth keeping on the server
    elif settings.stream and settings.include_usage:
        # The Responses API always ends with its usage and takes no stream_options for it.
        body["stream_options"] = {"include_usage": True}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.ignore_eos:
        body["ignore_eos"] = True
    if settings.chunk_size is not None:
        body["chunk_size"] = settings.chunk_size
    body.update(settings.extra_body)
    return body


def session_settings(settings: UserSettings) -> SessionSettings | None:
    """The sessions of ``--session-*``; None when every arrival is a single request."""
    if settings.session_turns <= 1:
        return None
    return SessionSettings(
        turns=settings.session_turns,
        think_time=parse_think_time(settings.session_think_time),
        affinity_header=settings.session_header,
    )


def workload_of(settings: UserSettings) -> Workload | None:
    """The process's workload, or None when the options ask for none of its features (the
    users' own prompts and ``--max-tokens`` then, as before). Raises ``UsageError``."""
    lengths = parse_output_lengths(settings.output_lengths)
    prefix = parse_shared_prefix(settings.shared_prefix, "--shared-prefix")
    if settings.dataset is None and prefix is None and lengths.kind == "max_tokens":
        return None
    dataset = None
    if settings.dataset is not None:
        if settings.prompts_file is not None:
            raise UsageError("--dataset", "give --dataset or --prompts-file, not both")
        dataset = Dataset.load(
            settings.dataset,
            load_tokenizer(settings.dataset_tokenizer, "--dataset-tokenizer"),
            settings.dataset_format,  # type: ignore[arg-type]
            parse_range(settings.dataset_prompt_tokens, "--dataset-prompt-tokens"),
            parse_range(settings.dataset_output_tokens, "--dataset-output-tokens"),
            settings.dataset_sample,
            settings.dataset_seed,
        )
        if lengths.from_dataset and all(e.output_tokens is None for e in dataset.entries):
            raise UsageError("--output-lengths", f"dataset: {settings.dataset} has no output "
                             "lengths (no answers, no output_tokens)")  # fmt: skip
    salt = settings.prefix_salt or secrets.token_hex(4)
    if prefix is not None and settings.prefix_salt is None:
        # ``ramplab run`` always passes one (run.json); a process started by hand says its own.
        log.info("shared prefixes: no --prefix-salt given, this process uses %s", salt)
    words = prompt_words(settings) if prefix is not None else None
    return Workload(dataset, lengths, prefix, salt, settings.dataset_seed, words)
