"""ramplab's stream stamps against the wire: a packet capture as the independent judge.

The reference target (its own process, pinned to core 1 with tcpdump) streams paced
completions — 16 tokens, one per event, ``ITL_MS`` apart with ``JITTER_MS`` of jitter after a
``PREFILL_MS`` prefill, signing off. ramplab runs as ``ramplab run CAMPAIGN --target URL`` (a
closed-loop stepped campaign, ``mode: closed``, steps of 1, 50 and 200 users, ``stack.workers:
1``: ONE Locust worker process drives every stream, beside its master), the whole CLI pinned to
core 0. Stepped through the CLI rather than a bare ``locust -u N`` so every record carries its
``step`` and ``summary.json`` has the per-step verdicts the check is meant to hold ramplab to.
Each condition is one run:

* **quiet**: nothing else on core 0;
* **starved**: two busy-loop processes pinned to core 0 with the worker, so it gets about a
  third of its core and reads its sockets late.

``tcpdump`` captures the target's port for the whole run (``bench/wire.py``); every record is
joined with its exchange and compared event by event (``bench/wire_compare.py``: the
definitions of Δ, start and event time). Figures are over each step's measured window (the
summary's rule: by intended start, after the warm-up), as |Δ| percentiles in ms.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.servers import REPO, target
from bench.wire import Capture, rebuild
from bench.wire_compare import Comparison, Deltas, Matching, compare, in_window, load_records, match

TOKENS = 16
ITL_MS = 30.0
JITTER_MS = 5.0
PREFILL_MS = 20.0
LEVELS = (1, 50, 200)
HOLD_S = 6.0
WARMUP_S = 2.0
HOGS = 2
GENERATOR_CPU = 0  # the ramplab processes and the hogs
SERVER_CPU = 1  # the target and tcpdump
TARGET_ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": str(PREFILL_MS),
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(ITL_MS),
    "APP_LATENCY__ITL_JITTER_MS": str(JITTER_MS),
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",
    "APP_SCHEDULER__MAX_NUM_SEQS": "1024",
    "APP_SCHEDULER__MAX_WAITING": "2048",
    "APP_SIGNING__MODE": "off",
    "APP_LOG_LEVEL": "warning",
}
# Above this p99 |Δ| (TTFT, or ITL over clean gaps) a step must be marked untrusted; below
# TRUSTED_MS it must not be.
UNTRUSTED_MS = 2.0
TRUSTED_MS = 1.0


def campaign(levels: tuple[int, ...], hold_s: float, warmup_s: float) -> str:
    steps = ", ".join(f"{{qps: {n}, hold: {hold_s:g}s, warmup: {warmup_s:g}s}}" for n in levels)
    return (
        "name: wire\n"
        "mode: closed\n"
        f"steps: [{steps}]\n"
        "drain_s: 10\n"
        # The master's scrapes of /metrics (results/engine.py) are exchanges with no record by
        # design: the wire check compares the load's own requests.
        "engine_metrics: off\n"
        "workload: {model: ramplab-sim-1, max_tokens: 16, ignore_eos: true, chunk_size: 1, "
        "prompt_tokens: 4}\n"
        "stack: {workers: 1}\n"
    )


@contextmanager
def hogs(count: int, cpu: int, seconds: float) -> Iterator[None]:
    """``count`` busy loops pinned to ``cpu``, each bounded by ``timeout`` and ended on exit."""
    loop = [sys.executable, "-c", "while True: pass"]
    command = ["timeout", f"{seconds:g}", "taskset", "-c", str(cpu), *loop]
    started = [subprocess.Popen(command) for _ in range(count)]
    try:
        yield
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)  # `timeout` passes it on
        for process in started:
            process.wait(timeout=10)


@contextmanager
def pinned_target(cpu: int) -> Iterator[int]:
    """The target, started from this process while it runs on ``cpu`` only: the target's
    processes inherit the affinity; this process gets its own back once they have started."""
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        with target(TARGET_ENV) as port:
            os.sched_setaffinity(0, own)
            yield port
    finally:
        os.sched_setaffinity(0, own)


@dataclass
class Cell:
    """One ramplab run under capture, compared with the wire."""

    condition: str
    run_dir: Path
    summary: dict[str, Any]
    matching: Matching
    comparisons: list[Comparison]
    problems: list[str] = field(default_factory=list)  # matched records not compared, and why
    packets: int | None = None
    exit_code: int = 0

    def window(self, step: dict[str, Any]) -> list[Comparison]:
        run_start = float(self.summary["run_start"])
        return [c for c in self.comparisons if in_window(c, step, run_start)]

    def step_deltas(self, step: dict[str, Any]) -> Deltas:
        return Deltas.of(self.window(step))

    def unmatched_records(self, step: dict[str, Any]) -> int:
        return sum(r.get("step") == step["index"] for r in self.matching.records)


def run_cell(
    port: int,
    condition: str,
    workdir: Path,
    levels: tuple[int, ...] = LEVELS,
    hold_s: float = HOLD_S,
    warmup_s: float = WARMUP_S,
) -> Cell:
    """One ramplab run against the target on ``port``, captured; ``condition`` is ``quiet`` or
    ``starved`` (``HOGS`` busy loops on the generator's core)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "campaign.yaml"
    path.write_text(campaign(levels, hold_s, warmup_s))
    bound_s = len(levels) * hold_s + 60  # start-up, drain and the report, with room to spare
    command = ["timeout", "-s", "INT", f"{bound_s:g}", "taskset", "-c", str(GENERATOR_CPU)]
    command += [sys.executable, "-m", "ramplab.cli.app", "run", str(path)]
    command += ["--target", f"http://127.0.0.1:{port}", "--no-preflight"]
    command += ["--results-dir", str(workdir), "--run-name", condition]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    capture = Capture(
        workdir / f"{condition}.pcap", port, timeout_s=bound_s + 30, cpus=[SERVER_CPU]
    )
    with ExitStack() as stack:
        stack.enter_context(capture)
        if condition == "starved":
            stack.enter_context(hogs(HOGS, GENERATOR_CPU, bound_s + 10))
        log = (workdir / f"{condition}.log").open("wb")
        stack.callback(log.close)
        code = subprocess.run(
            command, check=False, cwd=REPO, env=env, stdout=log, stderr=log
        ).returncode
    run_dir = workdir / condition
    if not (run_dir / "summary.json").exists():
        raise RuntimeError(f"ramplab run exited {code} without a summary: see {log.name}")
    summary = json.loads((run_dir / "summary.json").read_text())
    matching = match(load_records(run_dir), rebuild(capture.path, port))
    comparisons: list[Comparison] = []
    problems: list[str] = []
    for record, exchange in matching.pairs:
        result = compare(record, exchange)
        if isinstance(result, str):
            problems.append(f"{record.get('request_id')}: {result}")
        else:
            comparisons.append(result)
    return Cell(
        condition, run_dir, summary, matching, comparisons, problems, capture.captured, code
    )


def _triple(values: tuple[float, ...]) -> str:
    return " / ".join(f"{v:.3f}" for v in values)


def _row(cell: Cell, step: dict[str, Any]) -> str:
    deltas = cell.step_deltas(step)
    clean = _triple(deltas.clean_itl) if deltas.coalesced_known else "n/a"
    users = int(step.get("target_users") or 0)
    untrusted = step.get("untrusted", "—")
    matched = len(cell.window(step))
    events_per_s = sum(len(c.wire_ms) for c in cell.window(step)) / float(step["measured_s"])
    return (
        f"| reference target | {users} | {cell.condition} | {_triple(deltas.ttft)} | "
        f"{_triple(deltas.itl)} | {clean} | {_triple(deltas.ttlt)} | "
        f"{deltas.per_event_p50:.4f} | {events_per_s:.0f} | {matched} / "
        f"{cell.unmatched_records(step)} | {untrusted} |"
    )


def _connections(comparisons: list[Comparison]) -> str:
    """TTFT |Δ| of the requests that opened their connection beside the kept-alive ones: the
    two starts are different events (connect started / first byte written)."""
    parts = []
    for label, new in (("new connection", True), ("kept-alive", False)):
        chosen = [c for c in comparisons if c.new_connection is new]
        if chosen:
            ttft = Deltas.of(chosen).ttft
            parts.append(f"{label} {len(chosen)}: {ttft[0]:.3f} / {ttft[2]:.3f}")
    return "; ".join(parts)


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def run() -> str:
    load_before = _load()
    cells: list[Cell] = []
    with pinned_target(SERVER_CPU) as port, tempfile.TemporaryDirectory() as tmp:
        for condition in ("quiet", "starved"):
            started = time.monotonic()
            cell = run_cell(port, condition, Path(tmp))
            cells.append(cell)
            for step in cell.summary["steps"]:
                print(f"  {_row(cell, step)}", flush=True)
            print(f"  {condition}: {time.monotonic() - started:.0f} s", flush=True)
    load_after = _load()
    lines = [
        "## Wire check: ramplab's stamps against a packet capture",
        "",
        f"The reference target ({TOKENS} tokens per stream, one per event, {ITL_MS:g} ms apart "
        f"± {JITTER_MS:g} ms jitter after a {PREFILL_MS:g} ms prefill; signing off) on core "
        f"{SERVER_CPU} with `tcpdump -i lo --time-stamp-precision=nano`; `ramplab run` (closed "
        f"loop, steps of {', '.join(map(str, LEVELS))} users, {HOLD_S:g} s each after a "
        f"{WARMUP_S:g} s warm-up inside it, ONE Locust worker) on core {GENERATOR_CPU}; starved: "
        f"{HOGS} busy loops on core {GENERATOR_CPU} as well. Every record is joined with the "
        "exchange rebuilt from the packets (local port + completion id) and compared event by "
        "event: Δ = ramplab's offset − the wire's, from the request's start (the SYN for a new "
        "connection, else the request's first packet) to the packet carrying each token "
        "event's first byte (`bench/wire.py`, `bench/wire_compare.py`). Columns are |Δ| in ms, "
        "p50 / p99 / max, over each step's measured window; ITL Δ is the change of Δ across a "
        'gap; "excl. coalesced" leaves out gaps touching an event the record lists in '
        "`coalesced_events` (ramplab's own figures leave them out and count them). Matched = "
        "records of the window compared with the wire / records of the step with no exchange; "
        "untrusted = the step's `untrusted` flag in `summary.json` (`results/trust.py`): it "
        f"must be set where TTFT or ITL (all gaps) |Δ| p99 passes {UNTRUSTED_MS:g} ms, and "
        f"unset where both stay under {TRUSTED_MS:g} ms. "
        f"Load average (1 min) {load_before} before and {load_after} after the run (2 cores, "
        "shared with other engineers' work).",
        "",
        "| server | streams | condition | TTFT Δ p50/p99/max | ITL Δ p50/p99/max (all gaps) "
        "| ITL Δ p50/p99/max (excl. coalesced) | TTLT Δ p50/p99 | per-event Δ p50 | events/s "
        "| matched / unmatched | untrusted |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        lines += [_row(cell, step) for step in cell.summary["steps"]]
    lines.append("")
    for cell in cells:
        rebuilt = Deltas.of(cell.comparisons).ttlt_rebuild_max
        lines.append(
            f"- {cell.condition}: `ramplab run` exit {cell.exit_code}; {cell.packets} packets, "
            f"none dropped; {len(cell.matching.pairs)} records matched over the run, "
            f"{len(cell.matching.records)} records and {len(cell.matching.exchanges)} exchanges "
            f"without a partner, {len(cell.problems)} matched but not comparable"
            f"{' (' + cell.problems[0] + ')' if cell.problems else ''}; rebuilt last offset vs "
            f"`ttlt_send_ms` within {rebuilt:.6f} ms"
        )
        run_start = float(cell.summary["run_start"])
        starts = ", ".join(f"{float(step['start_s']):g}" for step in cell.summary["steps"])
        lines.append(
            f"  - whole run, warm-ups included: TTFT |Δ| p50 / max by the request's connection: "
            f"{_connections(cell.comparisons)}; steps start at {starts} s"
        )
        for step in cell.summary["steps"]:
            window = cell.window(step)
            if not window:
                continue
            gap, at = max((c.worst_gap() for c in window), key=lambda g: abs(g[0]))
            reason = step.get("untrusted_reason")
            lines.append(
                f"  - {int(step.get('target_users') or 0)} streams: worst ITL Δ {gap:+.3f} ms, "
                f"at {at - run_start:.2f} s of the run"
                + (f"; untrusted: {reason}" if reason else "")
            )
    return "\n".join(lines) + "\n"
