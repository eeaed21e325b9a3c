"""What each request of a dataset or shared-prefix workload asks for: messages and ``max_tokens``.

One ``Workload`` per Locust process, shared by its users. Request ``i`` — the arrival's index in
the run's schedule when the open-loop engine gives one, else the process's own count — gets the
dataset's entry ``i mod n`` in the seeded order (or the user's own synthetic or file prompt when
there is no dataset), the shared prefix of ``i`` as a system message in front of it, and the
output length ``--output-lengths`` says. Nothing here depends on which worker sends ``i``, so a
distributed run sends what a single process would.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ramplab.errors import UsageError
from ramplab.workload.dataset import Dataset
from ramplab.workload.dataset_formats import Messages
from ramplab.workload.lengths import OutputLengths
from ramplab.workload.prefix import SharedPrefix
from ramplab.workload.prompts import PromptSource
from ramplab.workload.token_words import TokenWords

__all__ = ["Prompt", "Workload"]

log = logging.getLogger(__name__)
_AS_ASKED = OutputLengths()  # every request asks for --max-tokens


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: Messages
    max_tokens: int | None = None  # None: --max-tokens
    # The size in tokens the prompt's texts were written to (the dataset's count of an entry);
    # None when a part of it was read, not written (a prompts file).
    tokens: int | None = None


class Workload:
    def __init__(
        self,
        dataset: Dataset | None = None,
        lengths: OutputLengths = _AS_ASKED,
        prefix: SharedPrefix | None = None,
        salt: str = "",
        seed: int = 0,
        words: TokenWords | None = None,
    ) -> None:
        if lengths.from_dataset and dataset is None:
            raise UsageError("--output-lengths", "dataset needs --dataset")
        self.dataset = dataset
        self.lengths = lengths
        self.prefix = prefix
        self.salt = salt
        self.seed = seed
        self.words = words  # the prefixes' words: None, approx's four-letter ones
        self._count = 0  # requests of this process, for runs without a schedule

    def next(self, index: int | None, fallback: PromptSource) -> Prompt:
        """The prompt of request ``index`` (None: this process's next); ``fallback`` gives the
        user's own prompt when there is no dataset."""
        if index is None:
            index = self._count
            self._count += 1
        max_tokens: int | None = None
        tokens: int | None
        if self.dataset is not None:
            entry = self.dataset.entry(index)
            messages = list(entry.messages)
            tokens = entry.prompt_tokens
            if self.lengths.from_dataset:
                max_tokens = entry.output_tokens
        else:
            messages = list(fallback.next())
            tokens = fallback.prompt_tokens
        if self.lengths.drawn:
            max_tokens = self.lengths.draw(self.seed, index)
        if self.prefix is not None:
            text = self.prefix.text(self.salt, index, self.words)
            messages.insert(0, {"role": "system", "content": text})
            if tokens is not None:
                tokens += self.prefix.prefix_tokens
        return Prompt(messages, max_tokens, tokens)
