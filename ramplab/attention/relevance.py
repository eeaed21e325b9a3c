"""Relevance: the attention the answer token receives from every query position.

For a probe of ``n`` tokens whose answer token is at index ``k``, with ``A`` the **last** layer's
attention weights (``heads × n × n``, each row a softmax over the keys)::

    relevance[q] = (1/H) · Σ_h A[h, q, k]        for every query position q = 0 … n−1

— the share of its attention that position ``q`` gives to the answer token, averaged over the
``H`` heads. Every position counts: the special tokens, the needle's own tokens, the question,
and ``q = k`` (the answer token attending to itself). The vector is reported against the signed
distance ``q − k`` (negative: the query is before the needle's answer). An even spread would give
every position ``1/n``: the tables show that as the baseline.

A causal LM's mask makes ``A[h, q, k] = 0`` for ``q < k``: only positions after the answer can
look back at it, so the negative half of the curve is zero by construction, not a finding.
``is_causal`` reads the mask off the matrix itself (everything above the diagonal is zero) so
that the report says which kind of model produced it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ramplab.attention.model import LoadedModel
from ramplab.attention.probe import Probe
from ramplab.errors import UsageError

__all__ = [
    "BIN_EDGES",
    "Bin",
    "Relevance",
    "by_distance",
    "check_window",
    "head_mean",
    "is_causal",
    "measure",
]

Floats = npt.NDArray[np.float64]
# |distance| bins: 0, 1, 2–4, 5–16, 17–64, 65–256, 257 and beyond, on both sides.
BIN_EDGES = (0, 1, 2, 5, 17, 65, 257)
_CAUSAL_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Bin:
    label: str
    low: int  # signed distance, inclusive
    high: int  # inclusive
    positions: int
    mean: float | None  # mean relevance over its positions; None when it holds none


def head_mean(attention: npt.NDArray[np.floating], answer: int) -> Floats:
    """``attention`` is one layer's ``heads × queries × keys``: the relevance vector of ``answer``
    (one value per query position)."""
    return np.asarray(attention[:, :, answer].mean(axis=0), dtype=np.float64)


def is_causal(attention: npt.NDArray[np.floating]) -> bool:
    """True when no query attends to a key after it (a causal mask)."""
    upper = np.triu(np.ones(attention.shape[-2:], dtype=bool), k=1)
    return bool(np.all(np.abs(attention[:, upper]) <= _CAUSAL_TOLERANCE))


def _bounds() -> list[tuple[int, int]]:
    spans = [(lo, hi - 1) for lo, hi in itertools.pairwise(BIN_EDGES)]
    spans.append((BIN_EDGES[-1], 1 << 30))
    negative = [(-hi, -lo) for lo, hi in reversed(spans) if lo > 0]
    return [*negative, *spans]


def _label(low: int, high: int) -> str:
    if low == high:
        return f"{low:+d}" if low else "0"
    if high >= 1 << 30:
        return f"≥ {low:+d}"
    if low <= -(1 << 30):
        return f"≤ {high:+d}"
    return f"{low:+d} … {high:+d}"


def by_distance(values: Floats, answer: int) -> list[Bin]:
    """The relevance vector's mean per bin of signed distance from the answer token."""
    distance = np.arange(len(values)) - answer
    bins = []
    for low, high in _bounds():
        inside = values[(distance >= low) & (distance <= high)]
        bins.append(
            Bin(
                label=_label(low, high),
                low=low,
                high=high,
                positions=int(inside.size),
                mean=float(inside.mean()) if inside.size else None,
            )
        )
    return bins


@dataclass(frozen=True)
class Relevance:
    """One depth's result: the relevance vector and what it was measured on."""

    depth: float
    answer: int
    answer_token: str
    values: Floats
    causal: bool

    @property
    def positions(self) -> int:
        return len(self.values)

    @property
    def uniform(self) -> float:
        return 1.0 / len(self.values)

    def distances(self) -> list[int]:
        return [q - self.answer for q in range(len(self.values))]

    def peak_distance(self) -> int:
        return int(np.argmax(self.values)) - self.answer

    def bins(self) -> list[Bin]:
        return by_distance(self.values, self.answer)


def check_window(context_tokens: int, window: int | None, field: str = "--context-tokens") -> None:
    """Refuse a context the model cannot read: positions past its window have no embedding."""
    if context_tokens < 1:
        raise UsageError(field, f"{context_tokens} is not a positive number of tokens")
    if window is not None and context_tokens > window:
        raise UsageError(
            field,
            f"{context_tokens} tokens is beyond the model's window of {window} tokens: "
            f"give at most {window} (nothing is truncated)",
        )


def measure(loaded: LoadedModel, probes: Sequence[Probe]) -> list[Relevance]:
    """Run the model on each probe and take its last layer's attentions."""
    import torch

    out = []
    with torch.inference_mode():
        for probe in probes:
            ids = torch.tensor([probe.ids])
            result = loaded.model(
                input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True
            )
            last = result.attentions[-1][0].to(torch.float64).numpy()
            out.append(
                Relevance(
                    depth=probe.depth,
                    answer=probe.answer,
                    answer_token=str(
                        loaded.tokenizer.convert_ids_to_tokens(probe.ids[probe.answer])
                    ),
                    values=head_mean(last, probe.answer),
                    causal=is_causal(last),
                )
            )
    return out
