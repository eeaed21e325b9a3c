"""The section ``run()`` writes: the table of every run, the ratios to ramplab, the highest rate
each tool held, and issue 16's goal read at equal error (``verdict``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.peers.streams import LIMIT_MS, ON_RATE, Run
from bench.peers.workload import HOLD_S, ITL_MS, PREFILL_MS, RATES, TOKENS, WARM_S

E_STEP_MS = 0.5  # the equal-error bound is GuideLLM's best span error p99 rounded up to this
GOAL_RATIO = 2.0
NOT_RUN = (
    "- **`vllm bench serve`** ships in the `vllm` package: `pip install --dry-run vllm` "
    "(0.34.0, run on 2026-12-03) resolves `torch==2.14.0` and the NVIDIA CUDA wheels (cuBLAS, "
    "NVRTC, NVSHMEM, triton, …) — the GPU stack (gigabytes); not installed.\n"
)


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
    × GuideLLM's (``bench/peers/__init__.py`` defines E)."""

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


def section(runs: list[Run], load_before: float, load_after: float) -> str:
    """The section's Markdown, from ``runs`` and the load average before and after them."""
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
        "(`bench/peers/__init__.py` explains them; GuideLLM keeps only the first and last token's times, "
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
