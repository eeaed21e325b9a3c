"""Request traces: when each request arrived and how long its prompt and answer were.

A trace is replayed on the open-loop engine as the run's schedule (``arrivals/trace.py``): the
``i``-th arrival is the trace's ``i``-th row in time order, sent with a prompt of the row's input
length and ``max_tokens`` = its output length (``ignore_eos``). Accepted files (the columns are
documented in ``docs/workloads.md``):

- JSONL, one object a line: Mooncake's ``timestamp`` (milliseconds), ``input_length``,
  ``output_length`` (other keys such as ``hash_ids`` are ignored); or ``offset_s``,
  ``input_tokens``, ``output_tokens``;
- CSV with a header: the Azure LLM inference trace's ``TIMESTAMP`` (a date-time, or seconds),
  ``ContextTokens``, ``GeneratedTokens``; or the JSONL names as columns.

Offsets count from the trace's first arrival. ``replay`` scales time (``speed`` 2 = twice as
fast), repeats the trace ``loop`` times (each copy one period later: the span plus one mean gap,
so the last arrival and the next copy's first do not coincide) and keeps the first ``limit``
arrivals. Everything is a ``UsageError`` naming the option and the line at fault.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ramplab.errors import UsageError

__all__ = ["Trace", "load_trace", "parse_trace_spec", "replay", "trace_spec"]

FIELD = "--ramplab-trace"
SPEC_PREFIX = "trace:"
# (names in a row, unit) — the first present wins.
_OFFSET = (("timestamp", 1e-3), ("offset_s", 1.0), ("offset_ms", 1e-3), ("TIMESTAMP", None))
_INPUT = ("input_length", "input_tokens", "ContextTokens")
_OUTPUT = ("output_length", "output_tokens", "GeneratedTokens")


@dataclass(frozen=True, slots=True)
class Trace:
    """Arrival offsets (seconds, sorted, from 0) with each arrival's input and output tokens."""

    offsets: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def duration_s(self) -> float:
        """The span plus one mean gap: the window that holds every arrival (1 s for one row)."""
        n = len(self.offsets)
        last = float(self.offsets[-1]) if n else 0.0
        gap = last / (n - 1) if n > 1 and last > 0 else 1.0
        return last + gap


def _rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    try:
        handle = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise UsageError(FIELD, f"{str(path)!r}: {exc.strerror}") from None
    with handle:
        if path.suffix.lower() == ".csv":
            for number, row in enumerate(csv.DictReader(handle), 2):
                yield number, row
            return
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(FIELD, f"{str(path)!r} line {number}: {exc.msg}") from None
            if not isinstance(item, dict):
                raise UsageError(FIELD, f"{str(path)!r} line {number}: expected a JSON object")
            yield number, item


def _seconds(value: Any, unit: float | None) -> float:
    if unit is None:  # Azure's TIMESTAMP: a date-time, or already seconds
        try:
            return float(value)
        except ValueError:
            return datetime.fromisoformat(str(value).strip()).timestamp()
    return float(value) * unit


def _row(row: Mapping[str, Any], where: str) -> tuple[float, int, int]:
    offset_key = next(((k, unit) for k, unit in _OFFSET if row.get(k) not in (None, "")), None)
    input_key = next((k for k in _INPUT if row.get(k) not in (None, "")), None)
    output_key = next((k for k in _OUTPUT if row.get(k) not in (None, "")), None)
    if offset_key is None or input_key is None or output_key is None:
        raise UsageError(
            FIELD,
            f"{where}: needs an arrival time ({', '.join(k for k, _ in _OFFSET)}), an input "
            f"length ({', '.join(_INPUT)}) and an output length ({', '.join(_OUTPUT)})",
        )
    try:
        at = _seconds(row[offset_key[0]], offset_key[1])
        tokens_in, tokens_out = int(row[input_key]), int(row[output_key])
    except (TypeError, ValueError) as exc:
        raise UsageError(FIELD, f"{where}: {exc}") from None
    if not math.isfinite(at):
        raise UsageError(FIELD, f"{where}: {offset_key[0]} must be a finite time")
    if tokens_in < 1 or tokens_out < 1:
        raise UsageError(FIELD, f"{where}: {input_key} and {output_key} must be ≥ 1")
    return at, tokens_in, tokens_out


def load_trace(path: Path) -> Trace:
    """The trace in ``path`` in time order (stable: rows at the same time keep file order).

    Read once per process and version of the file: every user of a worker asks for it."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise UsageError(FIELD, f"{str(path)!r}: {exc.strerror}") from None
    return _load(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _load(path: Path, _mtime_ns: int, _size: int) -> Trace:
    rows = [_row(row, f"{str(path)!r} line {number}") for number, row in _rows(path)]
    if not rows:
        raise UsageError(FIELD, f"{str(path)!r}: the trace holds no requests")
    at = np.array([r[0] for r in rows], dtype=np.float64)
    order = np.argsort(at, kind="stable")
    return Trace(
        offsets=at[order] - at[order][0],
        input_tokens=np.array([r[1] for r in rows], dtype=np.int64)[order],
        output_tokens=np.array([r[2] for r in rows], dtype=np.int64)[order],
    )


def replay(trace: Trace, speed: float = 1.0, loop: int = 1, limit: int = 0) -> Trace:
    """``trace`` repeated ``loop`` times, cut to its first ``limit`` arrivals (0: all), with
    time divided by ``speed``."""
    if not (speed > 0 and math.isfinite(speed)):
        raise ValueError(f"speed must be finite and > 0, got {speed}")
    period = trace.duration_s
    offsets = np.concatenate([trace.offsets + k * period for k in range(loop)])
    inputs = np.tile(trace.input_tokens, loop)
    outputs = np.tile(trace.output_tokens, loop)
    if limit > 0:
        offsets, inputs, outputs = offsets[:limit], inputs[:limit], outputs[:limit]
    return Trace(offsets / speed, inputs, outputs)


def trace_spec(path: Path | str, speed: float = 1.0, loop: int = 1, limit: int = 0) -> str:
    """The ``--ramplab-arrivals`` text of a replay: every process rebuilds it from this alone."""
    return f"{SPEC_PREFIX}{float(speed)!r}:{int(loop)}:{int(limit)}:{path}"


def parse_trace_spec(spec: str, field: str = FIELD) -> Trace:
    """The replayed trace of a ``trace_spec`` text (``trace:`` removed or not)."""
    text = spec.removeprefix(SPEC_PREFIX)
    parts = text.split(":", 3)
    if len(parts) != 4 or not parts[3]:
        raise UsageError(field, f"expected trace:SPEED:LOOP:LIMIT:PATH, got {spec!r}")
    speed_text, loop_text, limit_text, path = parts
    try:
        speed, loop, limit = float(speed_text), int(loop_text), int(limit_text)
    except ValueError:
        raise UsageError(field, f"expected trace:SPEED:LOOP:LIMIT:PATH, got {spec!r}") from None
    if not (speed > 0 and math.isfinite(speed)) or loop < 1 or limit < 0:
        raise UsageError(field, f"speed > 0, loop ≥ 1, limit ≥ 0 expected, got {spec!r}")
    return replay(load_trace(Path(path)), speed, loop, limit)
