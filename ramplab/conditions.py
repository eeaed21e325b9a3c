"""Conditions, ``METRIC OP EXPR``: the one language of SLO gates, request SLOs and ``fail_if``.

::

    CONDITION := PATH OP EXPR
    PATH      := SEGMENT ("." SEGMENT)*      ttft_ms.p99, steps[-1].achieved_qps, steps[*].x
    SEGMENT   := NAME ["[" (INTEGER | "*") "]"]
    OP        := <  <=  >  >=  ==  !=
    EXPR      := TERM (("+" | "-") TERM)*
    TERM      := FACTOR (("*" | "/") FACTOR)*
    FACTOR    := ("+" | "-") FACTOR | NUMBER | NAME | "(" EXPR ")"

A NUMBER is written as in Python (``800``, ``0.01``, ``.5``, ``1e3``, ``1_000``, ``0x10``). A NAME
on the right is one the caller declares (``fail_if``: ``baseline``, ``noise``; a gate: none); any
other is refused when the condition is read. Whitespace is free, except inside a PATH; ``#``
starts a comment that runs to the end.

A condition only *holds* or not. The polarity is the caller's, under the names users know: a gate
(``--gate``, ``gates:``) must hold, a ``fail_if`` (``--fail-if``) must not. What a PATH names is
the caller's too (the ``Lookup`` given to ``Condition.evaluate``): gates read ``summary.json``,
``fail_if`` one figure of a comparison per variant and step.

The right side is computed in floats. A name the environment has no value for (``noise`` without
repeats) or a division by zero leaves it unknown, and then the condition neither holds nor fails
(``None``): what "no data" means is the caller's decision (a gate fails, a ``fail_if`` holds).

Read by hand rather than with ``ast``: the language is this grammar, not whatever Python's parser
happens to allow, and an error can name the column where reading stopped.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ramplab.errors import GateError

__all__ = [
    "NO_VALUES",
    "OPERATORS",
    "Arithmetic",
    "Condition",
    "ConditionError",
    "Env",
    "Expr",
    "Lookup",
    "Name",
    "Number",
    "Reading",
    "Segment",
    "Signed",
    "parse_condition",
]

Env = Mapping[str, float | None]
NO_VALUES: Env = MappingProxyType({})

OPERATORS: Mapping[str, Callable[[float, float], bool]] = MappingProxyType(
    {
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
        "==": operator.eq,
        "!=": operator.ne,
    }
)
_ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_ATOM = 3  # a number, a name, a signed factor: never needs parentheses
_MAX_DEPTH = 100  # nested parentheses and signs; deeper is a mistake, not a recursion error

_NAME = re.compile(r"[A-Za-z_]\w*")
_INDEX = re.compile(r"\[(\*|-?\d+)\]")
_OP = re.compile(r"<=|>=|==|!=|<|>")
_DIGITS = r"\d(?:_?\d)*"
_NUMBER = re.compile(
    r"0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+"
    rf"|(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?"
)
_TOKEN = re.compile(r"\w+|[<>=!]=|.", re.DOTALL)  # what an error shows as "got ..."


class ConditionError(GateError):
    """A condition that cannot be read: ``text`` is the condition (stripped), ``column`` where
    reading it stopped (from 1), ``reason`` why."""

    def __init__(self, field: str, text: str, column: int, reason: str) -> None:
        self.text = text
        self.column = column
        self.reason = reason
        super().__init__(field, f"{text!r} at column {column}: {reason}")


@dataclass(frozen=True, slots=True)
class Segment:
    """One part of a metric path: ``steps[-1]`` is ``Segment("steps", -1)``."""

    name: str
    index: int | Literal["*"] | None = None

    def __str__(self) -> str:
        return self.name if self.index is None else f"{self.name}[{self.index}]"


@dataclass(frozen=True, slots=True)
class Number:
    """A number on the right side."""

    value: float
    spelling: str  # as written: ``describe()`` shows 1_000 as 1_000, not 1000.0
    at: int  # offset of the first character in the condition's text

    def evaluate(self, env: Env) -> float | None:
        return self.value

    def __str__(self) -> str:
        return self.spelling


@dataclass(frozen=True, slots=True)
class Name:
    """A name on the right side; its value comes from the environment at each evaluation."""

    name: str
    at: int

    def evaluate(self, env: Env) -> float | None:
        return env.get(self.name)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Signed:
    """``-x`` or ``+x``."""

    sign: str  # "+" or "-"
    operand: Expr
    at: int

    def evaluate(self, env: Env) -> float | None:
        value = self.operand.evaluate(env)
        if value is None:
            return None
        return -value if self.sign == "-" else value

    def __str__(self) -> str:
        return self.sign + _shown(self.operand, _precedence(self.operand) < _ATOM)


@dataclass(frozen=True, slots=True)
class Arithmetic:
    """``left op right``; left to right, ``*`` and ``/`` before ``+`` and ``-``."""

    op: str  # + - * /
    left: Expr
    right: Expr

    @property
    def at(self) -> int:
        return self.left.at

    def evaluate(self, env: Env) -> float | None:
        left, right = self.left.evaluate(env), self.right.evaluate(env)
        if left is None or right is None or (self.op == "/" and right == 0):
            return None
        return _ARITHMETIC[self.op](left, right)

    def __str__(self) -> str:
        # Parentheses exactly where the tree needs them: a - (b - c) keeps them, (a * b) + c not.
        level = _PRECEDENCE[self.op]
        left = _shown(self.left, _precedence(self.left) < level)
        right = _shown(self.right, _precedence(self.right) <= level)
        return f"{left} {self.op} {right}"


Expr = Number | Name | Signed | Arithmetic


def _precedence(expr: Expr) -> int:
    return _PRECEDENCE[expr.op] if isinstance(expr, Arithmetic) else _ATOM


def _shown(expr: Expr, wrap: bool) -> str:
    return f"({expr})" if wrap else str(expr)


@dataclass(frozen=True, slots=True)
class Reading:
    """One value a lookup found: ``where`` (``steps[2].drop_ratio``), the value as found, and
    whether the condition holds for it (``None``: no data, or the value is not a number)."""

    where: str
    value: object
    holds: bool | None


Lookup = Callable[[tuple[Segment, ...]], Iterable[tuple[str, object]]]
"""A path's values, each with where it was found; raises ``LookupError`` for a path naming
nothing (a typo), which ``Condition.evaluate`` lets through."""


@dataclass(frozen=True, slots=True)
class Condition:
    """``PATH OP EXPR`` as read. ``text`` is as given (stripped) and is what results record;
    ``describe()`` (and ``str()``) is the canonical spelling."""

    text: str
    path: tuple[Segment, ...]
    op: str
    expr: Expr

    @property
    def metric(self) -> str:
        """The path as text: ``steps[*].ttft_ms.p99``."""
        return ".".join(str(s) for s in self.path)

    def threshold(self, env: Env = NO_VALUES) -> float | None:
        """The right side with the names' values from ``env``; ``None``: no data."""
        return self.expr.evaluate(env)

    def holds(self, value: float | None, env: Env = NO_VALUES) -> bool | None:
        """Whether ``value OP EXPR``; ``None`` when either side has no data."""
        limit = self.threshold(env)
        if value is None or limit is None:
            return None
        return OPERATORS[self.op](value, limit)

    def evaluate(self, lookup: Lookup, env: Env = NO_VALUES) -> tuple[Reading, ...]:
        """Every value ``lookup`` finds for the path, each with its verdict."""
        limit = self.threshold(env)
        readings = []
        for where, value in lookup(self.path):
            holds = None
            if limit is not None and isinstance(value, int | float) and not isinstance(value, bool):
                holds = OPERATORS[self.op](float(value), limit)
            readings.append(Reading(where, value, holds))
        return tuple(readings)

    def describe(self) -> str:
        """``ttft_ms.p99 > 1.1 * baseline``: one space around operators, no redundant brackets,
        numbers as written, comments dropped."""
        return f"{self.metric} {self.op} {self.expr}"

    def __str__(self) -> str:
        return self.describe()


def parse_condition(text: object, field: str, names: Collection[str] = ()) -> Condition:
    """Read one condition whose right side may use ``names``; a ``ConditionError`` (a
    ``UsageError``) names ``field``, the text and the column where reading stopped."""
    if not isinstance(text, str):
        raise GateError(field, f"expected a condition 'METRIC OP EXPR', got {text!r}")
    return _Reader(text.strip(), field, names).condition()


class _Reader:
    """Recursive descent over ``text``; ``pos`` is the offset of the next unread character."""

    def __init__(self, text: str, field: str, names: Collection[str]) -> None:
        self.text = text
        self.field = field
        self.names = names
        self.pos = 0
        self.depth = 0

    def condition(self) -> Condition:
        path = self.path()
        self.skip()
        op = _OP.match(self.text, self.pos)
        if op is None:
            raise self.error(f"expected an operator (< <= > >= == !=), {self.got()}")
        self.pos = op.end()
        expr = self.sum()
        if self.peek():
            raise self.error(f"expected + - * / or the end, {self.got()}")
        return Condition(self.text, path, op.group(), expr)

    def path(self) -> tuple[Segment, ...]:
        segments: list[Segment] = []
        while True:
            name = _NAME.match(self.text, self.pos)
            if name is None:
                wanted = "a name after '.'" if segments else "a metric, e.g. ttft_ms.p99"
                raise self.error(f"expected {wanted}, {self.got()}")
            self.pos = name.end()
            index: int | Literal["*"] | None = None
            if self.text.startswith("[", self.pos):
                found = _INDEX.match(self.text, self.pos)
                if found is None:
                    raise self.error(f"expected an index after {name.group()!r}: [0], [-1] or [*]")
                self.pos = found.end()
                index = "*" if found.group(1) == "*" else int(found.group(1))
            segments.append(Segment(name.group(), index))
            if not self.text.startswith(".", self.pos):
                return tuple(segments)
            self.pos += 1

    def sum(self) -> Expr:
        left = self.product()
        while (op := self.peek()) in ("+", "-"):
            self.pos += 1
            left = Arithmetic(op, left, self.product())
        return left

    def product(self) -> Expr:
        left = self.factor()
        while (op := self.peek()) in ("*", "/"):
            self.pos += 1
            left = Arithmetic(op, left, self.factor())
        return left

    def factor(self) -> Expr:
        first = self.peek()
        at = self.pos
        if first in ("+", "-", "("):
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise self.error(f"nested deeper than {_MAX_DEPTH} signs or parentheses")
            self.pos += 1
            expr: Expr
            if first == "(":
                expr = self.sum()
                if self.peek() != ")":
                    raise self.error(
                        f"expected ')' to close the '(' at column {at + 1}, {self.got()}"
                    )
                self.pos += 1
            else:
                expr = Signed(first, self.factor(), at)
            self.depth -= 1
            return expr
        if number := _NUMBER.match(self.text, at):
            value = self.number(number.group())
            self.pos = number.end()
            return Number(value, number.group(), at)
        if name := _NAME.match(self.text, at):
            if name.group() not in self.names:
                known = (
                    f"the names here: {', '.join(self.names)}" if self.names else "no names here"
                )
                raise self.error(f"unknown name {name.group()!r} ({known})")
            self.pos = name.end()
            return Name(name.group(), at)
        raise self.error(f"expected a number, a name or '(', {self.got()}")

    def number(self, spelling: str) -> float:
        try:
            if spelling[:2].lower() in ("0x", "0o", "0b"):
                return float(int(spelling, 0))
            return float(spelling)
        except OverflowError:
            raise self.error(f"{spelling} is too large a number") from None

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        if self.text.startswith("#", self.pos):
            self.pos = len(self.text)

    def peek(self) -> str:
        """The next character after whitespace, "" at the end (or a comment)."""
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def got(self) -> str:
        token = _TOKEN.match(self.text, self.pos)
        return f"got {token.group()!r}" if token else "got the end"

    def error(self, reason: str) -> ConditionError:
        return ConditionError(self.field, self.text, self.pos + 1, reason)
