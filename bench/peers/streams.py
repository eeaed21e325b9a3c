"""A request as a tool measured it (``Stream``), one tool's run at one rate (``Run``) and the
errors read from it, and the readers that turn each tool's output into streams."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.peers.workload import ITL_MS, PREFILL_MS
from ramplab.records.files import RecordFiles

LIMIT_MS = 1.0
ON_RATE = 0.95


@dataclass
class Stream:
    """One request as a tool measured it, with the target's own send times."""

    start: float  # epoch seconds of the send
    ttft_ms: float
    ttlt_ms: float
    itl_ms: list[float]
    server_events_ms: list[float]
    per_gap: bool = True  # False: itl_ms holds the stream's mean gap, once per gap (GuideLLM)


@dataclass
class Run:
    tool: str
    rate: float
    streams: list[Stream]
    window: tuple[float, float]
    cpu_s: float
    errors: int
    rss_mib: float = float("nan")  # peak over the whole process
    processes: int = 1  # in the tool's process tree
    target_cores: float = float("nan")  # the target's CPU over the same window
    rss_window_mib: float = float("nan")  # median over the measured window (steady state)

    @property
    def achieved(self) -> float:
        starts = sorted(s.start for s in self.streams)
        if len(starts) < 2:
            return 0.0
        spread = (len(starts) - 1) / (starts[-1] - starts[0])
        # The rate over the starts' own spread misses a tool that stopped starting streams before
        # the window closed (GuideLLM at 200/s did): the window's count bounds it, with one start
        # of slack for where the window's edges fall between starts (8 s at 1/s hold 7 or 8).
        return min(spread, (len(starts) + 1) / (self.window[1] - self.window[0]))

    @property
    def on_rate(self) -> bool:
        return self.achieved >= ON_RATE * self.rate

    def values(self, what: str) -> list[float]:
        out: list[float] = []
        for s in self.streams:
            if what == "ttft_err":
                out.append(s.ttft_ms - s.server_events_ms[0])
            elif what == "span_err":
                span = s.server_events_ms[-1] - s.server_events_ms[0]
                out.append(abs(sum(s.itl_ms) - span))
            elif what == "itl_err":
                if not s.per_gap:
                    continue
                gaps = np.diff(s.server_events_ms)
                out += [abs(c - g) for c, g in zip(s.itl_ms, gaps, strict=True)]
            elif what == "itl":
                out += s.itl_ms
            elif what == "target_late":
                # The target's own lateness: each send after the time its latency model set.
                out += [
                    sent - (PREFILL_MS + k * ITL_MS) for k, sent in enumerate(s.server_events_ms)
                ]
            else:
                out.append(getattr(s, what))
        return out

    def pct(self, what: str, q: float) -> float:
        values = self.values(what)
        return float(np.percentile(values, q)) if values else float("nan")

    @property
    def cpu_ms_per_stream(self) -> float:
        return self.cpu_s * 1000.0 / len(self.streams) if self.streams else float("nan")

    @property
    def holds(self) -> bool:
        return self.holds_on("itl_err")

    def holds_on(self, error: str) -> bool:
        """Achieved ≥ ``ON_RATE`` × requested and ``error``'s p99 below ``LIMIT_MS``."""
        return self.on_rate and self.pct(error, 99) < LIMIT_MS

    def holds_within(self, bound_ms: float) -> bool:
        """Achieved ≥ ``ON_RATE`` × requested and span error p99 ≤ ``bound_ms``."""
        return self.on_rate and self.pct("span_err", 99) <= bound_ms

    @property
    def cores(self) -> float:
        return self.cpu_s / (self.window[1] - self.window[0])


def _content(data: str) -> bool:
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError:
        return False
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("reasoning_content"):
            return True
    return False


def _timing_comment(text: str) -> list[float] | None:
    name, _, payload = text.partition(" ")
    if name != "ramplab-timing":
        return None
    events = json.loads(payload).get("events_ms")
    return [float(v) for v in events] if isinstance(events, list) else None


def aiperf_streams(raw_export: Path) -> tuple[list[Stream], int]:
    """AIPerf's raw export → streams (its stamps, the target's comment), and failed requests."""
    streams: list[Stream] = []
    errors = 0
    for line in raw_export.read_text().splitlines():
        record = json.loads(line)
        if record.get("metadata", {}).get("benchmark_phase") != "profiling":
            continue
        if record.get("status") != 200 or record.get("error"):
            errors += 1
            continue
        start_ns = record["start_perf_ns"]
        content: list[float] = []
        server: list[float] | None = None
        for response in record.get("responses") or ():
            for packet in response.get("packets") or ():
                value = str(packet.get("value", ""))
                if packet.get("name") == "data" and _content(value):
                    content.append((response["perf_ns"] - start_ns) / 1e6)
                found = _timing_comment(value.lstrip(": ").strip())
                if found is not None:
                    server = found
        if not content or server is None or len(server) != len(content):
            errors += 1
            continue
        epoch = record["metadata"]["request_start_ns"] / 1e9
        itl = [b - a for a, b in itertools.pairwise(content)]
        streams.append(Stream(epoch, content[0], content[-1], itl, server))
    return streams, errors


RAMPLAB_COLUMNS = ["ok", "actual_start", "ttft_send_ms", "ttlt_send_ms", "itl_ms",
                   "server_events_ms"]  # fmt: skip


def ramplab_streams(run_dir: Path) -> tuple[list[Stream], int]:
    """The streams of a ramplab run directory's records (``docs/records.md``)."""
    streams: list[Stream] = []
    errors = 0
    for batch in RecordFiles.in_dir(run_dir).batches(RAMPLAB_COLUMNS):
        for r in batch.to_pylist():
            events = r["server_events_ms"] or []
            itl = r["itl_ms"] or []
            if not r["ok"] or r["ttft_send_ms"] is None or len(events) != len(itl) + 1:
                errors += 1
                continue
            streams.append(
                Stream(r["actual_start"], r["ttft_send_ms"], r["ttlt_send_ms"], itl, events)
            )
    return streams, errors


def guidellm_streams(report_json: Path, tap_jsonl: Path) -> tuple[list[Stream], int]:
    """GuideLLM's JSON report + the target's comments (``bench/timing_tap.py``), paired by
    completion id → streams, and requests that failed or could not be paired."""
    server: dict[str, list[float]] = {}
    for line in tap_jsonl.read_text().splitlines():
        record = json.loads(line)
        if record.get("id") and isinstance(record.get("events_ms"), list):
            server[record["id"]] = [float(v) for v in record["events_ms"]]
    streams: list[Stream] = []
    errors = 0
    for benchmark in json.loads(report_json.read_text())["benchmarks"]:
        requests = benchmark["requests"]
        errors += len(requests.get("errored") or ())
        for r in requests.get("successful") or ():
            timings = r["info"]["timings"]
            start = timings.get("request_start")
            first = timings.get("first_token_iteration")
            last = timings.get("last_token_iteration")
            count = timings.get("token_iterations") or 0
            events = server.get(r.get("response_id") or "")
            if events is None or start is None or first is None or last is None:
                errors += 1
                continue
            if count != len(events) or count < 2:
                errors += 1
                continue
            ttft, ttlt = (first - start) * 1000.0, (last - start) * 1000.0
            mean_gap = (ttlt - ttft) / (count - 1)
            streams.append(Stream(start, ttft, ttlt, [mean_gap] * (count - 1), events, False))
    return streams, errors
