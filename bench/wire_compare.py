"""ramplab's records beside the wire's exchanges (``bench/wire.py``), request by request.

Records and exchanges are joined on (``local_port``, ``completion_id``): the port names the
connection, the completion id the request on it. Either side left without a partner is counted
and returned, never dropped.

Definitions (they follow ramplab's own, ``docs/metrics.md``), per matched successful record:

* **ramplab's offsets** are rebuilt from the record: token event 0 at ``ttft_send_ms``; event k
  at event k−1's offset + ``n_k`` × the ``itl_ms`` value of that gap (``itl_ms`` repeats
  ``gap / n_k`` ``n_k`` times, ``n_k = tokens_per_event[k]``). The last one is ``ttlt_send_ms``;
  the difference is kept as a check of the rebuild.
* **The wire's offsets** are each token event's wire time (its first byte's packet) minus the
  exchange's start (the SYN when the request opened its connection, else its first packet).
* **Δ = ramplab − wire**, ms, per token event. TTFT Δ is event 0's, TTLT Δ the last event's,
  ITL Δ of gap k is Δ_k − Δ_(k−1). When a record lists ``coalesced_events`` (token events whose
  own stamp could not be recovered), ITL Δ is also given over the gaps neither end of which is
  in that list ("clean" gaps).
* The summaries (``Deltas``) are percentiles of **|Δ|** (numpy's linear interpolation): a late
  stamp makes one gap too long and the next too short, so signed ITL percentiles would hide half
  of every error.
"""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.wire import Exchange
from ramplab.records.files import RecordFiles
from ramplab.records.schema import dicts_of


def load_records(run_dir: Path) -> list[dict[str, Any]]:
    """The records of a run directory (``docs/records.md``). Records a reader would pass over
    raise instead, so nothing is skipped unseen: a journal left behind (a killed master; its
    torn last batch is not read) or corrupt lines of an old ``requests.jsonl``."""
    files = RecordFiles.in_dir(run_dir)
    if files.journal.exists():
        raise ValueError(f"{files.journal}: the run did not end (its journal was not finalised)")
    if files.corrupt():
        raise ValueError(f"{files.jsonl}: {files.corrupt()} lines are not records")
    return [row for batch in files.batches() for row in dicts_of(batch)]


@dataclass(slots=True)
class Matching:
    """Records joined with exchanges; what found no partner is kept, to be reported."""

    pairs: list[tuple[dict[str, Any], Exchange]]
    records: list[dict[str, Any]]  # records with no exchange
    exchanges: list[Exchange]  # exchanges with no record


def match(records: Iterable[dict[str, Any]], exchanges: Iterable[Exchange]) -> Matching:
    """Join on (``local_port``, ``completion_id``); several exchanges under one key (a port
    reused by a later connection and an id repeated, which a server should never send) pair
    in order."""
    waiting: dict[tuple[object, object], deque[Exchange]] = defaultdict(deque)
    lone_exchanges: list[Exchange] = []
    for exchange in exchanges:
        ident = exchange.completion_id
        if ident is None:
            lone_exchanges.append(exchange)
        else:
            waiting[exchange.local_port, ident].append(exchange)
    pairs = []
    lone_records = []
    for record in records:
        found = waiting.get((record.get("local_port"), record.get("completion_id")))
        if found:
            pairs.append((record, found.popleft()))
        else:
            lone_records.append(record)
    lone_exchanges += [exchange for queue in waiting.values() for exchange in queue]
    return Matching(pairs, lone_records, lone_exchanges)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One successful record beside its exchange: offsets from the start, ms, per token event."""

    request_id: str
    step: int | None
    intended_start: float
    new_connection: bool  # the wire's start is the SYN
    ramplab_ms: tuple[float, ...]
    wire_ms: tuple[float, ...]
    coalesced: frozenset[int] | None  # None: the record does not say
    ttlt_rebuild_ms: float  # rebuilt last offset − ttlt_send_ms (a check of the rebuild: ~0)
    wire_start_ns: int = 0  # the wire's start, epoch ns: places the request in the run

    def worst_gap(self) -> tuple[float, float]:
        """(ITL Δ of the gap with the largest |Δ|, epoch seconds of the event that ends it)."""
        gaps = self.itl_delta_ms
        k = max(range(len(gaps)), key=lambda i: abs(gaps[i]), default=None)
        if k is None:
            return 0.0, self.wire_start_ns / 1e9 + self.wire_ms[0] / 1e3
        return gaps[k], self.wire_start_ns / 1e9 + self.wire_ms[k + 1] / 1e3

    @property
    def delta_ms(self) -> list[float]:
        return [r - w for r, w in zip(self.ramplab_ms, self.wire_ms, strict=True)]

    @property
    def ttft_delta_ms(self) -> float:
        return self.ramplab_ms[0] - self.wire_ms[0]

    @property
    def ttlt_delta_ms(self) -> float:
        return self.ramplab_ms[-1] - self.wire_ms[-1]

    @property
    def itl_delta_ms(self) -> list[float]:
        delta = self.delta_ms
        return [b - a for a, b in itertools.pairwise(delta)]

    @property
    def clean_itl_delta_ms(self) -> list[float]:
        """ITL Δ over the gaps neither end of which is a coalesced event."""
        skip = self.coalesced or frozenset()
        gaps = self.itl_delta_ms
        return [d for k, d in enumerate(gaps, start=1) if k - 1 not in skip and k not in skip]


def compare(record: dict[str, Any], exchange: Exchange) -> Comparison | str:
    """The record's offsets beside the wire's, or why they cannot be compared."""
    if not record.get("ok") or record.get("ttft_send_ms") is None:
        return "not a successful stream"
    wire = exchange.token_events
    counts: list[int] = record.get("tokens_per_event") or [1] * len(wire)
    itl: list[float] = record["itl_ms"]
    if len(counts) != len(wire):
        return f"{len(counts)} token events in the record, {len(wire)} on the wire"
    if sum(counts[1:]) != len(itl):
        return f"itl_ms holds {len(itl)} values for {sum(counts[1:])} tokens after the first event"
    offsets = [float(record["ttft_send_ms"])]
    at = 0
    for n in counts[1:]:
        offsets.append(offsets[-1] + n * itl[at])
        at += n
    start = exchange.start_ns
    coalesced = record.get("coalesced_events")
    return Comparison(
        request_id=str(record.get("request_id")),
        step=record.get("step"),
        intended_start=float(record["intended_start"]),
        new_connection=exchange.position == 0 and exchange.syn_ns is not None,
        ramplab_ms=tuple(offsets),
        wire_ms=tuple((event.at_ns - start) / 1e6 for event in wire),
        coalesced=None if coalesced is None else frozenset(coalesced),
        ttlt_rebuild_ms=offsets[-1] - float(record["ttlt_send_ms"]),
        wire_start_ns=start,
    )


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.abs(values), q)) if values else float("nan")


@dataclass(frozen=True, slots=True)
class Deltas:
    """Percentiles of |Δ| over a set of comparisons, ms."""

    requests: int
    ttft: tuple[float, float, float]  # p50, p99, max
    itl: tuple[float, float, float]  # every gap
    clean_itl: tuple[float, float, float]  # gaps with no coalesced end
    ttlt: tuple[float, float]  # p50, p99
    per_event_p50: float
    coalesced_known: bool  # every record said which of its events were coalesced
    ttlt_rebuild_max: float  # the largest |rebuilt last offset − ttlt_send_ms|

    @classmethod
    def of(cls, comparisons: Sequence[Comparison]) -> Deltas:
        ttft = [c.ttft_delta_ms for c in comparisons]
        itl = [d for c in comparisons for d in c.itl_delta_ms]
        clean = [d for c in comparisons for d in c.clean_itl_delta_ms]
        every = [d for c in comparisons for d in c.delta_ms]
        rebuild = [c.ttlt_rebuild_ms for c in comparisons]
        ttlt = [c.ttlt_delta_ms for c in comparisons]
        return cls(
            requests=len(comparisons),
            ttft=(_pct(ttft, 50), _pct(ttft, 99), _pct(ttft, 100)),
            itl=(_pct(itl, 50), _pct(itl, 99), _pct(itl, 100)),
            clean_itl=(_pct(clean, 50), _pct(clean, 99), _pct(clean, 100)),
            ttlt=(_pct(ttlt, 50), _pct(ttlt, 99)),
            per_event_p50=_pct(every, 50),
            coalesced_known=bool(comparisons) and all(c.coalesced is not None for c in comparisons),
            ttlt_rebuild_max=_pct(rebuild, 100),
        )


def in_window(comparison: Comparison, step: dict[str, Any], run_start: float) -> bool:
    """Whether the record counts in ``step``'s measured window of ``summary.json`` (the
    summary's own rule: by intended start, after the step's warm-up)."""
    begin = run_start + float(step["start_s"]) + float(step.get("warmup_s") or 0.0)
    end = run_start + float(step["start_s"]) + float(step["duration_s"])
    return comparison.step == step["index"] and begin <= comparison.intended_start < end
