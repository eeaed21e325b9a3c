"""The generator's own goals at 300 concurrent streams: ITL error, CPU and memory per stream.

One ``locust -f locustfiles/llm_ramp.py`` process (one worker core at most: one process, one
GIL) drives the paced target open-loop at constant rates; 16 tokens 200 ms apart after a 20 ms
prefill make a stream last 3.02 s, so a rate of R streams/s keeps ~3 × R streams in flight —
``RATES`` gives ~30 and ~300. Errors against the target's own send times (``timing_detail``), as
in ``bench/peers/``. Memory per concurrent stream = (RSS at the high rate − RSS at the low rate) ÷
(the difference in streams in flight, measured: the streams' summed durations over the window),
RSS being the median of the samples (every 0.25 s) inside the measured window: the steady state
the streams hold, while the interpreter, Locust and the imports cancel. The peak over the whole
process is shown too; at start-up and in the end-of-run summary it moves by a few MiB from run to
run, which is ±10 KiB per stream across ~270 streams, so it does not measure a stream. A level
whose achieved rate falls below 0.95 × the requested one fell behind (the generator, the target or
the machine), and its errors measure that lateness rather than the stamping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bench.peers import MODEL, Run, run_ramplab
from bench.servers import target

RATES = (10.0, 100.0)
TOKENS = 16
ITL_MS = 200.0
PREFILL_MS = 20.0
STREAM_S = (PREFILL_MS + (TOKENS - 1) * ITL_MS) / 1000.0
WARM_S = 4.0
HOLD_S = 8.0
GOAL_ITL_P99_MS = 0.5
ON_TIME = 0.95
GOAL_KIB_PER_STREAM = 50.0
TARGET_ENV = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": str(PREFILL_MS),
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(ITL_MS),
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_LATENCY__SLOWDOWN_PER_SEQ": "0",  # streams as long at 300 in flight as at 30
    "APP_SCHEDULER__MAX_WAITING": "2048",
    "APP_SCHEDULER__MAX_NUM_SEQS": "1024",
    "APP_SIGNING__MODE": "off",
    "APP_LOG_LEVEL": "warning",
}


def _in_flight(run: Run) -> float:
    """Mean streams in flight over the window: their summed durations ÷ its length."""
    return sum(s.ttlt_ms for s in run.streams) / 1000.0 / (run.window[1] - run.window[0])


def run() -> str:
    workdir = Path(tempfile.mkdtemp(prefix="bench-generator-"))
    load_before = os.getloadavg()[0]
    runs: list[Run] = []
    try:
        with target(TARGET_ENV) as port:
            for rate in RATES:
                runs.append(run_ramplab(port, rate, workdir, TOKENS, WARM_S, HOLD_S))
    finally:
        load_after = os.getloadavg()[0]
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
    low, high = runs
    in_flight = [_in_flight(r) for r in runs]
    kib = (high.rss_window_mib - low.rss_window_mib) * 1024.0 / (in_flight[1] - in_flight[0])
    itl_p99 = high.pct("itl_err", 99)
    on_time = high.achieved >= ON_TIME * high.rate
    lines = [
        "## The generator at 300 concurrent streams (one process)",
        "",
        f"One `locust -f locustfiles/llm_ramp.py` process, constant arrivals at "
        f"{', '.join(f'{r:g}' for r in RATES)} streams/s; {TOKENS} tokens {ITL_MS:g} ms apart "
        f"after a {PREFILL_MS:g} ms prefill ({STREAM_S:.2f} s a stream), so ~"
        f"{RATES[0] * STREAM_S:.0f} and ~{RATES[1] * STREAM_S:.0f} streams in flight (the table: "
        f"as measured); {HOLD_S:g} s measured "
        f"after {WARM_S:g} s. Model `{MODEL}`, jitter 0, decode slowdown 0, signing off. "
        "Load average (1 min) "
        f"{load_before:.2f} before, {load_after:.2f} after, on 2 shared cores.",
        "",
        "| streams/s | in flight | achieved ÷ requested | errors | ITL err p50 / p99 ms | "
        "TTFT err p50 / p99 ms | CPU ms per stream | cores | RSS in window MiB | peak RSS MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run, flight in zip(runs, in_flight, strict=True):
        cores = run.cpu_s / (run.window[1] - run.window[0])
        lines.append(
            f"| {run.rate:g} | {flight:.0f} | {run.achieved / run.rate:.3f} | {run.errors} | "
            f"{run.pct('itl_err', 50):.3f} / {run.pct('itl_err', 99):.3f} | "
            f"{run.pct('ttft_err', 50):.3f} / {run.pct('ttft_err', 99):.3f} | "
            f"{run.cpu_ms_per_stream:.2f} | {cores:.2f} | {run.rss_window_mib:.1f} | "
            f"{run.rss_mib:.1f} |"
        )
    lines += [
        "",
        f"- ITL error p99 at ~{in_flight[1]:.0f} streams: {itl_p99:.3f} ms — goal ≤ "
        f"{GOAL_ITL_P99_MS:g} ms {'met' if itl_p99 <= GOAL_ITL_P99_MS else 'NOT met'}"
        + (
            "."
            if on_time
            else f" (and not a measure of the stamping: the level fell behind, achieved "
            f"{high.achieved / high.rate:.3f} × requested; the machine's load is above)."
        ),
        f"- Memory per concurrent stream: {kib:.1f} KiB RSS — goal ≤ {GOAL_KIB_PER_STREAM:g} "
        f"KiB {'met' if kib <= GOAL_KIB_PER_STREAM else 'NOT met'}.",
        "",
    ]
    return "\n".join(lines)
