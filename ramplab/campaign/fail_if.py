"""``--fail-if`` conditions: a metric of each compared variant against its baseline.

::

    CONDITION := METRIC OP EXPR
    METRIC    := [steps[I].]FIGURE[.STAT]   ttft_ms.p99, steps[*].goodput_qps, steps[-1].error_ratio
    OP        := <  <=  >  >=  ==  !=
    EXPR      := numbers, baseline, noise, + - * / ( ) and unary minus

Examples: ``ttft_ms.p99 > 1.1 * baseline`` (10 % slower than the baseline),
``steps[*].goodput_qps < baseline - 2 * noise`` (lower goodput at any step, by more than twice the
repeat-to-repeat noise), ``error_ratio > 0.01`` (a plain threshold). The grammar, parser and
evaluator are the gates' (``ramplab.conditions``); only the polarity differs: a gate must hold, a
``fail_if`` must not.

- ``FIGURE`` is a figure of ``summary.json`` (``achieved_qps``, ``error_ratio``, ``ttft_ms``, ...);
  a percentile figure needs its ``STAT`` (``p50``, ``p90``, ``p99``).
- Without ``steps[...]`` the figure is the run's (over every measured window, as gates read it);
  ``steps[*]`` checks every step of the common x-axis (the condition holds when it holds at one),
  ``steps[I]`` the I-th step of that axis (negative from the end).
- The left side is the variant's value, the mean over its repeats; ``baseline`` is the baseline's
  mean of the same figure at the same step; ``noise`` is the noise of their difference (half the
  variant's spread across repeats plus half the baseline's; unknown unless both ran ≥ 2 times).
- A condition is checked for every variant except the baseline. One that cannot be evaluated
  (no data: a p99 of zero requests, an unknown ``noise``) *holds*: absence of evidence is not a
  pass, as with gates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ramplab import conditions
from ramplab.conditions import ConditionError, Env

__all__ = ["NAMES", "Condition", "parse_condition", "parse_conditions"]

NAMES = ("baseline", "noise")
Step = int | Literal["*"] | None


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed condition; ``key`` is the metric without its step (``ttft_ms.p99``)."""

    text: str
    step: Step  # None: the whole run; "*": every step; an int: one step of the x-axis
    key: str
    op: str
    parsed: conditions.Condition

    def threshold(self, env: Env) -> float | None:
        """The right side with ``baseline`` and ``noise`` from ``env``; ``None``: no data."""
        return self.parsed.threshold(env)

    def holds(self, value: float | None, env: Env) -> bool | None:
        """Whether ``value OP EXPR``; ``None`` when either side has no data."""
        return self.parsed.holds(value, env)


def parse_condition(text: object, field: str = "--fail-if") -> Condition:
    """Parse one condition; ``GateError`` names ``field`` and what is wrong."""
    parsed = conditions.parse_condition(text, field, NAMES)
    head, *rest = parsed.path
    step: Step = head.index if head.name == "steps" else None
    figure = rest if head.name == "steps" else [head, *rest]
    if (head.name == "steps" and step is None) or (figure and figure[0].name == "steps"):
        reason = "'steps' needs an index, e.g. steps[*].ttft_ms.p99"
        raise ConditionError(field, parsed.text, 1, reason)
    if not 1 <= len(figure) <= 2 or any(s.index is not None for s in figure):
        reason = f"bad metric {parsed.metric!r} (e.g. ttft_ms.p99, steps[*].goodput_qps)"
        raise ConditionError(field, parsed.text, 1, reason)
    key = ".".join(s.name for s in figure)
    return Condition(parsed.text, step, key, parsed.op, parsed)


def parse_conditions(texts: Iterable[object], field: str = "--fail-if") -> list[Condition]:
    """Every condition, each error naming its position (``--fail-if[1]``)."""
    return [parse_condition(t, f"{field}[{i}]") for i, t in enumerate(texts)]
