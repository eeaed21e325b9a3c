"""Each request's output length (its ``max_tokens``): ``--output-lengths``.

    max_tokens          every request asks for ``--max-tokens`` (the default, as before)
    dataset             the dataset's length for the prompt: its answer's tokens (ShareGPT) or its
                        ``output_tokens`` (prompts JSONL)
    uniform:LO,HI       a whole number drawn uniformly from [LO, HI]
    normal:MEAN,STD     a normal draw, rounded, at least 1
    lognormal:MEDIAN,SIGMA  a log-normal draw (median and the σ of the log), rounded, at least 1

A draw is a function of the dataset seed and the request's index (``draw(seed, index)``), so the
same run asks for the same lengths whichever worker sends which request. A server stops at its
end-of-sequence token before ``max_tokens`` unless asked not to: send ``ignore_eos`` (the
reference target and vLLM honour it) to get exactly these lengths.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from ramplab.errors import UsageError

__all__ = ["OutputLengths", "parse_output_lengths"]

Kind = Literal["max_tokens", "dataset", "uniform", "normal", "lognormal"]
_TWO = {"uniform": ("LO", "HI"), "normal": ("MEAN", "STD"), "lognormal": ("MEDIAN", "SIGMA")}


@dataclass(frozen=True, slots=True)
class OutputLengths:
    kind: Kind = "max_tokens"
    a: float = 0.0
    b: float = 0.0

    @property
    def from_dataset(self) -> bool:
        return self.kind == "dataset"

    @property
    def drawn(self) -> bool:
        return self.kind in _TWO

    def draw(self, seed: int, index: int) -> int:
        """The output length of request ``index`` (a drawn kind only)."""
        # A string seed is hashed with SHA-512: the same number in every process and run.
        rng = random.Random(f"{seed}:{index}")
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        if self.kind == "normal":
            return max(1, round(rng.gauss(self.a, self.b)))
        if self.kind == "lognormal":
            return max(1, round(rng.lognormvariate(math.log(self.a), self.b)))
        raise ValueError(f"{self.kind} lengths are not drawn")


def parse_output_lengths(text: str, field: str = "--output-lengths") -> OutputLengths:
    """``max_tokens``, ``dataset`` or ``KIND:A,B``; a ``UsageError`` naming ``field``."""
    text = text.strip()
    if text in ("max_tokens", "dataset"):
        return OutputLengths(text)  # type: ignore[arg-type]
    name, sep, rest = text.partition(":")
    if not sep or name not in _TWO:
        raise UsageError(field, f"expected max_tokens, dataset, uniform:LO,HI, normal:MEAN,STD "
                                f"or lognormal:MEDIAN,SIGMA, got {text!r}")  # fmt: skip
    parts = rest.split(",")
    try:
        a, b = (float(p) for p in parts)
    except ValueError:
        raise UsageError(
            field, f"{name} needs two numbers {','.join(_TWO[name])}, got {rest!r}"
        ) from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise UsageError(field, f"{name}: the numbers must be finite, got {rest!r}")
    if name == "uniform" and not (1 <= a <= b):
        raise UsageError(field, f"uniform needs 1 ≤ LO ≤ HI, got {rest!r}")
    if name != "uniform" and (a <= 0 or b < 0):
        raise UsageError(field, f"{name} needs {_TWO[name][0]} > 0 and {_TWO[name][1]} ≥ 0")
    return OutputLengths(name, a, b)  # type: ignore[arg-type]
