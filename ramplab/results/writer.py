"""Run results: ``requests.jsonl`` written as requests finish, and ``summary.json`` at the end.

Each record is appended and flushed the moment its request completes, so a killed run loses
nothing it measured (at worst the one line being written). ``summary.json`` follows DESIGN.md: a
``steps`` list (one step covering the whole run when the arrival engine set none) with
``target_qps``, ``achieved_qps``, ``dropped``, ``requests``, ``errors`` (by status, or by error
kind when no response came), ``goodput_qps``, ``output_tokens_per_s`` and ``ttft_ms``, ``itl_ms``,
``tpot_ms``, ``ttlt_ms`` as ``{"p50","p90","p99"}`` from HDR histograms of every value.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import orjson

from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.results.histogram import LatencyHistogram

METRICS = ("ttft_ms", "ttft_send_ms", "itl_ms", "tpot_ms", "ttlt_ms", "ttfb_ms", "lateness_ms")


@dataclass(slots=True)
class StepStats:
    """Aggregates of one load step, built from record dicts (so workers' records merge exactly)."""

    step: int | None
    target_qps: float | None = None
    requests: int = 0
    ok: int = 0
    good: int = 0
    dropped: int = 0
    output_tokens: int = 0
    first_start: float | None = None
    last_end: float | None = None
    errors: Counter[str] = field(default_factory=Counter)
    error_kinds: Counter[str] = field(default_factory=Counter)
    histograms: dict[str, LatencyHistogram] = field(
        default_factory=lambda: {name: LatencyHistogram() for name in METRICS}
    )

    def add(self, record: dict[str, Any]) -> None:
        self.requests += 1
        if self.target_qps is None:
            self.target_qps = record.get("target_qps")
        start = float(record["intended_start"])
        end = start + float(record.get("total_ms") or 0.0) / 1000.0
        self.first_start = start if self.first_start is None else min(self.first_start, start)
        self.last_end = end if self.last_end is None else max(self.last_end, end)
        if record["ok"]:
            self.ok += 1
            if record.get("slo_ok") is not False:
                self.good += 1
            self.output_tokens += int(record.get("output_tokens") or 0)
        else:
            status = record.get("status")
            self.errors[str(status) if status is not None else str(record.get("error_kind"))] += 1
            self.error_kinds[str(record.get("error_kind"))] += 1
        for name in METRICS:
            value = record.get(name)
            if isinstance(value, list):
                for v in value:
                    self.histograms[name].record(v)
            elif isinstance(value, int | float) and (
                record["ok"] or name in ("ttfb_ms", "lateness_ms")
            ):
                self.histograms[name].record(value)

    @property
    def duration_s(self) -> float:
        if self.first_start is None or self.last_end is None:
            return 0.0
        return max(self.last_end - self.first_start, 1e-9)

    def to_json(self) -> dict[str, Any]:
        seconds = self.duration_s
        rate = (lambda n: n / seconds) if seconds > 0 else (lambda n: 0.0)
        out: dict[str, Any] = {
            "step": self.step,
            "target_qps": self.target_qps,
            "achieved_qps": rate(self.requests),
            "dropped": self.dropped,
            "requests": self.requests,
            "ok": self.ok,
            "errors": dict(self.errors),
            "error_kinds": dict(self.error_kinds),
            "goodput_qps": rate(self.good),
            "output_tokens_per_s": rate(self.output_tokens),
            "duration_s": seconds,
        }
        for name in METRICS:
            out[name] = self.histograms[name].summary()
            out[name]["count"] = self.histograms[name].count
        return out


class Summary:
    """Per-step aggregates of every record seen; thread/greenlet safe."""

    def __init__(self) -> None:
        self.steps: dict[int | None, StepStats] = {}
        self._lock = threading.Lock()

    def add(self, record: dict[str, Any]) -> None:
        step = record.get("step")
        with self._lock:
            stats = self.steps.get(step)
            if stats is None:
                stats = self.steps[step] = StepStats(step)
            stats.add(record)

    def add_dropped(self, step: int | None, count: int) -> None:
        """Arrivals no free user could take (the arrival engine reports them)."""
        with self._lock:
            stats = self.steps.get(step)
            if stats is None:
                stats = self.steps[step] = StepStats(step)
            stats.dropped += count

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            ordered = sorted(self.steps.values(), key=lambda s: -1 if s.step is None else s.step)
            steps = [s.to_json() for s in ordered]
        total = sum(s["requests"] for s in steps)
        return {"requests": total, "steps": steps}


class ResultsWriter:
    """Appends records to ``requests.jsonl`` (flushed per record) and writes ``summary.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.requests_path = directory / "requests.jsonl"
        self.summary_path = directory / "summary.json"
        self._file: TextIO = self.requests_path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.summary = Summary()
        self.written = 0

    def write(self, record: RequestRecord | dict[str, Any]) -> None:
        data = record.to_dict() if isinstance(record, RequestRecord) else record
        line = orjson.dumps(data).decode() + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
            self.written += 1
        self.summary.add(data)

    def write_summary(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        data = {**self.summary.to_json(), **(extra or {})}
        tmp = self.summary_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.summary_path)  # a reader never sees half a summary
        return data

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


def record_from_dict(data: dict[str, Any]) -> RequestRecord:
    """The inverse of ``RequestRecord.to_dict()``; unknown keys (newer writers) are ignored."""
    known = set(RequestRecord.__dataclass_fields__)
    fields = {key: value for key, value in data.items() if key in known}
    fields["attempt_log"] = [
        AttemptRecord(
            **{k: v for k, v in attempt.items() if k in AttemptRecord.__dataclass_fields__}
        )
        for attempt in data.get("attempt_log", [])
    ]
    return RequestRecord(**fields)


def load_records(path: Path) -> list[RequestRecord]:
    """Every complete record of a ``requests.jsonl``; a torn last line (a crash) is skipped."""
    records = []
    with Path(path).open("rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                break
            records.append(record_from_dict(orjson.loads(line)))
    return records
