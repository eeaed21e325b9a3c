"""SLOs: per-request thresholds that define goodput, and CI gates on summary metrics.

Per-request SLOs (``RequestSlo``) set each record's ``slo_ok``: the request succeeded and
every threshold that is set holds (``ttft_ms <= X``, ``tpot_ms <= Y``, ``ttlt_ms <= Z``). A
missing TTFT/TTLT on a successful record fails the SLO (we cannot show it was met); a missing
TPOT does not, because a one-token answer has no TPOT by definition.

Gates are conditions (``ramplab.conditions``) over the summary dict (``summary.json``) that
must hold; the right side is a number, or arithmetic on numbers::

    ttft_ms.p99 < 800
    error_ratio < 0.01
    goodput_ratio > 0.95
    steps[-1].achieved_qps >= 95       one step (Python-style index, negative from the end)
    steps[*].drop_ratio <= 0.01        every step must pass

OP is one of ``< <= > >= == !=``. A gate whose value is ``None`` (no data, e.g. p99 of zero
requests) *fails*: absence of evidence is not a pass. A gate whose path does not exist is
``invalid`` — almost always a typo — and maps to the usage exit code, not to "SLO missed".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from ramplab.conditions import Condition, ConditionError, Segment, parse_condition
from ramplab.errors import GateError
from ramplab.measure.record import RequestRecord
from ramplab.results.selfcheck import distrust
from ramplab.results.summary import GateStatus, GateVerdict, Observed
from ramplab.results.trust import untrusted_gates

# ``answer_ttft_ms``: a reasoning model's first answer token (docs/workloads.md).
_SLO_FIELDS = ("ttft_ms", "tpot_ms", "ttlt_ms", "answer_ttft_ms")


@dataclass(frozen=True, slots=True)
class RequestSlo:
    """Per-request thresholds in milliseconds; ``None`` means "not part of the SLO"."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    ttlt_ms: float | None = None
    answer_ttft_ms: float | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in _SLO_FIELDS)

    def limits(self) -> dict[str, float]:
        """The thresholds that are set, by figure (``{"ttft_ms": 500.0}``)."""
        return {name: limit for name in _SLO_FIELDS if (limit := getattr(self, name)) is not None}

    def meets(self, r: RequestRecord) -> bool:
        if not r.ok:
            return False
        for name in _SLO_FIELDS:
            limit = getattr(self, name)
            value = getattr(r, name)
            if limit is None:
                continue
            if value is None:
                if name == "tpot_ms":
                    continue
                return False
            if value > limit:
                return False
        return True

    def apply(self, records: Iterable[RequestRecord]) -> None:
        """Set ``slo_ok`` on every record (left ``None`` when the SLO is empty)."""
        for r in records:
            r.slo_ok = None if self.empty else self.meets(r)


def parse_request_slo(spec: Mapping[str, Any] | str | None, field: str = "slo") -> RequestSlo:
    """``{"ttft_ms": 800, "tpot_ms": 50}`` or ``"ttft_ms<=800,tpot_ms<=50"`` (each a condition)."""
    if spec is None:
        return RequestSlo()
    items: dict[str, object] = {}
    if isinstance(spec, str):
        for part in filter(None, (p.strip() for p in spec.split(","))):
            item = parse_condition(part, field)
            if item.op != "<=":
                raise GateError(field, f"expected NAME<=MS items, got {part!r}")
            limit = item.threshold()
            items[item.metric] = str(item.expr) if limit is None else limit
    elif isinstance(spec, Mapping):
        items = dict(spec)
    else:
        raise GateError(field, f"expected a mapping or NAME<=MS items, got {spec!r}")
    values: dict[str, float] = {}
    for name, raw in items.items():
        if name not in _SLO_FIELDS:
            raise GateError(f"{field}.{name}", f"unknown SLO (one of {', '.join(_SLO_FIELDS)})")
        values[name] = _number(raw, f"{field}.{name}", positive=True)
    return RequestSlo(**values)


def _number(raw: object, field: str, *, positive: bool = False) -> float:
    if isinstance(raw, bool):
        raise GateError(field, f"expected a number, got {raw!r}")
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise GateError(field, f"expected a number, got {raw!r}") from None
    if not math.isfinite(value) or (positive and value <= 0):
        raise GateError(field, f"expected a finite number{' > 0' if positive else ''}, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class Gate:
    """A condition on the summary that must hold; its right side is a finite number."""

    condition: Condition

    @property
    def text(self) -> str:
        return self.condition.text

    @property
    def path(self) -> tuple[Segment, ...]:
        return self.condition.path

    @property
    def op(self) -> str:
        return self.condition.op

    @property
    def threshold(self) -> float:
        limit = self.condition.threshold()
        assert limit is not None  # parse_gate let only finite numbers through
        return limit

    def evaluate(self, summary: Mapping[str, Any]) -> GateVerdict:
        """The verdict on a ``summary.json`` mapping (``RunSummary.to_json()``)."""
        try:
            found = self.condition.evaluate(lambda path: _resolve(summary, path, ""))
        except LookupError as exc:
            return GateVerdict(gate=self.text, status="invalid", detail=str(exc))
        observed = tuple((r.where, _observed(r.value)) for r in found)
        failures = []
        for r in found:
            if r.value is None:
                failures.append(f"{r.where}: no data")
            elif r.holds is None:  # the threshold is a number: only a value that is none is left
                detail = f"{r.where} is not a number"
                return GateVerdict(
                    gate=self.text, status="invalid", observed=observed, detail=detail
                )
            elif not r.holds:
                failures.append(f"{r.where} = {r.value:g}")
        if not found:
            return GateVerdict(gate=self.text, status="fail", detail="no values (empty list)")
        status: GateStatus = "fail" if failures else "pass"
        return GateVerdict(
            gate=self.text, status=status, observed=observed, detail="; ".join(failures)
        )


def _observed(value: Any) -> Observed:
    return value if value is None or isinstance(value, int | float | str | bool) else str(value)


def _resolve(obj: Any, path: Sequence[Segment], prefix: str) -> list[tuple[str, Any]]:
    if not path:
        return [(prefix, obj)]
    seg, rest = path[0], path[1:]
    where = f"{prefix}.{seg.name}" if prefix else seg.name
    if not isinstance(obj, Mapping) or seg.name not in obj:
        raise LookupError(f"no metric {where!r} in the summary")
    value = obj[seg.name]
    if seg.index is None:
        return _resolve(value, rest, where)
    if not isinstance(value, list):
        raise LookupError(f"{where!r} is not a list")
    if seg.index == "*":
        out: list[tuple[str, Any]] = []
        for i, item in enumerate(value):
            out.extend(_resolve(item, rest, f"{where}[{i}]"))
        return out
    if not -len(value) <= seg.index < len(value):
        raise LookupError(f"{where}[{seg.index}] is out of range ({len(value)} items)")
    return _resolve(value[seg.index], rest, f"{where}[{seg.index}]")


def parse_gate(text: str, field: str = "gates") -> Gate:
    """Parse ``"ttft_ms.p99 < 800"``-style conditions; ``GateError`` names the problem."""
    condition = parse_condition(text, field)
    limit = condition.threshold()
    if limit is None or not math.isfinite(limit):
        reason = f"expected a finite number, got {str(condition.expr)!r}"
        raise ConditionError(field, condition.text, condition.expr.at + 1, reason)
    return Gate(condition)


def parse_gates(texts: Iterable[str], field: str = "gates") -> list[Gate]:
    return [parse_gate(t, f"{field}[{i}]") for i, t in enumerate(texts)]


def evaluate_gates(gates: Iterable[Gate], summary: Mapping[str, Any]) -> tuple[GateVerdict, ...]:
    """Every gate on ``summary`` (its ``summary.json`` form); on a generator-bound run a pass is
    ``untrusted`` (``selfcheck.distrust``), and so is a pass on a timing figure of a run whose
    stamps cannot be trusted (``trust.untrusted_gates``), whoever evaluates."""
    return untrusted_gates(distrust([g.evaluate(summary) for g in gates], summary), summary)


def gates_table(verdicts: Sequence[GateVerdict]) -> Table:
    """The pass/fail table (a ``rich`` renderable; print it with any console)."""
    table = Table(title="SLO gates")
    table.add_column("gate")
    table.add_column("observed", justify="right")
    table.add_column("result")
    table.add_column("detail")
    style = {"pass": "green", "fail": "red", "invalid": "yellow", "untrusted": "yellow"}
    for r in verdicts:
        shown = ", ".join(f"{v:g}" if isinstance(v, int | float) else str(v) for _, v in r.observed)
        table.add_row(r.gate, shown, f"[{style[r.status]}]{r.status.upper()}[/]", r.detail)
    return table


def print_gates(verdicts: Sequence[GateVerdict], console: Console | None = None) -> None:
    (console or Console()).print(gates_table(verdicts))
