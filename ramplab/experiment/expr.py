"""``--fail-if`` conditions: a metric of each compared variant against its baseline.

::

    CONDITION := METRIC OP EXPR
    METRIC    := [steps[I].]FIGURE[.STAT]   ttft_ms.p99, steps[*].goodput_qps, steps[-1].error_ratio
    OP        := <  <=  >  >=  ==  !=
    EXPR      := numbers, baseline, noise, + - * / ( ) and unary minus

Examples: ``ttft_ms.p99 > 1.1 * baseline`` (10 % slower than the baseline),
``steps[*].goodput_qps < baseline - 2 * noise`` (lower goodput at any step, by more than twice the
repeat-to-repeat noise), ``error_ratio > 0.01`` (a plain threshold).

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

import ast
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ramplab.errors import GateError

__all__ = ["NAMES", "Condition", "parse_condition", "parse_conditions"]

NAMES = ("baseline", "noise")
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_ARITH: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_SPLIT = re.compile(r"^(?P<metric>[^<>=!]+?)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<expr>.+)$")
_METRIC = re.compile(
    r"^(?:steps\[(?P<step>\*|-?\d+)\]\.)?(?P<figure>[A-Za-z_]\w*)(?:\.(?P<stat>[A-Za-z_]\w*))?$"
)
_SYNTAX = "expected 'METRIC OP EXPR', e.g. 'ttft_ms.p99 > 1.1 * baseline'"

Env = Mapping[str, float | None]
Step = int | Literal["*"] | None


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed condition; ``key`` is the metric without its step (``ttft_ms.p99``)."""

    text: str
    step: Step  # None: the whole run; "*": every step; an int: one step of the x-axis
    key: str
    op: str
    expr: ast.expr

    def threshold(self, env: Env) -> float | None:
        """The right side with ``baseline`` and ``noise`` from ``env``; ``None``: no data."""
        return _evaluate(self.expr, env)

    def holds(self, value: float | None, env: Env) -> bool | None:
        """Whether ``value OP EXPR``; ``None`` when either side has no data."""
        limit = self.threshold(env)
        if value is None or limit is None:
            return None
        return _COMPARE[self.op](value, limit)


def _evaluate(node: ast.expr, env: Env) -> float | None:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int | float)  # _check let only numbers through
        return float(node.value)
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp):
        inner = _evaluate(node.operand, env)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    assert isinstance(node, ast.BinOp)
    left, right = _evaluate(node.left, env), _evaluate(node.right, env)
    if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
        return None
    return _ARITH[type(node.op)](left, right)


def _check(node: ast.AST, field: str, text: str) -> None:
    """Only numbers, the names, + - * / and unary signs: anything else is refused, not run."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise GateError(field, f"{node.value!r} is not a number in {text!r}")
    elif isinstance(node, ast.Name):
        if node.id not in NAMES:
            raise GateError(
                field,
                f"unknown name {node.id!r} in {text!r} (the right side knows {', '.join(NAMES)})",
            )
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        _check(node.operand, field, text)
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        _check(node.left, field, text)
        _check(node.right, field, text)
    else:
        raise GateError(
            field,
            f"only numbers, {', '.join(NAMES)}, + - * / and parentheses "
            f"may follow the operator in {text!r}",
        )


def parse_condition(text: object, field: str = "--fail-if") -> Condition:
    """Parse one condition; ``GateError`` names ``field`` and what is wrong."""
    if not isinstance(text, str):
        raise GateError(field, f"{_SYNTAX}, got {text!r}")
    m = _SPLIT.match(text.strip())
    if m is None:
        raise GateError(field, f"{_SYNTAX}, got {text!r}")
    metric = _METRIC.match(m.group("metric").strip())
    if metric is None:
        raise GateError(
            field,
            f"bad metric {m.group('metric').strip()!r} in {text!r} "
            "(e.g. ttft_ms.p99, steps[*].goodput_qps)",
        )
    if metric.group("figure") == "steps":
        raise GateError(field, f"'steps' needs an index, e.g. steps[*].ttft_ms.p99, in {text!r}")
    try:
        expr = ast.parse(m.group("expr"), mode="eval").body
    except SyntaxError:
        reason = f"cannot read the expression {m.group('expr')!r} in {text!r}"
        raise GateError(field, reason) from None
    _check(expr, field, text)
    raw = metric.group("step")
    step: Step = None if raw is None else "*" if raw == "*" else int(raw)
    key = metric.group("figure") + (f".{metric.group('stat')}" if metric.group("stat") else "")
    return Condition(text.strip(), step, key, m.group("op"), expr)


def parse_conditions(texts: Iterable[object], field: str = "--fail-if") -> list[Condition]:
    """Every condition, each error naming its position (``--fail-if[1]``)."""
    return [parse_condition(t, f"{field}[{i}]") for i, t in enumerate(texts)]
