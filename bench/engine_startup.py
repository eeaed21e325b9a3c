"""vLLM's start-up settings on this machine: time to ready, memory, and the first requests.

Each configuration starts vLLM on the tiny model (``bench/engine/``), waits for ``/v1/models``,
reads the group's proportional set size, sends one streamed chat completion (the first request:
what a test pays on top of the start) and then ``REQUESTS`` more one after another, and stops the
server. The streams are timed here, at the client, from the request's send to each SSE event.
``python -m bench engine_startup``; ``ENGINE_STARTUP_ONLY=label,label`` runs a subset (the
torch.compile configuration alone takes minutes).
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.engine import install, model, server

MAX_TOKENS = 32
REQUESTS = 5
BUNCHED_MS = 1.0  # two events this close were sent together: the server decodes a token in ~5 ms
PROMPT = "a short prompt of a few words to start the stream with"


@dataclass(frozen=True)
class Configuration:
    label: str
    what: str
    settings: server.Settings


CONFIGURATIONS = [
    Configuration("eager-256M", "`--enforce-eager`, KV cache 256 MiB (the default)",
                  server.Settings()),
    Configuration("eager-2G", "`--enforce-eager`, KV cache 2 GiB",
                  server.Settings(kv_cache_bytes=2 * server.GiB)),
    Configuration(
        "eager-uniproc",
        "`--enforce-eager`, 256 MiB, `VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1` (no "
        "separate worker process)",
        server.Settings(
            environment=(("VLLM_ENABLE_V1_MULTIPROCESSING", "0"), ("OMP_NUM_THREADS", "1"))
        ),
    ),
    Configuration(
        "eager-nobind",
        "`--enforce-eager`, 256 MiB, `VLLM_CPU_OMP_THREADS_BIND=nobind OMP_NUM_THREADS=1` (the "
        "worker not pinned to a core)",
        server.Settings(
            environment=(("VLLM_CPU_OMP_THREADS_BIND", "nobind"), ("OMP_NUM_THREADS", "1"))
        ),
    ),
    Configuration("compile-256M", "torch.compile (vLLM's default), 256 MiB",
                  server.Settings(enforce_eager=False)),
    Configuration("compile-256seqs", "torch.compile, 256 MiB, `--max-num-seqs 256` (vLLM's "
                  "default)", server.Settings(enforce_eager=False, max_num_seqs=256)),
]  # fmt: skip


@dataclass
class Stream:
    ttft_ms: float
    total_ms: float
    events: int
    tokens: int
    gaps_ms: list[float]  # between consecutive content events, at the client


def _stream(url: str, name: str) -> Stream:
    body = {
        "model": name,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.perf_counter()
    first, events, tokens = 0.0, 0, 0
    stamps: list[float] = []
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=300) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if any(choice["delta"].get("content") for choice in chunk["choices"]):
                events += 1
                stamps.append(time.perf_counter())
                if not first:
                    first = stamps[-1]
    done = time.perf_counter()
    gaps = [(later - earlier) * 1e3 for earlier, later in itertools.pairwise(stamps)]
    return Stream((first - started) * 1e3, (done - started) * 1e3, events, tokens, gaps)


def _load() -> str:
    return os.getloadavg()[0].__format__(".1f")


def _measure(configuration: Configuration, made: model.Model, logs: Path) -> str:
    load = _load()
    log = logs / f"{configuration.label}.log"
    with server.serving(made, configuration.settings, log=log, progress=print) as engine:
        memory = engine.memory_bytes() / server.GiB
        first = _stream(engine.url, made.name)
        rest = [_stream(engine.url, made.name) for _ in range(REQUESTS)]
    ttft = statistics.median(s.ttft_ms for s in rest)
    total = statistics.median(s.total_ms for s in rest)
    events = statistics.median(s.events for s in rest)
    gaps = [gap for s in rest for gap in s.gaps_ms]
    bunched = sum(gap < BUNCHED_MS for gap in gaps) / len(gaps)
    return (
        f"| {configuration.what} | {engine.ready_s:.1f} | {memory:.2f} | {first.ttft_ms:.0f} | "
        f"{first.total_ms:.0f} | {ttft:.0f} | {total:.0f} | {events:.0f} | {bunched:.0%} | "
        f"{load} |"
    )


def run() -> str:
    only = os.environ.get("ENGINE_STARTUP_ONLY")
    chosen = [c for c in CONFIGURATIONS if not only or c.label in only.split(",")]
    install_log = Path(tempfile.mkdtemp(prefix="engine-install-")) / "install.log"
    began = time.monotonic()
    install.ensure(install_log)
    installed_s = time.monotonic() - began
    made = model.ensure(seed=0)
    with tempfile.TemporaryDirectory(prefix="engine-model-") as scratch:
        began = time.monotonic()
        model.write(Path(scratch), seed=0)
        rebuilt = time.monotonic() - began
    venv = f"installed in {installed_s:.0f} s" if installed_s > 5 else "already cached"
    rows = []
    with tempfile.TemporaryDirectory(prefix="engine-startup-") as logs:
        for configuration in chosen:
            rows.append(_measure(configuration, made, Path(logs)))
    header = [
        "## vLLM start-up settings (the real engine, `bench/engine/`)",
        "",
        f"vllm-cpu 0.32.0 serving the tiny model ({model.parameters():,} parameters, seed 0; "
        f"made in {rebuilt:.1f} s). Ready: from the process's start to `/v1/models` naming the "
        "model. Memory: the proportional set size of the server's processes once ready. The "
        f"first request and the next {REQUESTS} (medians): a streamed chat completion of "
        f"{MAX_TOKENS} tokens with `ignore_eos`, timed at the client; events: SSE events with "
        "content (vLLM merges tokens into one event when it falls behind); bunched: the share "
        f"of gaps between consecutive events under {BUNCHED_MS:g} ms at the client, i.e. events "
        "that arrived together although vLLM decodes a token every ~5 ms and sends each in a "
        "packet of its own (tcpdump; docs/engines.md: the bunching is this client's reading on a "
        "busy machine). Load: the machine's "
        "1-minute load average when the configuration started (other engineers' jobs share "
        f"these 2 cores). The venv was {venv}.",
        "",
        "| configuration | ready s | memory GiB | first TTFT ms | first total ms | TTFT ms | "
        "total ms | events | bunched | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    return "\n".join(header + rows) + "\n"
