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

import os
import shutil
import tempfile
from functools import partial
from pathlib import Path

import httpx

from bench.peer_env import GUIDELLM_CLIENT, ensure
from bench.peers.report import equal_error_bound, goal_line, looser_bounds, section, verdict
from bench.peers.streams import Run, Stream, aiperf_streams, guidellm_streams, ramplab_streams
from bench.peers.tools import (
    byte_tokenizer,
    run_aiperf,
    run_guidellm,
    run_ramplab,
    tapped_target,
    with_target_cpu,
)
from bench.peers.workload import MODEL, RATES

__all__ = [
    "MODEL",
    "Run",
    "Stream",
    "aiperf_streams",
    "equal_error_bound",
    "goal_line",
    "guidellm_streams",
    "looser_bounds",
    "ramplab_streams",
    "run",
    "run_ramplab",
    "verdict",
]


def run() -> str:
    workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    load_before = os.getloadavg()[0]
    runs: list[Run] = []
    tap = workdir / "target-timing.jsonl"
    try:
        tokenizer = byte_tokenizer(workdir)
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
    return section(runs, load_before, load_after)
