"""The condition language (``ramplab.conditions``): grammar, evaluation, errors with columns, and
the one reading gates, request SLOs and ``fail_if`` share."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable

import pytest

from ramplab.campaign.fail_if import parse_condition as parse_fail_if
from ramplab.conditions import (
    OPERATORS,
    Arithmetic,
    Condition,
    ConditionError,
    Expr,
    Name,
    Number,
    Segment,
    Signed,
    parse_condition,
)
from ramplab.errors import GateError, UsageError
from ramplab.results.slo import evaluate_gates, parse_gate, parse_request_slo

NAMES = ("baseline", "noise")
ENV = {"baseline": 100.0, "noise": 2.0}


def read(text: str, names: Iterable[str] = NAMES) -> Condition:
    return parse_condition(text, "f", tuple(names))


def shape(expr: Expr) -> object:
    """The tree without offsets or spellings: what two spellings of one condition share."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Name):
        return expr.name
    if isinstance(expr, Signed):
        return (expr.sign, shape(expr.operand))
    return (expr.op, shape(expr.left), shape(expr.right))


# --- operators ----------------------------------------------------------------------------

PYTHON_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


@pytest.mark.parametrize("op", list(PYTHON_OPS))
@pytest.mark.parametrize("value", [99.0, 100.0, 101.0])
def test_every_operator(op: str, value: float) -> None:
    condition = read(f"ttft_ms.p99 {op} 100")
    assert condition.op == op
    assert condition.holds(value) is PYTHON_OPS[op](value, 100.0)


def test_the_operators_are_exactly_six() -> None:
    assert set(OPERATORS) == set(PYTHON_OPS)


# --- the right side -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("800", 800.0),
        ("0.01", 0.01),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("1E-3", 0.001),
        ("1.5e+2", 150.0),
        ("1_000", 1000.0),
        ("0800", 800.0),  # float() read gates this way; Python's ast refused it
        ("0x10", 16.0),
        ("0o17", 15.0),
        ("0b101", 5.0),
        ("1e999", float("inf")),  # a number; a gate refuses it (not finite), fail_if takes it
    ],
)
def test_numbers(expr: str, value: float) -> None:
    assert read(f"x < {expr}").threshold() == value


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("1 + 2 * 3", 7.0),  # * before +
        ("(1 + 2) * 3", 9.0),
        ("8 / 4 / 2", 1.0),  # left to right
        ("10 - 4 - 3", 3.0),
        ("10 - (4 - 3)", 9.0),
        ("-2 * 3", -6.0),
        ("2 * -3", -6.0),
        ("--2", 2.0),
        ("+-+2", -2.0),
        ("-(1 + 2)", -3.0),
        ("((((7))))", 7.0),
        ("1.1 * baseline", 110.00000000000001),  # float arithmetic, as Python computes it
        ("baseline - 2 * noise", 96.0),
        ("(baseline + noise) / 2", 51.0),
        ("-baseline", -100.0),
    ],
)
def test_arithmetic(expr: str, value: float) -> None:
    assert read(f"x > {expr}").threshold(ENV) == value


def test_unknown_values_leave_the_condition_undecided() -> None:
    noisy = read("x > baseline + noise")
    assert noisy.threshold({"baseline": 100.0, "noise": None}) is None
    assert noisy.threshold({"baseline": 100.0}) is None  # a declared name without a value
    assert noisy.holds(1e9, {"baseline": 100.0, "noise": None}) is None
    assert read("x > 1 / baseline").threshold({"baseline": 0.0}) is None  # no division by zero
    assert read("x > 1 / (baseline - 100)").holds(1.0, ENV) is None
    assert read("x > 1").holds(None) is None


# --- the environment ----------------------------------------------------------------------


def test_names_are_the_callers() -> None:
    assert read("x > limit", names=["limit"]).threshold({"limit": 3.0}) == 3.0
    with pytest.raises(ConditionError) as info:
        read("x > baseline", names=[])
    assert info.value.reason == "unknown name 'baseline' (no names here)"
    with pytest.raises(ConditionError) as info:
        read("x > 2 * ceiling")
    assert info.value.reason == "unknown name 'ceiling' (the names here: baseline, noise)"
    assert info.value.column == 9


def test_the_environment_is_read_at_each_evaluation() -> None:
    condition = read("x > 1.5 * baseline")
    assert condition.holds(140.0, {"baseline": 100.0}) is False
    assert condition.holds(140.0, {"baseline": 90.0}) is True


# --- paths and whitespace -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("error_ratio < 1", [("error_ratio", None)]),
        ("ttft_ms.p99 < 1", [("ttft_ms", None), ("p99", None)]),
        ("steps[-1].achieved_qps < 1", [("steps", -1), ("achieved_qps", None)]),
        ("steps[*].drop_ratio < 1", [("steps", "*"), ("drop_ratio", None)]),
        ("a[0].b[12].c < 1", [("a", 0), ("b", 12), ("c", None)]),
    ],
)
def test_paths(text: str, path: list[tuple[str, object]]) -> None:
    condition = read(text)
    assert [(s.name, s.index) for s in condition.path] == path
    assert condition.metric == text.split(" ", maxsplit=1)[0]


@pytest.mark.parametrize(
    "text",
    [
        "ttft_ms.p99>1.1*baseline",
        "ttft_ms.p99 > 1.1 * baseline",
        "   ttft_ms.p99\t>\t1.1  *  baseline   ",
        "ttft_ms.p99 >1.1*baseline  # ten per cent slower",
        "ttft_ms.p99 > (1.1 * baseline)",
    ],
)
def test_whitespace_comments_and_brackets_do_not_matter(text: str) -> None:
    condition = read(text)
    assert condition.text == text.strip()
    assert condition.describe() == "ttft_ms.p99 > 1.1 * baseline"
    assert str(condition) == condition.describe()
    assert shape(condition.expr) == ("*", 1.1, "baseline")


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("x<1", "x < 1"),
        ("x < 1_000", "x < 1_000"),  # numbers as written
        ("x < (1 + 2) * 3", "x < (1 + 2) * 3"),
        ("x < (1 * 2) + 3", "x < 1 * 2 + 3"),
        ("x < 1 - (2 - 3)", "x < 1 - (2 - 3)"),
        ("x < 1 / (2 * 3)", "x < 1 / (2 * 3)"),
        ("x < (1 - 2) - 3", "x < 1 - 2 - 3"),
        ("x < -(baseline)", "x < -baseline"),
        ("x < -(1 - 2)", "x < -(1 - 2)"),
        ("steps[-1].y.p99 != - - noise", "steps[-1].y.p99 != --noise"),
    ],
)
def test_describe_is_canonical_and_reads_back_the_same(text: str, canonical: str) -> None:
    condition = read(text)
    assert condition.describe() == canonical
    again = read(canonical)
    assert (again.path, again.op, shape(again.expr)) == (
        condition.path,
        condition.op,
        shape(condition.expr),
    )


def test_the_tree() -> None:
    condition = read("steps[*].goodput_qps < baseline - 2 * noise")
    assert condition.path == (Segment("steps", "*"), Segment("goodput_qps"))
    expr = condition.expr
    assert isinstance(expr, Arithmetic)
    assert expr.op == "-"
    assert expr.left == Name("baseline", 23)
    assert isinstance(expr.right, Arithmetic)
    assert expr.right.left == Number(2.0, "2", 34)
    assert expr.at == 23


# --- errors, with the column where reading stopped ----------------------------------------


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ("", 1, "expected a metric, e.g. ttft_ms.p99, got the end"),
        ("ttft_ms.p99", 12, "expected an operator (< <= > >= == !=), got the end"),
        ("< 800", 1, "expected a metric, e.g. ttft_ms.p99, got '<'"),
        ("1abc < 2", 1, "expected a metric, e.g. ttft_ms.p99, got '1abc'"),
        ("ttft_ms..p99 < 1", 9, "expected a name after '.', got '.'"),
        ("ttft_ms. p99 < 1", 9, "expected a name after '.', got ' '"),
        ("steps[x].a < 1", 6, "expected an index after 'steps': [0], [-1] or [*]"),
        ("steps[].a < 1", 6, "expected an index after 'steps': [0], [-1] or [*]"),
        ("ttft_ms.p99 =< 800", 13, "expected an operator (< <= > >= == !=), got '='"),
        ("ttft_ms.p99 = 800", 13, "expected an operator (< <= > >= == !=), got '='"),
        ("ttft ms < 1", 6, "expected an operator (< <= > >= == !=), got 'ms'"),
        ("ttft_ms.p99 <", 14, "expected a number, a name or '(', got the end"),
        ("ttft_ms.p99 <<< 3", 14, "expected a number, a name or '(', got '<'"),
        ("ttft_ms.p99 >> 2", 14, "expected a number, a name or '(', got '>'"),
        ("ttft_ms.p99 < 800 ms", 19, "expected + - * / or the end, got 'ms'"),
        ("x > baseline ** 2", 15, "expected a number, a name or '(', got '*'"),
        ("x > 7 // 2", 8, "expected a number, a name or '(', got '/'"),
        ("x > 7 % 2", 7, "expected + - * / or the end, got '%'"),
        ("x > 1 < 2", 7, "expected + - * / or the end, got '<'"),
        ("x > 1 if baseline else 2", 7, "expected + - * / or the end, got 'if'"),
        ("x > (1", 7, "expected ')' to close the '(' at column 5, got the end"),
        ("x > (1 + (2)", 13, "expected ')' to close the '(' at column 5, got the end"),
        ("x > 1)", 6, "expected + - * / or the end, got ')'"),
        ("x > 'a'", 5, "expected a number, a name or '(', got \"'\""),
        ("x > 1j", 6, "expected + - * / or the end, got 'j'"),
        ("x > __import__('os')", 5, "unknown name '__import__' (the names here: baseline, noise)"),
        ("x > True", 5, "unknown name 'True' (the names here: baseline, noise)"),
        ("x > nan", 5, "unknown name 'nan' (the names here: baseline, noise)"),
        ("x # < 1", 8, "expected an operator (< <= > >= == !=), got the end"),
        ("x > 0x" + "f" * 300, 5, "0x" + "f" * 300 + " is too large a number"),
        ("x > " + "(" * 101 + "1" + ")" * 101, 105, "nested deeper than 100 signs or parentheses"),
        ("x > " + "-" * 101 + "1", 105, "nested deeper than 100 signs or parentheses"),
    ],
)
def test_errors_name_the_text_the_column_and_why(text: str, column: int, reason: str) -> None:
    with pytest.raises(ConditionError) as info:
        parse_condition(text, "gates[2]", NAMES)
    err = info.value
    assert (err.field, err.text, err.column, err.reason) == (
        "gates[2]",
        text.strip(),
        column,
        reason,
    )
    assert str(err) == f"gates[2]: {text.strip()!r} at column {column}: {reason}"
    assert isinstance(err, GateError)
    assert isinstance(err, UsageError)


def test_the_column_counts_in_the_stripped_text() -> None:
    with pytest.raises(ConditionError) as info:
        read("   x > y  ")
    assert (info.value.text, info.value.column) == ("x > y", 5)


@pytest.mark.parametrize("text", [None, 7, ["x < 1"]])
def test_a_condition_is_text(text: object) -> None:
    with pytest.raises(GateError) as info:
        parse_condition(text, "--fail-if[0]")
    assert info.value.field == "--fail-if[0]"
    assert repr(text) in str(info.value)


# --- evaluation against a lookup ----------------------------------------------------------


def test_evaluate_reads_every_value_the_lookup_finds() -> None:
    values = {"steps[0].x": 1.0, "steps[1].x": None, "steps[2].x": 5.0, "steps[3].x": "a"}
    seen: list[tuple[Segment, ...]] = []

    def lookup(path: tuple[Segment, ...]) -> list[tuple[str, object]]:
        seen.append(path)
        return list(values.items())

    readings = read("steps[*].x < baseline / 25").evaluate(lookup, ENV)
    assert seen == [(Segment("steps", "*"), Segment("x"))]
    assert [(r.where, r.value, r.holds) for r in readings] == [
        ("steps[0].x", 1.0, True),
        ("steps[1].x", None, None),  # no data
        ("steps[2].x", 5.0, False),
        ("steps[3].x", "a", None),  # not a number
    ]
    assert [r.holds for r in read("x < baseline").evaluate(lookup, {})] == [None] * 4
    assert [r.holds for r in read("x == 1").evaluate(lambda _: [("x", True)])] == [None]


def test_evaluate_lets_a_missing_metric_through() -> None:
    def lookup(path: tuple[Segment, ...]) -> list[tuple[str, object]]:
        raise LookupError(f"no metric {'.'.join(map(str, path))!r}")

    with pytest.raises(LookupError, match=r"no metric 'ttft\.p99'"):
        read("ttft.p99 < 1").evaluate(lookup)


# --- one language: gates, request SLOs and fail_if ----------------------------------------


@pytest.mark.parametrize(
    "text",
    ["ttft_ms.p99 <<< 3", "ttft_ms..p99 < 1", "ttft_ms.p99 < (1", "x > 1 if 2 else 3", ""],
)
def test_gates_and_fail_if_give_the_same_error(text: str) -> None:
    with pytest.raises(ConditionError) as gate:
        parse_gate(text, field="F")
    with pytest.raises(ConditionError) as fail_if:
        parse_fail_if(text, field="F")
    assert str(gate.value) == str(fail_if.value)


def test_the_same_condition_with_both_polarities() -> None:
    text = "error_ratio < 0.01"
    summary = {"error_ratio": 0.004}
    (verdict,) = evaluate_gates([parse_gate(text)], summary)
    assert verdict.status == "pass"  # a gate must hold: it does
    assert parse_fail_if(text).holds(0.004, {}) is True  # a fail_if must not: the run fails


def test_each_caller_adds_only_its_own_restrictions() -> None:
    # A gate has no names, and its threshold must be a finite number ...
    assert parse_gate("ttft_ms.p99 < 2 * 400").threshold == 800.0
    for text, column in (("x < baseline", 5), ("x < 1e999", 5), ("x < 2 * (1 / 0)", 5)):
        with pytest.raises(ConditionError) as info:
            parse_gate(text)
        assert info.value.column == column
    # ... a request SLO item is NAME <= a positive number ...
    assert parse_request_slo("ttft_ms <= 2 * 400, tpot_ms<=50").ttft_ms == 800.0
    with pytest.raises(GateError, match="expected NAME<=MS items"):
        parse_request_slo("ttft_ms < 800")
    # ... and fail_if takes baseline and noise, on a figure of the run or of its steps.
    condition = parse_fail_if("steps[-1].ttft_ms.p99 > baseline + 2 * noise")
    assert (condition.step, condition.key, condition.threshold(ENV)) == (-1, "ttft_ms.p99", 104.0)
    with pytest.raises(ConditionError, match=r"bad metric 'a\.b\.c'"):
        parse_fail_if("a.b.c > baseline")
