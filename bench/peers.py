"""The peers as clients of our target: ramplab and NVIDIA AIPerf drive the same paced target at the
same constant rates, and each is checked against the target's own record of every request.

The target (one process, ``bench/servers.py``) streams 16 tokens, one per event, 20 ms apart after
a 20 ms prefill, jitter 0, signing off, and with ``timing_detail`` writes into each stream's last
timing comment when it handed every content event to its socket (``events_ms``, ms after the
request arrived). For every request a tool measured:

* TTFT error = the tool's TTFT − the target's (``events_ms[0]``): it holds the request's trip in
  and the first token's trip back, so it is above 0 for any client;
* ITL error = |the tool's gap − the target's gap| for the same two content events.

ramplab reads ``events_ms`` from its own records (``server_events_ms``); AIPerf ignores the
comment, but its raw export (``--export-level raw``) keeps every SSE packet it read with its
``perf_ns`` stamp, the comment included, so both sides of the comparison come from the same
stream. Each tool runs once per rate: ``locust -f locustfiles/llm_ramp.py`` (one process, the open-
loop engine, constant arrivals) and ``aiperf profile --request-rate R --arrival-pattern constant``
(its own process tree: controller, timing manager, workers, record processors). CPU is the user +
system time of the whole tree of each tool over its measured window, per stream started in it.

GuideLLM and ``vllm bench serve`` are not here; the section written says why (``NOT_RUN``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import psutil

from bench.peer_env import AIPERF, ensure
from bench.servers import REPO, target

RATES = tuple(float(v) for v in os.environ.get("BENCH_PEER_RATES", "10,40,100").split(","))
HOLD_S = 8.0
WARM_S = 2.0
TOKENS = 16
ITL_MS = 20.0
PREFILL_MS = 20.0
LIMIT_MS = 1.0
ON_RATE = 0.95
TARGET_ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": str(PREFILL_MS),
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(ITL_MS),
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",  # streams as long at 300 in flight as at 30
    "APP_SCHEDULER__MAX_WAITING": "2048",
    "APP_SCHEDULER__MAX_NUM_SEQS": "512",
    "APP_SIGNING__MODE": "off",
    "APP_LOG_LEVEL": "warning",
}
MODEL = "ramplab-sim-1"
NOT_RUN = (
    "- **GuideLLM** (0.8.1) is not in the table: its mock server installs without torch (it "
    "is the foreign server of *Truth against a foreign server* above), but its client does not "
    "— `guidellm run` imports `guidellm.data.loaders.torch`, which imports `torch` "
    "unconditionally (checked: with every other runtime dependency installed, `guidellm run "
    "--backend kind=openai_http,...` stops at `ModuleNotFoundError: No module named 'torch'`), "
    "and it also needs `datasets`. torch's wheels on the package index bring the CUDA stack "
    "(gigabytes); a light, CPU-only install is not possible from the index alone. So the goal "
    "*one worker core sustains ≥ 2× the streams/s GuideLLM sustains per process* is not "
    "measured.\n"
    "- **`vllm bench serve`** ships in the `vllm` package: `pip install --dry-run vllm` "
    "(0.34.0, run on 2026-12-03) resolves `torch==2.14.0` and the NVIDIA CUDA wheels (cuBLAS, "
    "NVRTC, NVSHMEM, triton, …) — the GPU stack; not installed, for the same reason.\n"
)


class TreeCpu(threading.Thread):
    """User + system CPU seconds of a process and all its descendants, every 0.25 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float]] = []
        self._seen: dict[int, float] = {}  # last CPU seen per pid: exited children keep theirs
        self._done = threading.Event()

    def _cpu(self) -> float:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            self._seen[proc.pid] = times.user + times.system
        return sum(self._seen.values())

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.time(), self._cpu()))
            self._done.wait(0.25)

    def stop(self) -> None:
        self._done.set()
        self.join()

    def cpu_s(self, start: float, end: float) -> float:
        inside = [(t, c) for t, c in self.samples if start <= t <= end]
        if len(inside) < 2:
            return float("nan")
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) * (end - start) / (t1 - t0)


@dataclass
class Stream:
    """One request as a tool measured it, with the target's own send times."""

    start: float  # epoch seconds of the send
    ttft_ms: float
    ttlt_ms: float
    itl_ms: list[float]
    server_events_ms: list[float]


@dataclass
class Run:
    tool: str
    rate: float
    streams: list[Stream]
    window: tuple[float, float]
    cpu_s: float
    errors: int
    rss_mib: float = float("nan")
    notes: list[str] = field(default_factory=list)

    @property
    def achieved(self) -> float:
        starts = sorted(s.start for s in self.streams)
        if len(starts) < 2:
            return 0.0
        return (len(starts) - 1) / (starts[-1] - starts[0])

    def values(self, what: str) -> list[float]:
        out: list[float] = []
        for s in self.streams:
            if what == "ttft_err":
                out.append(s.ttft_ms - s.server_events_ms[0])
            elif what == "itl_err":
                gaps = np.diff(s.server_events_ms)
                out += [abs(c - g) for c, g in zip(s.itl_ms, gaps, strict=True)]
            elif what == "itl":
                out += s.itl_ms
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
        return self.achieved >= ON_RATE * self.rate and self.pct("itl_err", 99) < LIMIT_MS


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


def ramplab_streams(requests_jsonl: Path) -> tuple[list[Stream], int]:
    streams: list[Stream] = []
    errors = 0
    for line in requests_jsonl.read_text().splitlines():
        r = json.loads(line)
        events = r.get("server_events_ms") or []
        if not r["ok"] or r["ttft_send_ms"] is None or len(events) != len(r["itl_ms"]) + 1:
            errors += 1
            continue
        streams.append(
            Stream(r["actual_start"], r["ttft_send_ms"], r["ttlt_send_ms"], r["itl_ms"], events)
        )
    return streams, errors


def _window(streams: Iterable[Stream], begin: float, end: float) -> list[Stream]:
    return [s for s in streams if begin <= s.start < end]


def run_ramplab(
    port: int,
    rate: float,
    workdir: Path,
    tokens: int = TOKENS,
    warm_s: float = WARM_S,
    hold_s: float = HOLD_S,
) -> Run:
    """One ``locust`` process at ``rate``; ``rss_mib`` is its peak resident memory."""
    out = workdir / f"ramplab-{rate:g}"
    shape = f"{rate:g}@{warm_s + hold_s:g}s/{warm_s:g}s"
    command = [sys.executable, "-m", "locust", "-f", "locustfiles/llm_ramp.py"]
    command += ["--host", f"http://127.0.0.1:{port}", "--headless", "--only-summary"]
    command += ["--loglevel", "ERROR", "--ramplab-shape", shape, "--ramplab-arrivals", "constant"]
    command += ["--model", MODEL, "--max-tokens", str(tokens), "--ignore-eos", "--chunk-size", "1"]
    command += ["--prompt-tokens", "4", "--extra-body", '{"timing_detail": true}']
    command += ["--results-dir", str(out)]
    log = (workdir / f"ramplab-{rate:g}.log").open("wb")
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    sampler = TreeCpu(process.pid)
    sampler.start()
    peak_rss = 0.0
    try:
        while process.poll() is None:
            with contextlib.suppress(psutil.Error):
                peak_rss = max(peak_rss, psutil.Process(process.pid).memory_info().rss / 2**20)
            time.sleep(0.25)
    finally:
        sampler.stop()
        log.close()
    streams, errors = ramplab_streams(out / "requests.jsonl")
    first = min(s.start for s in streams)
    begin, end = first + warm_s, first + warm_s + hold_s
    inside = _window(streams, begin, end)
    return Run("ramplab", rate, inside, (begin, end), sampler.cpu_s(begin, end), errors, peak_rss)


def run_aiperf(port: int, rate: float, workdir: Path, tokenizer: Path) -> Run:
    script = ensure(AIPERF, workdir / "aiperf-install.log")
    out = workdir / f"aiperf-{rate:g}"
    command = [str(script), "profile", "--model", MODEL, "--url", f"http://127.0.0.1:{port}"]
    command += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(tokenizer)]
    command += ["--use-server-token-count", "--request-rate", f"{rate:g}"]
    command += ["--arrival-pattern", "constant", "--benchmark-duration", f"{HOLD_S:g}"]
    command += ["--warmup-duration", f"{WARM_S:g}", "--warmup-request-rate", f"{rate:g}"]
    command += ["--isl", "4", "--isl-stddev", "0", "--osl", str(TOKENS), "--osl-stddev", "0"]
    command += ["--extra-inputs", "timing_detail:true", "--extra-inputs", "ignore_eos:true"]
    command += ["--export-http-trace", "--export-level", "raw", "--ui", "none"]
    command += ["--artifact-dir", str(out)]
    log = (workdir / f"aiperf-{rate:g}.log").open("wb")
    # Not HF_HUB_OFFLINE: with it set, AIPerf takes the tokenizer's directory for a hub name.
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    sampler = TreeCpu(process.pid)
    sampler.start()
    try:
        process.wait(timeout=300)
    finally:
        sampler.stop()
        log.close()
    streams, errors = aiperf_streams(out / "profile_export_raw.jsonl")
    begin = min(s.start for s in streams)
    end = begin + HOLD_S
    inside = _window(streams, begin, end)
    return Run("aiperf", rate, inside, (begin, end), sampler.cpu_s(begin, end), errors)


def _tokenizer(workdir: Path) -> Path:
    directory = workdir / "byte-tokenizer"
    python = ensure(AIPERF).parent / "python"
    script = Path(__file__).with_name("byte_tokenizer.py")
    subprocess.run([str(python), str(script), str(directory)], check=True, capture_output=True)
    return directory


def _f(value: float, digits: int = 2) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:,.{digits}f}"


def _table(runs: list[Run]) -> list[str]:
    lines = [
        "| rate | tool | achieved ÷ requested | streams | errors | TTFT p50 / p99 ms | "
        "ITL p50 / p99 ms | TTLT p50 / p99 ms | TTFT err p50 / p99 ms | ITL err p50 / p99 ms | "
        "CPU ms per stream | cores |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        cores = run.cpu_s / (run.window[1] - run.window[0])
        lines.append(
            f"| {run.rate:g} | {run.tool} | {run.achieved / run.rate:.3f} | {len(run.streams)} | "
            f"{run.errors} | {_f(run.pct('ttft_ms', 50))} / {_f(run.pct('ttft_ms', 99))} | "
            f"{_f(run.pct('itl', 50))} / {_f(run.pct('itl', 99))} | "
            f"{_f(run.pct('ttlt_ms', 50))} / {_f(run.pct('ttlt_ms', 99))} | "
            f"{_f(run.pct('ttft_err', 50), 3)} / {_f(run.pct('ttft_err', 99), 3)} | "
            f"{_f(run.pct('itl_err', 50), 3)} / {_f(run.pct('itl_err', 99), 3)} | "
            f"{_f(run.cpu_ms_per_stream)} | {_f(cores)} |"
        )
    return lines


def _ratios(runs: list[Run]) -> list[str]:
    lines = [
        "",
        "Ratios AIPerf ÷ ramplab at each rate (above 1: ramplab is the more exact, or the "
        "cheaper):",
        "",
        "| rate | TTFT err p50 | ITL err p50 | ITL err p99 | CPU per stream |",
        "|---:|---:|---:|---:|---:|",
    ]
    for rate in RATES:
        pair = {r.tool: r for r in runs if r.rate == rate}
        if len(pair) < 2:
            continue
        a, b = pair["aiperf"], pair["ramplab"]

        def ratio(x: float, y: float) -> str:
            return f"{x / y:.2f}×" if y > 0 and np.isfinite(x) and np.isfinite(y) else "n/a"

        lines.append(
            f"| {rate:g} | {ratio(a.pct('ttft_err', 50), b.pct('ttft_err', 50))} | "
            f"{ratio(a.pct('itl_err', 50), b.pct('itl_err', 50))} | "
            f"{ratio(a.pct('itl_err', 99), b.pct('itl_err', 99))} | "
            f"{ratio(a.cpu_ms_per_stream, b.cpu_ms_per_stream)} |"
        )
    return lines


def _capacity(runs: list[Run], tool: str) -> str:
    held = [r for r in runs if r.tool == tool and r.holds]
    if not held:
        return f"- {tool}: none of the rates tried ({', '.join(f'{r:g}' for r in RATES)} /s)"
    best = max(held, key=lambda r: r.rate)
    cores = best.cpu_s / (best.window[1] - best.window[0])
    more = " (the highest tried: its limit lies beyond)" if best.rate == max(RATES) else ""
    return (
        f"- {tool}: {best.rate:g} streams/s{more}, achieved {best.achieved:.1f}/s, ITL error p99 "
        f"{best.pct('itl_err', 99):.3f} ms, using {cores:.2f} cores"
    )


def run() -> str:
    workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    load_before = os.getloadavg()[0]
    runs: list[Run] = []
    try:
        tokenizer = _tokenizer(workdir)
        with target(TARGET_ENV) as port:
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5.0).raise_for_status()
            for rate in RATES:  # the tools take turns at each rate
                runs.append(run_ramplab(port, rate, workdir))
                runs.append(run_aiperf(port, rate, workdir, tokenizer))
    finally:
        load_after = os.getloadavg()[0]
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
    stream_s = (PREFILL_MS + (TOKENS - 1) * ITL_MS) / 1000.0
    lines = [
        "## Peers as clients of our target: ramplab vs NVIDIA AIPerf",
        "",
        f"One target process streams {TOKENS} tokens, one per event, {ITL_MS:g} ms apart after "
        f"a {PREFILL_MS:g} ms prefill ({stream_s:.2f} s a stream), jitter 0, decode slowdown 0, "
        "signing off, and "
        "discloses when it sent every content event (`timing_detail`). Each tool drives it at "
        f"constant rates of {', '.join(f'{r:g}' for r in RATES)} streams/s, {HOLD_S:g} s "
        f"measured after {WARM_S:g} s of warm-up, the two tools taking turns at each rate: "
        "ramplab as ONE `locust -f locustfiles/llm_ramp.py` process (open-loop engine, "
        "`--ramplab-arrivals constant`), AIPerf 0.13.0 (its own venv, `bench/peer_env.py`; "
        "an offline byte-level tokenizer, `bench/byte_tokenizer.py`, and the server's token "
        "counts) as `aiperf profile --request-rate R --arrival-pattern constant`, its whole "
        "process tree. Times are each tool's own (TTFT from its send); errors are against the "
        "target's record of the same request (`bench/peers.py` explains both). CPU: the tool's "
        "process tree, user + system, over the measured window. Load average (1 min) "
        f"{load_before:.2f} before the run and {load_after:.2f} after it, on 2 cores shared with "
        "other engineers' jobs: one noisy sample — read the ratios.",
        "",
        *_table(runs),
        *_ratios(runs),
        "",
        f"Highest rate held (achieved ≥ {ON_RATE:g} × requested and ITL error p99 < "
        f"{LIMIT_MS:g} ms):",
        "",
        _capacity(runs, "ramplab"),
        _capacity(runs, "aiperf"),
        "",
        "Not measured:",
        "",
        NOT_RUN,
    ]
    return "\n".join(lines)
