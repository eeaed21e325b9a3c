"""The peers as clients of our target: ramplab, NVIDIA AIPerf and GuideLLM drive the same paced
target at the same constant rates, and each is checked against the target's own record of every
request.

The target (one process, ``bench/servers.py``) streams 16 tokens, one per event, 20 ms apart after
a 20 ms prefill, jitter 0, signing off, and with ``timing_detail`` writes into each stream's last
timing comment when it handed every content event to its socket (``events_ms``, ms after the
request arrived). For every request a tool measured:

* TTFT error = the tool's TTFT − the target's (``events_ms[0]``): it holds the request's trip in
  and the first token's trip back, so it is above 0 for any client;
* ITL error = |the tool's gap − the target's gap| for the same two content events;
* decode-span error = |the tool's (last token − first token) − the target's|: the only timing
  error GuideLLM's records allow (it keeps the first and the last token's times and a count, not
  each token's), so the one all three tools are compared on.

ramplab reads ``events_ms`` from its own records (``server_events_ms``); AIPerf ignores the
comment, but its raw export (``--export-level raw``) keeps every SSE packet it read with its
``perf_ns`` stamp, the comment included, so both sides of the comparison come from the same
stream. Each tool runs once per rate: ``locust -f locustfiles/llm_ramp.py`` (one process, the open-
loop engine, constant arrivals) and ``aiperf profile --request-rate R --arrival-pattern constant``
(its own process tree: controller, timing manager, workers, record processors) and ``guidellm run
--profile kind=constant`` (its client, which needs torch: a venv of its own with the CPU build,
``bench/peer_env.py``; main process and worker processes). GuideLLM discards SSE comments, so the
target runs under ``bench/timing_tap.py``, which copies each stream's timing comment with its
completion id to a file; GuideLLM's JSON report keeps the id (``response_id``). CPU is the user +
system time of the whole tree of each tool over its measured window, per stream started in it.

Issue 16's speed goal, *one worker core sustains ≥ 2 × the streams/s GuideLLM sustains per
process at equal error*, is read from the same runs (``verdict``):

* the error is the decode-span error p99 (TTFT error is reported beside it, not bounded: it holds
  the trips in and out, which no client stamp removes);
* *equal error*: E = the smallest span error p99 GuideLLM showed at any rate it achieved
  (≥ ``ON_RATE`` × requested), rounded up to ``E_STEP_MS``. Below E GuideLLM holds no rate, so E
  is the tightest bound at which both tools have a rate to compare; the section also gives the
  highest rates at 2 E and 4 E, to show whether the ratio hangs on where E fell;
* each tool's rate is the highest it held with span error p99 ≤ E and achieved ≥ ``ON_RATE`` ×
  requested; the goal reads ramplab's ÷ GuideLLM's: ramplab as one ``locust`` process (one core
  at most), GuideLLM as its whole process tree on its defaults (a main process, 10 worker
  processes and a multiprocessing manager, free to use every core) — the reading least
  favourable to ramplab. Streams/s per core of CPU each tree used at its rate is reported beside
  it;
* met when the ratio is ≥ ``GOAL_RATIO``; *not decided* when GuideLLM achieved no rate, or when
  the ratio falls short but ramplab held the highest rate tried (its limit lies beyond); NOT met
  otherwise. Whether ramplab or the target ran out above ramplab's rate shows in the target's own
  CPU and lateness (each send after the time its latency model set), measured at every run.

``vllm bench serve`` is not here; the section written says why (``NOT_RUN``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import numpy as np
import psutil

from bench.peer_env import AIPERF, GUIDELLM_CLIENT, ensure
from bench.servers import REPO, server
from target_service.embedded_redis import free_port

RATES = tuple(
    float(v)
    for v in os.environ.get("BENCH_PEER_RATES", "1,2,5,10,20,40,100,150,200,300").split(",")
)
HOLD_S = 8.0
WARM_S = 2.0
TOKENS = 16
ITL_MS = 20.0
PREFILL_MS = 20.0
LIMIT_MS = 1.0
ON_RATE = 0.95
E_STEP_MS = 0.5  # the equal-error bound is GuideLLM's best span error p99 rounded up to this
GOAL_RATIO = 2.0
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
    "- **`vllm bench serve`** ships in the `vllm` package: `pip install --dry-run vllm` "
    "(0.34.0, run on 2026-12-03) resolves `torch==2.14.0` and the NVIDIA CUDA wheels (cuBLAS, "
    "NVRTC, NVSHMEM, triton, …) — the GPU stack (gigabytes); not installed.\n"
)


class TreeCpu(threading.Thread):
    """User + system CPU seconds of a process and all its descendants, every 0.25 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.samples: list[tuple[float, float]] = []
        self._seen: dict[int, float] = {}  # last CPU seen per pid: exited children keep theirs
        self._done = threading.Event()

    @property
    def processes(self) -> int:
        """How many processes the tree held at any sample."""
        return len(self._seen)

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
    rss: list[tuple[float, float]] = []  # (epoch, MiB)
    try:
        while process.poll() is None:
            with contextlib.suppress(psutil.Error):
                rss.append((time.time(), psutil.Process(process.pid).memory_info().rss / 2**20))
            time.sleep(0.25)
    finally:
        sampler.stop()
        log.close()
    streams, errors = ramplab_streams(out / "requests.jsonl")
    first = min(s.start for s in streams)
    begin, end = first + warm_s, first + warm_s + hold_s
    inside = _window(streams, begin, end)
    peak = max(mib for _, mib in rss)
    steady = float(np.median([mib for at, mib in rss if begin <= at <= end]))
    cpu_s = sampler.cpu_s(begin, end)
    return Run(
        "ramplab", rate, inside, (begin, end), cpu_s, errors, peak, sampler.processes,
        rss_window_mib=steady,
    )  # fmt: skip


def _run_sampled(
    command: list[str], log_path: Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> TreeCpu:
    """Run a peer's ``command`` to its end (5 minutes at most), its output in ``log_path``, with
    the CPU of its process tree sampled throughout."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        sampler = TreeCpu(process.pid)
        sampler.start()
        try:
            process.wait(timeout=300)
        finally:
            sampler.stop()
    return sampler


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
    # Not HF_HUB_OFFLINE: with it set, AIPerf takes the tokenizer's directory for a hub name.
    sampler = _run_sampled(command, workdir / f"aiperf-{rate:g}.log")
    streams, errors = aiperf_streams(out / "profile_export_raw.jsonl")
    begin = min(s.start for s in streams)
    end = begin + HOLD_S
    inside = _window(streams, begin, end)
    cpu_s = sampler.cpu_s(begin, end)
    return Run("aiperf", rate, inside, (begin, end), cpu_s, errors, processes=sampler.processes)


@contextlib.contextmanager
def tapped_target(tap: Path) -> Iterator[tuple[int, int]]:
    """The target of ``TARGET_ENV`` under ``bench/timing_tap.py``, writing to ``tap``: its port
    and its process id."""
    port = free_port()
    command = [sys.executable, "-m", "bench.timing_tap", str(tap), "--port", str(port)]
    env = {"APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"), **TARGET_ENV}
    with server(command, f"http://127.0.0.1:{port}/healthz", env):
        [pid] = [
            child.pid
            for child in psutil.Process().children()
            if "bench.timing_tap" in child.cmdline()
        ]
        yield port, pid


def with_target_cpu(target_pid: int, make: Callable[[], Run]) -> Run:
    """``make()``'s run, with the target's CPU (cores) over the run's measured window."""
    sampler = TreeCpu(target_pid)
    sampler.start()
    try:
        result = make()
    finally:
        sampler.stop()
    begin, end = result.window
    result.target_cores = sampler.cpu_s(begin, end) / (end - begin)
    return result


def run_guidellm(port: int, rate: float, workdir: Path, tokenizer: Path, tap: Path) -> Run:
    script = ensure(GUIDELLM_CLIENT, workdir / "guidellm-install.log")
    report = workdir / f"guidellm-{rate:g}.json"
    backend = {
        "kind": "openai_http",
        "target": f"http://127.0.0.1:{port}",
        "model": MODEL,
        "api_routes": {"/health": "healthz"},  # its start-up check; ours is /healthz
        "extras": {"body": {"timing_detail": True}},
    }
    data = {"kind": "synthetic_text", "prompt_tokens": 4, "output_tokens": TOKENS}
    command = [str(script), "run", "--backend", json.dumps(backend)]
    command += ["--profile", json.dumps({"kind": "constant", "rate": [rate]})]
    # One second past the window: the streams still open when it stops are "incomplete".
    duration = {"kind": "max_duration", "seconds": WARM_S + HOLD_S + 1.0}
    command += ["--constraint", json.dumps(duration), "--data", json.dumps(data)]
    command += ["--tokenizer", json.dumps({"kind": "huggingface_auto", "model": str(tokenizer)})]
    command += ["--output", json.dumps({"kind": "json", "path": str(report)})]
    command += ["--disable-console"]
    # Offline: the tokenizer is a local directory and the data synthetic; these make any attempt
    # to reach the Hugging Face hub fail instead of downloading.
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    sampler = _run_sampled(
        command, workdir / f"guidellm-{rate:g}.log", cwd=workdir, env={**os.environ, **offline}
    )
    streams, errors = guidellm_streams(report, tap)
    first = min(s.start for s in streams)
    begin, end = first + WARM_S, first + WARM_S + HOLD_S
    inside = _window(streams, begin, end)
    cpu_s = sampler.cpu_s(begin, end)
    return Run("guidellm", rate, inside, (begin, end), cpu_s, errors, processes=sampler.processes)


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
        "span err p50 / p99 ms | CPU ms per stream | cores | processes | target cores | "
        "target late p99 ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        lines.append(
            f"| {run.rate:g} | {run.tool} | {run.achieved / run.rate:.3f} | {len(run.streams)} | "
            f"{run.errors} | {_f(run.pct('ttft_ms', 50))} / {_f(run.pct('ttft_ms', 99))} | "
            f"{_f(run.pct('itl', 50))} / {_f(run.pct('itl', 99))} | "
            f"{_f(run.pct('ttlt_ms', 50))} / {_f(run.pct('ttlt_ms', 99))} | "
            f"{_f(run.pct('ttft_err', 50), 3)} / {_f(run.pct('ttft_err', 99), 3)} | "
            f"{_f(run.pct('itl_err', 50), 3)} / {_f(run.pct('itl_err', 99), 3)} | "
            f"{_f(run.pct('span_err', 50), 3)} / {_f(run.pct('span_err', 99), 3)} | "
            f"{_f(run.cpu_ms_per_stream)} | {_f(run.cores)} | {run.processes} | "
            f"{_f(run.target_cores)} | {_f(run.pct('target_late', 99), 3)} |"
        )
    return lines


def _ratio(x: float, y: float) -> str:
    return f"{x / y:.2f}×" if y > 0 and np.isfinite(x) and np.isfinite(y) else "n/a"


def _ratios(runs: list[Run], peer: str, errors: tuple[str, ...]) -> list[str]:
    """``peer`` ÷ ramplab at each rate, for the errors given and CPU per stream."""
    names = {"ttft_err": "TTFT err", "itl_err": "ITL err", "span_err": "span err"}
    heads = [f"{names[e]} p{q}" for e in errors for q in (50, 99)]
    lines = [
        f"| rate | {' | '.join(heads)} | CPU per stream |",
        "|---:|" + "---:|" * (len(heads) + 1),
    ]
    for rate in RATES:
        pair = {r.tool: r for r in runs if r.rate == rate}
        if peer not in pair or "ramplab" not in pair:
            continue
        a, b = pair[peer], pair["ramplab"]
        cells = [_ratio(a.pct(e, q), b.pct(e, q)) for e in errors for q in (50, 99)]
        cells.append(_ratio(a.cpu_ms_per_stream, b.cpu_ms_per_stream))
        lines.append(f"| {rate:g} | {' | '.join(cells)} |")
    return lines


def highest_held(runs: list[Run], tool: str, error: str) -> Run | None:
    held = [r for r in runs if r.tool == tool and r.holds_on(error)]
    return max(held, key=lambda r: r.rate) if held else None


def _capacity(runs: list[Run], tool: str, error: str) -> str:
    best = highest_held(runs, tool, error)
    if best is None:
        return f"- {tool}: none of the rates tried ({', '.join(f'{r:g}' for r in RATES)} /s)"
    more = " (the highest tried: its limit lies beyond)" if best.rate == max(RATES) else ""
    return (
        f"- {tool}: {best.rate:g} streams/s{more}, achieved {best.achieved:.1f}/s, "
        f"{error.replace('_err', '')} error p99 {best.pct(error, 99):.3f} ms, "
        f"using {best.cores:.2f} cores"
    )


def equal_error_bound(runs: list[Run]) -> float | None:
    """E: the smallest span error p99 GuideLLM showed at any rate it achieved, rounded up to
    ``E_STEP_MS``; None when it achieved none."""
    best = [r.pct("span_err", 99) for r in runs if r.tool == "guidellm" and r.on_rate]
    best = [v for v in best if np.isfinite(v)]
    if not best:
        return None
    return math.ceil(round(min(best) / E_STEP_MS, 9)) * E_STEP_MS


def highest_within(runs: list[Run], tool: str, bound_ms: float) -> Run | None:
    """``tool``'s run at the highest rate it held with span error p99 ≤ ``bound_ms``."""
    held = [r for r in runs if r.tool == tool and r.holds_within(bound_ms)]
    return max(held, key=lambda r: r.rate) if held else None


def _processes(run: Run) -> str:
    return f"{run.processes} process" + ("es" if run.processes != 1 else "")


def _per_core(run: Run) -> float:
    return run.rate / run.cores if run.cores > 0 else float("nan")


@dataclass
class Verdict:
    """Issue 16's goal read from measured runs: ramplab's streams/s held at E ≥ ``GOAL_RATIO``
    × GuideLLM's (see the module docstring for E)."""

    state: str  # "met", "NOT met" or "not decided"
    why: str
    bound_ms: float | None = None
    ours: Run | None = None
    theirs: Run | None = None

    @property
    def ratio(self) -> float:
        if self.ours is None or self.theirs is None:
            return float("nan")
        return self.ours.rate / self.theirs.rate

    @property
    def per_core_ratio(self) -> float:
        if self.ours is None or self.theirs is None:
            return float("nan")
        return _per_core(self.ours) / _per_core(self.theirs)


def verdict(runs: list[Run]) -> Verdict:
    bound = equal_error_bound(runs)
    if bound is None:
        return Verdict("not decided", "GuideLLM achieved none of the rates it was asked for")
    theirs = highest_within(runs, "guidellm", bound)
    ours = highest_within(runs, "ramplab", bound)
    if ours is None:
        return Verdict("NOT met", "ramplab held no rate tried within E", bound, None, theirs)
    tried = max(r.rate for r in runs if r.tool == "ramplab")
    found = Verdict("met", "", bound, ours, theirs)
    if found.ratio >= GOAL_RATIO:
        if ours.rate == tried:
            found.why = "at least: ramplab held the highest rate tried"
        return found
    if ours.rate == tried:
        found.state = "not decided"
        found.why = "ramplab held the highest rate tried, so its limit lies beyond"
        return found
    found.state = "NOT met"
    return found


def goal_line(runs: list[Run]) -> str:
    found = verdict(runs)
    head = (
        f"Goal *one ramplab worker core sustains ≥ {GOAL_RATIO:g} × the streams/s GuideLLM "
        "sustains per process at equal error*"
    )
    if found.theirs is None or found.bound_ms is None:
        return f"{head}: **{found.state}** — {found.why}."
    theirs = found.theirs
    their_part = (
        f"GuideLLM {theirs.rate:g}/s (span error p99 {theirs.pct('span_err', 99):.3f} ms, TTFT "
        f"error p50 / p99 {theirs.pct('ttft_err', 50):.3f} / {theirs.pct('ttft_err', 99):.3f} "
        f"ms, {_processes(theirs)}, {theirs.cores:.2f} cores)"
    )
    if found.ours is None:
        return f"{head}, E = {found.bound_ms:g} ms: **{found.state}** — {found.why}; {their_part}."
    ours = found.ours
    our_part = (
        f"ramplab {ours.rate:g}/s (span error p99 {ours.pct('span_err', 99):.3f} ms, TTFT error "
        f"p50 / p99 {ours.pct('ttft_err', 50):.3f} / {ours.pct('ttft_err', 99):.3f} ms, "
        f"{_processes(ours)}, {ours.cores:.2f} cores)"
    )
    why = f" — {found.why}" if found.why else ""
    return (
        f"{head}, E = {found.bound_ms:g} ms: {our_part} ÷ {their_part} = **{found.ratio:.2f}×**, "
        f"goal **{found.state}**{why}. Streams/s per core used at those rates: "
        f"{_per_core(ours):,.0f} ÷ {_per_core(theirs):,.0f} = {found.per_core_ratio:.2f}×."
    )


def looser_bounds(runs: list[Run]) -> list[str]:
    """The highest rate each tool held at E and at bounds looser than E: whether the ratio
    depends on where E fell."""
    bound = equal_error_bound(runs)
    if bound is None:
        return []
    lines = [
        "| span error p99 ≤ ms | ramplab streams/s | GuideLLM streams/s | ratio |",
        "|---:|---:|---:|---:|",
    ]
    for factor in (1, 2, 4):
        ours = highest_within(runs, "ramplab", bound * factor)
        theirs = highest_within(runs, "guidellm", bound * factor)
        a = ours.rate if ours else 0.0
        b = theirs.rate if theirs else 0.0
        lines.append(f"| {bound * factor:g} | {a:g} | {b:g} | {_ratio(a, b)} |")
    return lines


def limit_lines(runs: list[Run]) -> list[str]:
    """ramplab at each rate: its CPU and the target's, the target's lateness and the span
    error — which of the two ran out first above the highest rate held."""
    lines = [
        "| rate | ramplab cores | ramplab span err p99 ms | target cores (its process tree) | "
        "target late p50 / p99 ms |",
        "|---:|---:|---:|---:|---:|",
    ]
    for run in sorted((r for r in runs if r.tool == "ramplab"), key=lambda r: r.rate):
        lines.append(
            f"| {run.rate:g} | {_f(run.cores)} | {_f(run.pct('span_err', 99), 3)} | "
            f"{_f(run.target_cores)} | {_f(run.pct('target_late', 50), 3)} / "
            f"{_f(run.pct('target_late', 99), 3)} |"
        )
    return lines


GUIDELLM_STAMPS = (
    "Where GuideLLM's error comes from (its 0.8.1 source: `guidellm/backends/openai/http.py`, "
    "`scheduler/worker.py`, `utils/messaging.py`): it stamps a token with `time.time()` when "
    "`httpx`'s `aiter_lines()` hands the line to the asyncio loop of a worker process, so a "
    "stamp waits for whatever that process is doing. Beside the loop, each worker process runs "
    "two messaging threads that encode and decode every request's four status updates "
    "(pending, in progress, first token, completed: each a pydantic `model_copy()` and a "
    "msgspec encoding) and wait on the shared queues with 10–100 ms timeouts; while one of "
    "them holds the GIL the loop cannot stamp (Python hands the GIL over every 5 ms at most). "
    "On the first token the request's own coroutine copies and queues an update before it "
    "reads the next line. And by default GuideLLM starts 10 worker processes "
    "(`max_worker_processes`) beside its main process and a multiprocessing manager, "
    "whatever the rate, so on 2 cores its processes also wait for each other. ramplab reads "
    "`perf_counter` the moment httpx hands it the bytes, before parsing them "
    "(`ramplab/measure/attempt.py`)."
)


def _equal_error_section(runs: list[Run]) -> list[str]:
    found = verdict(runs)
    intro = (
        f"**At equal error** (how the speed goal below is read). E = the smallest span error p99 "
        f"GuideLLM showed at any rate it achieved (≥ {ON_RATE:g} × requested), rounded up to "
        f"{E_STEP_MS:g} ms"
    )
    if found.bound_ms is not None:
        best = min(
            (r for r in runs if r.tool == "guidellm" and r.on_rate),
            key=lambda r: r.pct("span_err", 99),
        )
        intro += (
            f": its best was {best.pct('span_err', 99):.3f} ms at {best.rate:g}/s, so "
            f"E = {found.bound_ms:g} ms"
        )
    intro += (
        f". For each tool, the highest rate it held with span error p99 ≤ E and achieved ≥ "
        f"{ON_RATE:g} × requested. The goal reads the ratio of those rates: ramplab as one "
        "`locust` process (one core at most) against GuideLLM's whole process tree, free to "
        "use both cores — the reading least favourable to ramplab; streams/s per core of CPU "
        "each tree used at that rate stands beside it. TTFT error is reported, not bounded: it "
        "holds the request's trip in and the first token's trip back, which no client "
        "timestamp can remove. At the lowest rates p99 is close to the worst stream of a few "
        f"({HOLD_S * min(RATES):g} at {min(RATES):g}/s)."
    )
    lines = [intro, "", goal_line(runs), ""]
    if found.bound_ms is not None:
        lines += ["The highest rates held at E and at looser bounds:", "", *looser_bounds(runs)]
        lines.append("")
    lines += [
        "ramplab's runs with the target beside them (target late: each send after the time its "
        "latency model set; a target that keeps time is not the limit):",
        "",
        *limit_lines(runs),
        "",
        GUIDELLM_STAMPS,
    ]
    return lines


def run() -> str:
    workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    load_before = os.getloadavg()[0]
    runs: list[Run] = []
    tap = workdir / "target-timing.jsonl"
    try:
        tokenizer = _tokenizer(workdir)
        ensure(GUIDELLM_CLIENT, workdir / "guidellm-install.log")  # before the clock starts
        with tapped_target(tap) as (port, pid):
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5.0).raise_for_status()
            for rate in RATES:  # the tools take turns at each rate
                runs.append(with_target_cpu(pid, partial(run_ramplab, port, rate, workdir)))
                runs.append(
                    with_target_cpu(pid, partial(run_aiperf, port, rate, workdir, tokenizer))
                )
                runs.append(
                    with_target_cpu(pid, partial(run_guidellm, port, rate, workdir, tokenizer, tap))
                )
    finally:
        load_after = os.getloadavg()[0]
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
    stream_s = (PREFILL_MS + (TOKENS - 1) * ITL_MS) / 1000.0
    lines = [
        "## Peers as clients of our target: ramplab vs NVIDIA AIPerf vs GuideLLM",
        "",
        f"One target process streams {TOKENS} tokens, one per event, {ITL_MS:g} ms apart after "
        f"a {PREFILL_MS:g} ms prefill ({stream_s:.2f} s a stream), jitter 0, decode slowdown 0, "
        "signing off, and "
        "discloses when it sent every content event (`timing_detail`). Each tool drives it at "
        f"constant rates of {', '.join(f'{r:g}' for r in RATES)} streams/s, {HOLD_S:g} s "
        f"measured after {WARM_S:g} s of warm-up, the three tools taking turns at each rate: "
        "ramplab as ONE `locust -f locustfiles/llm_ramp.py` process (open-loop engine, "
        "`--ramplab-arrivals constant`), AIPerf 0.13.0 (its own venv, `bench/peer_env.py`; "
        "an offline byte-level tokenizer, `bench/byte_tokenizer.py`, and the server's token "
        "counts) as `aiperf profile --request-rate R --arrival-pattern constant`, its whole "
        "process tree, and GuideLLM 0.8.1 (its own venv with torch 2.13.0, CPU build; the same "
        "tokenizer, offline) as `guidellm run --profile kind=constant,rate=R` with synthetic "
        f"data ({TOKENS} output tokens), its whole process tree. Times are each tool's own (TTFT "
        "from its send); errors are against the target's record of the same request "
        "(`bench/peers.py` explains them; GuideLLM keeps only the first and last token's times, "
        "so its ITL is each stream's mean gap and its per-gap ITL error is n/a — the *span "
        "error*, first to last token, is the error all three are compared on; the target runs "
        "under `bench/timing_tap.py` so that GuideLLM's requests can be matched to the "
        "target's record). CPU: the tool's process tree, user + system, over the measured "
        f"window. Load average (1 min) {load_before:.2f} before the run and {load_after:.2f} "
        "after it, on 2 cores shared with other engineers' jobs: one noisy sample — read the "
        "ratios.",
        "",
        *_table(runs),
        "",
        "Ratios AIPerf ÷ ramplab at each rate (above 1: ramplab is the more exact, or the "
        "cheaper):",
        "",
        *_ratios(runs, "aiperf", ("ttft_err", "itl_err", "span_err")),
        "",
        "Ratios GuideLLM ÷ ramplab at each rate:",
        "",
        *_ratios(runs, "guidellm", ("ttft_err", "span_err")),
        "",
        f"Highest rate held (achieved ≥ {ON_RATE:g} × requested and ITL error p99 < "
        f"{LIMIT_MS:g} ms):",
        "",
        _capacity(runs, "ramplab", "itl_err"),
        _capacity(runs, "aiperf", "itl_err"),
        "",
        f"Highest rate held with span error p99 < {LIMIT_MS:g} ms (the error GuideLLM allows):",
        "",
        _capacity(runs, "ramplab", "span_err"),
        _capacity(runs, "aiperf", "span_err"),
        _capacity(runs, "guidellm", "span_err"),
        "",
        *_equal_error_section(runs),
        "",
        "Not measured:",
        "",
        NOT_RUN,
    ]
    return "\n".join(lines)
