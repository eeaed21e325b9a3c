"""How exact ramplab's streaming timestamps are, against a naive Locust ``HttpUser``, under load.

The target (one process of its own) streams paced completions — 16 tokens, one per event, 200 ms
apart after a 20 ms prefill (3 s a stream, so 300 streams stay within what one target process
serves on this machine), no jitter, signing off — and, asked with ``timing_detail``, writes
into each stream's final timing comment when it handed every event to its socket. Each client
runs as ONE standalone Locust process (one worker), ``-u N`` users, for N in ``LEVELS``:

* ``ramplab``: ``locustfiles/llm_stream.py`` (``LLMStreamUser``: bytes stamped on arrival,
  before parsing), its records read from ``--results-dir``;
* ``naive``: ``bench/naive_user.py`` (``HttpUser``, ``stream=True``, ``iter_lines()``, clock read
  after ``json.loads``), the pattern of Locust-based LLM benchmarks.

Error per request, from differences only (the two processes never compare clocks):

* TTFT error = measured TTFT (send → first content event) − the target's own TTFT for that
  request (arrival → first content event sent). It holds the request's trip into the server and
  the token's trip back as well as the client's own lateness, so it is above 0 even for a
  perfect client;
* ITL error = |measured gap − the target's gap| for the same two events.

Only streams started inside the measuring window (after a warm-up) count; the generator's CPU
(user + system, % of one core) is read with psutil over that window. "On time" is the achieved
stream rate over the closed loop's ideal (users ÷ stream length): below 0.9 the target, the
generator or the machine fell behind, events bunch up and gaps shrink on both sides at once, so
the level does not count for capacity (the TTFT error tells a late generator apart). A
client's capacity is the largest level whose ITL error stays ≤ 1 ms — at p99 (strict) and at p50
(typical) — compared as ratios of the streams/s and events/s it drove there. The ITL error is the
stamping error proper; the TTFT error also carries the request's round trip, which no client can
remove.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench.servers import REPO, target
from ramplab.records.files import RecordFiles
from ramplab.records.schema import dicts_of

LEVELS = tuple(int(v) for v in os.environ.get("BENCH_LEVELS", "10,100,300,600").split(","))
REQUIRED = (10, 100, 300)
TOKENS = 16
ITL_MS = 200.0
PREFILL_MS = 20.0
STREAM_S = (PREFILL_MS + (TOKENS - 1) * ITL_MS) / 1000.0
ON_TIME = 0.9
WARM_S = 2.0
MEASURE_S = 6.0
LIMIT_MS = 1.0
TARGET_ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": str(PREFILL_MS),
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(ITL_MS),
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",
    "APP_SCHEDULER__MAX_NUM_SEQS": "1024",
    "APP_SCHEDULER__MAX_WAITING": "2048",
    "APP_SIGNING__MODE": "off",
    "APP_LOG_LEVEL": "warning",
}


@dataclass
class Run:
    client: str
    level: int
    streams_per_s: float
    events_per_s: float
    cpu_percent: float
    ttft_err_ms: list[float]
    itl_err_ms: list[float]

    @property
    def on_time(self) -> float:
        return self.streams_per_s / (self.level / STREAM_S)

    def pct(self, values: list[float], q: float) -> float:
        return float(np.percentile(values, q)) if values else float("nan")

    def holds(self, q: float) -> bool:
        if not self.itl_err_ms or self.on_time < ON_TIME:
            return False
        return self.pct(self.itl_err_ms, q) <= LIMIT_MS


def _locust(client: str, port: int, level: int, out: Path) -> tuple[list[str], dict[str, str]]:
    # The first record comes after one stream; the last streams started end one stream later.
    seconds = int(2 * STREAM_S + WARM_S + MEASURE_S + 4)
    common = ["--host", f"http://127.0.0.1:{port}", "--headless", "-u", str(level)]
    common += ["-r", str(level), "-t", f"{seconds}s", "--only-summary", "--loglevel", "ERROR"]
    env = {"BENCH_MAX_TOKENS": str(TOKENS), "BENCH_NAIVE_OUT": str(out)}
    if client == "naive":
        return [sys.executable, "-m", "locust", "-f", "bench/naive_user.py", *common], env
    ramplab = ["--model", "ramplab-sim-1", "--max-tokens", str(TOKENS), "--ignore-eos"]
    ramplab += ["--chunk-size", "1", "--prompt-tokens", "4", "--results-dir", str(out.parent)]
    ramplab += ["--extra-body", '{"timing_detail": true}']
    command = [sys.executable, "-m", "locust", "-f", "locustfiles/llm_stream.py", *common]
    return command + ramplab, env


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _records(client: str, out: Path) -> list[dict[str, Any]]:
    """The naive client's JSON Lines, or the records of ramplab's run directory (``out``'s:
    the journal while it runs, the Parquet file once it ended)."""
    if client == "naive":
        return _lines(out)
    return [row for batch in RecordFiles.in_dir(out.parent).batches() for row in dicts_of(batch)]


def _recorded(client: str, out: Path) -> bool:
    if client == "naive":
        return out.exists() and out.stat().st_size > 0
    return RecordFiles.in_dir(out.parent).count() > 0


def _normalise(client: str, raw: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Both clients' records as {start, end, ttft_ms, itl_ms, server_ttft_ms, server_events_ms}."""
    if client == "naive":
        return list(raw)
    out = []
    for r in raw:
        if not r["ok"] or r["ttft_send_ms"] is None:
            continue
        start = r["actual_start"]
        out.append(
            {
                "start": start,
                "end": r["intended_start"] + r["total_ms"] / 1000.0,
                "ttft_ms": r["ttft_send_ms"],
                "itl_ms": r["itl_ms"],
                "server_ttft_ms": r["server_timing_ms"].get("ttft"),
                "server_events_ms": r["server_events_ms"],
            }
        )
    return out


def run_client(client: str, port: int, level: int, workdir: Path) -> Run:
    name = "naive.jsonl" if client == "naive" else "requests.parquet"
    out = workdir / f"{client}-{level}" / name
    out.parent.mkdir(parents=True)
    command, env = _locust(client, port, level, out)
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    generator = psutil.Process(process.pid)
    try:
        deadline = time.monotonic() + 30
        while not _recorded(client, out):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{client} at {level} users produced no record")
            time.sleep(0.1)
        time.sleep(WARM_S)
        cpu_a, t_a = generator.cpu_times(), time.time()
        time.sleep(MEASURE_S)
        cpu_b, t_b = generator.cpu_times(), time.time()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    window = t_b - t_a
    cpu = (cpu_b.user + cpu_b.system - cpu_a.user - cpu_a.system) / window * 100.0
    records = _normalise(client, _records(client, out))
    inside = [r for r in records if t_a <= r["start"] <= t_b]
    ttft_err: list[float] = []
    itl_err: list[float] = []
    events = 0
    for r in inside:
        server = r["server_events_ms"]
        if r["server_ttft_ms"] is None or len(server) != len(r["itl_ms"]) + 1:
            continue
        events += len(server)
        ttft_err.append(r["ttft_ms"] - r["server_ttft_ms"])
        gaps = [b - a for a, b in itertools.pairwise(server)]
        itl_err += [abs(c - s) for c, s in zip(r["itl_ms"], gaps, strict=True)]
    return Run(client, level, len(inside) / window, events / window, cpu, ttft_err, itl_err)


def _row(run: Run) -> str:
    return (
        f"| {run.level} | {run.client} | {run.streams_per_s:.1f} | {run.on_time:.2f} | "
        f"{run.events_per_s:.0f} | "
        f"{run.cpu_percent:.0f} % | {run.pct(run.ttft_err_ms, 50):.3f} | "
        f"{run.pct(run.ttft_err_ms, 99):.3f} | {run.pct(run.itl_err_ms, 50):.3f} | "
        f"{run.pct(run.itl_err_ms, 99):.3f} | {len(run.ttft_err_ms)} |"
    )


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b > 0 and np.isfinite(a) and np.isfinite(b) else "n/a"


def _capacity(runs: list[Run], q: float) -> Run | None:
    holding = [r for r in runs if r.holds(q)]
    return max(holding, key=lambda r: r.level) if holding else None


def _load() -> str:
    loadavg = Path("/proc/loadavg")
    return loadavg.read_text().split()[0] if loadavg.exists() else "n/a"


def _beyond(runs: list[Run], best: Run, q: float) -> str:
    """What happened at the next level up: where the limit found comes from."""
    above = [r for r in runs if r.level > best.level]
    if not above:
        return f"held at every level tried: its own limit lies beyond {best.level} users"
    nxt = min(above, key=lambda r: r.level)
    if nxt.on_time < ON_TIME:
        return (
            f"at {nxt.level} users the loop fell behind (on time {nxt.on_time:.2f}, "
            f"CPU {nxt.cpu_percent:.0f} %): the target or this generator saturated"
        )
    return f"at {nxt.level} users its p{q:g} ITL error was {nxt.pct(nxt.itl_err_ms, q):.3f} ms"


def run() -> str:
    runs: dict[str, list[Run]] = {"naive": [], "ramplab": []}
    load_before = _load()
    with target(TARGET_ENV) as port, tempfile.TemporaryDirectory() as tmp:
        for level in LEVELS:
            for client in ("naive", "ramplab"):  # interleaved: both see the same background load
                result = run_client(client, port, level, Path(tmp))
                runs[client].append(result)
                print(f"  {_row(result)}", flush=True)
    load_after = _load()
    lines = [
        "## Streaming accuracy: ramplab's `LLMStreamUser` vs a naive Locust `HttpUser`",
        "",
        f"One target process ({TOKENS} tokens per stream, one per event, {ITL_MS:g} ms apart "
        f"after a {PREFILL_MS:g} ms prefill: {STREAM_S:.2f} s a stream; jitter 0, signing off) "
        "and ONE Locust process per client, `-u N` users "
        f"in a closed loop; {MEASURE_S:g} s measured after a {WARM_S:g} s warm-up, once per "
        "level, levels interleaved. Errors against the target's own per-request record "
        "(`timing_detail`): TTFT error = measured TTFT − the target's TTFT for that request "
        "(signed; it includes the request's trip into the server and the token's trip back, so "
        "it is above 0 for any client); ITL error = |measured gap − the target's gap| for the "
        "same two events. ramplab times TTFT from the moment the request reached the network "
        "and stamps bytes with the kernel's receive time (plain TCP on Linux), before parsing; "
        "the naive user reads the clock before `post()` and after `json.loads`, so its TTFT "
        "also holds its own time before sending (with gevent, ~ms waiting for its turn). "
        "CPU = the generator process's user + system time over the window, % "
        "of one core. The machine has 2 cores shared with other engineers' test runs: the "
        "figures are one noisy sample each — read the ratios and the trend, not the digits. "
        f"Load average (1 min) {load_before} before the run and {load_after} after it. "
        "At 10 users the window holds ~20 streams, so TTFT p99 there is close to the maximum. "
        f"On time = achieved streams/s ÷ (users ÷ {STREAM_S:.2f} s); below {ON_TIME} the target "
        "or the generator fell behind (the TTFT error tells which: a late generator sends "
        "late) and the level does not count for capacity.",
        "",
        "| users | client | streams/s | on time | events/s | CPU | TTFT err p50 ms "
        "| TTFT err p99 ms | ITL err p50 ms | ITL err p99 ms | streams |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for naive, ours in zip(runs["naive"], runs["ramplab"], strict=True):
        lines += [_row(naive), _row(ours)]
    lines += [
        "",
        "Error ratio naive ÷ ramplab (above 1: ramplab is the more exact):",
        "",
        "| users | TTFT err p50 | TTFT err p99 | ITL err p50 | ITL err p99 | CPU ramplab ÷ naive |",
        "|---|---|---|---|---|---|",
    ]
    for naive, ours in zip(runs["naive"], runs["ramplab"], strict=True):
        if naive.level not in REQUIRED and naive.level != LEVELS[-1]:
            continue
        lines.append(
            f"| {naive.level} | "
            + " | ".join(
                _ratio(naive.pct(getattr(naive, name), q), ours.pct(getattr(ours, name), q))
                for name, q in (
                    ("ttft_err_ms", 50),
                    ("ttft_err_ms", 99),
                    ("itl_err_ms", 50),
                    ("itl_err_ms", 99),
                )
            )
            + f" | {_ratio(ours.cpu_percent, naive.cpu_percent)} |"
        )
    for q in (99, 50):
        lines += [
            "",
            f"Most streams one generator process drove with its p{q} ITL error ≤ {LIMIT_MS:g} ms:",
            "",
        ]
        best = {client: _capacity(found, q) for client, found in runs.items()}
        for client, found in best.items():
            held = (
                f"{found.level} users, {found.streams_per_s:.1f} streams/s, "
                f"{found.events_per_s:.0f} events/s, CPU {found.cpu_percent:.0f} %"
                if found
                else f"none of the levels tried ({', '.join(map(str, LEVELS))} users, counting "
                f"only those on time)"
            )
            lines.append(f"- {client}: {held}")
        naive_best, ours_best = best["naive"], best["ramplab"]
        if naive_best and ours_best:
            streams = _ratio(ours_best.streams_per_s, naive_best.streams_per_s)
            events = _ratio(ours_best.events_per_s, naive_best.events_per_s)
            lines.append(f"- ratio ramplab ÷ naive: streams/s {streams}, events/s {events}")
        for client, found in best.items():
            if found is not None:
                lines.append(f"- {client}: {_beyond(runs[client], found, q)}")
    return "\n".join(lines) + "\n"
