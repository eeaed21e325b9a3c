"""Client figures against a server's own: what ``bench/engine_truth.py`` computes and writes.

Pure functions, no engine: vLLM's figures over one run are the increase of its counters and
histograms between two scrapes (``ramplab/results/engine.py`` parses them), each histogram's
Δsum ÷ Δcount its exact mean over exactly those requests; each tool's figures are its own
output (ramplab's records, ``vllm bench serve``'s result JSON). Per run, client − server is the
tool's overhead and error plus the trip from vLLM's engine to the client; across repeats of one
tool its spread is the run-to-run noise, and the two tools' mean differences are compared
against it (``Comparison``: within noise when they differ by at most twice the standard error of
that difference, Welch, from the two tools' run-to-run std).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ramplab.results.engine import EngineSample, Histogram

TOOLS = ("ramplab", "vllm-bench")
METRICS = ("ttft", "tpot", "e2e")
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}
SERVER_LABELS = {"ttft": "TTFT", "tpot": "ITL", "e2e": "E2E"}
# The server's histogram held against each client figure (names of ramplab/results/engine.py):
# the client's TPOT against the mean inter-token latency, equal to the mean TPOT when every
# stream has as many tokens.
SERVER_HISTOGRAM = {"ttft": "ttft", "tpot": "itl", "e2e": "e2e"}
PHASES = ("queue", "prefill", "decode")
TOKENS = ("requests", "prompt_tokens", "generation_tokens")
BUNCHED_MS = 1.0  # two events this close were read together: vLLM decodes a token in ~4-7 ms
STAMP_MS = 1.0
# A run whose server-side mean prefill is this many times the median run's was a stalled engine
# (seen: vLLM making no token for ~10 s while another job held the machine, prefill means of
# 250-610 ms against ~11 ms): it measures the machine, not the tools, and stays out of the summary.
STALLED = 3.0


@dataclass(frozen=True)
class Server:
    """vLLM's own figures over one run: counter increases and histogram means (ms)."""

    counts: dict[str, float]  # TOKENS, and prefix_hits
    means_ms: dict[str, float]  # ttft, itl, e2e and the PHASES present
    observations: dict[str, float]  # each histogram's Δcount


@dataclass(frozen=True)
class Client:
    """What one tool reported for one run: its means (ms), its token sums and how bunched its
    reads were."""

    means_ms: dict[str, float]  # METRICS
    counts: dict[str, float]  # TOKENS, over the requests that succeeded
    failed: int
    bunched: float  # share of gaps between consecutive token events under BUNCHED_MS
    exit_code: int = 0
    # Streams whose TTFT or E2E stamp the tool itself says may be late by more than STAMP_MS
    # (ramplab's stamp_error_ms: the first or last event read together with a later one); None
    # for a tool that does not say.
    flagged: int | None = None


@dataclass
class Run:
    tool: str
    rate: float
    repeat: int
    client: Client
    server: Server
    load: tuple[float, float]  # 1-minute load average before and after
    seconds: float = 0.0

    def diff(self, metric: str) -> float:
        """Client − server, ms."""
        return self.client.means_ms[metric] - self.server.means_ms[SERVER_HISTOGRAM[metric]]

    @property
    def tokens_equal(self) -> bool:
        return all(self.client.counts[k] == self.server.counts[k] for k in TOKENS)


def server_figures(before: EngineSample, after: EngineSample) -> Server:
    """The increase of vLLM's counters and histograms between two scrapes of ``parse``."""
    counts = {
        name: after.values.get(name, 0.0) - before.values.get(name, 0.0)
        for name in (*TOKENS, "prefix_hits")
    }
    means, observations = {}, {}
    for name in ("ttft", "itl", "e2e", *PHASES):
        if name not in after.histograms:
            continue
        moved = after.histograms[name].minus(before.histograms.get(name, Histogram()))
        observations[name] = moved.count
        if moved.count > 0:
            means[name] = moved.sum / moved.count * 1e3
    return Server(counts, means, observations)


def _bunched(gaps_ms: Sequence[float]) -> float:
    return sum(gap < BUNCHED_MS for gap in gaps_ms) / len(gaps_ms) if gaps_ms else math.nan


def ramplab_client(rows: Sequence[dict[str, Any]], exit_code: int = 0) -> Client:
    """ramplab's figures from its records (``docs/records.md``): TTFT and E2E from the send
    (``ttft_send_ms``, ``ttlt_send_ms``), TPOT per stream; tokens from the server's ``usage``."""
    good = [r for r in rows if r["ok"] and r["ttft_send_ms"] is not None]
    means = {
        "ttft": statistics.fmean(r["ttft_send_ms"] for r in good),
        "tpot": statistics.fmean(r["tpot_ms"] for r in good),
        "e2e": statistics.fmean(r["ttlt_send_ms"] for r in good),
    }
    counts = {
        "requests": float(len(good)),
        "prompt_tokens": float(sum(r["prompt_tokens"] for r in good)),
        "generation_tokens": float(sum(r["output_tokens"] for r in good)),
    }
    # One gap per token event after the first (itl_ms repeats a gap once per token of its event).
    gaps = []
    for r in good:
        itl, per_event = r["itl_ms"], r["tokens_per_event"]
        at = 0
        for n in per_event[1:]:
            gaps.append(itl[at] * n)
            at += n
    flagged = sum((r["stamp_error_ms"] or 0.0) > STAMP_MS for r in good)
    return Client(means, counts, len(rows) - len(good), _bunched(gaps), exit_code, flagged)


def vllm_bench_client(result: dict[str, Any]) -> Client:
    """``vllm bench serve``'s figures from its ``--save-result --save-detailed`` JSON: its own
    means, and its token totals (from each stream's ``usage``)."""
    means = {
        "ttft": float(result["mean_ttft_ms"]),
        "tpot": float(result["mean_tpot_ms"]),
        "e2e": float(result["mean_e2el_ms"]),
    }
    counts = {
        "requests": float(result["completed"]),
        "prompt_tokens": float(result["total_input_tokens"]),
        "generation_tokens": float(result["total_output_tokens"]),
    }
    gaps = [gap * 1e3 for stream in result.get("itls", []) for gap in stream]
    return Client(means, counts, int(result["failed"]), _bunched(gaps))


@dataclass(frozen=True)
class Spread:
    """One tool's client − server over its repeats, ms."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else math.nan


@dataclass(frozen=True)
class Comparison:
    """ramplab against ``vllm bench serve`` on one metric at one rate."""

    rate: float
    metric: str
    spreads: dict[str, Spread] = field(default_factory=dict)

    @property
    def delta(self) -> float:
        """ramplab's mean client − server minus vllm bench serve's, ms."""
        return self.spreads["ramplab"].mean - self.spreads["vllm-bench"].mean

    @property
    def standard_error(self) -> float:
        """Of ``delta``, from the two tools' run-to-run spreads (Welch)."""
        return math.sqrt(sum(s.std**2 / len(s.values) for s in self.spreads.values()))

    @property
    def within_noise(self) -> bool | None:
        """The tools differ by no more than twice what repeating the runs moves ``delta`` by;
        None when a tool has fewer than two runs to tell its noise from."""
        if math.isnan(self.standard_error):
            return None
        return abs(self.delta) <= 2 * self.standard_error


def stalled(runs: Sequence[Run]) -> list[Run]:
    """The runs on a stalled engine: by the server's own prefill time, not by any client's."""
    prefills = [r.server.means_ms["prefill"] for r in runs if "prefill" in r.server.means_ms]
    if not prefills:
        return []
    limit = STALLED * statistics.median(prefills)
    return [r for r in runs if r.server.means_ms.get("prefill", 0.0) > limit]


def compare(runs: Sequence[Run]) -> list[Comparison]:
    """Per rate and metric, over the runs that were not ``stalled``."""
    left_out = {id(r) for r in stalled(runs)}
    runs = [r for r in runs if id(r) not in left_out]
    out = []
    for rate in sorted({r.rate for r in runs}):
        for metric in METRICS:
            spreads = {
                tool: Spread(
                    tuple(r.diff(metric) for r in runs if r.tool == tool and r.rate == rate)
                )
                for tool in TOOLS
            }
            out.append(Comparison(rate, metric, spreads))
    return out


def _ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.1f}"


def _signed(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.1f}"


def table(runs: Sequence[Run]) -> list[str]:
    stalls = {id(r) for r in stalled(runs)}
    header = "| tool | rate /s | repeat | n | load | "
    header += " | ".join(
        f"client {LABELS[m]} | server {SERVER_LABELS[m]} | Δ {LABELS[m]}" for m in METRICS
    )
    header += " | server queue / prefill / decode | tokens = server | bunched | flagged |"
    lines = [header, "|---|---:|---:|---:|---:|" + "---:|" * 9 + "---|---|---:|---:|"]
    for r in runs:
        tool = r.tool if not r.client.exit_code else f"{r.tool} (exit {r.client.exit_code})"
        if r.client.failed:
            tool += f", {r.client.failed} failed"
        if id(r) in stalls:
            tool += " (stalled)"
        cells = [tool, f"{r.rate:g}", str(r.repeat), f"{r.client.counts['requests']:.0f}"]
        cells.append(f"{r.load[0]:.1f}–{r.load[1]:.1f}")
        for m in METRICS:
            server_ms = r.server.means_ms[SERVER_HISTOGRAM[m]]
            cells += [_ms(r.client.means_ms[m]), _ms(server_ms), _signed(r.diff(m))]
        phases = " / ".join(_ms(r.server.means_ms.get(p, math.nan)) for p in PHASES)
        cells += [phases, "yes" if r.tokens_equal else "**no**", f"{r.client.bunched:.0%}"]
        cells.append("–" if r.client.flagged is None else str(r.client.flagged))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary(comparisons: Sequence[Comparison]) -> list[str]:
    lines = [
        "| rate /s | metric | ramplab Δ mean (std, min–max) | vllm bench Δ mean (std, min–max) "
        "| ramplab − vllm bench | 2 × its std error | within noise |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for c in comparisons:
        cells = [f"{c.rate:g}", f"{LABELS[c.metric]} ms"]
        for tool in TOOLS:
            s = c.spreads[tool]
            cells.append(
                f"{_signed(s.mean)} ({_ms(s.std)}, {_signed(min(s.values))}–"
                f"{_signed(max(s.values))}, {len(s.values)} runs)"
            )
        noise = {True: "yes", False: "**no**", None: "n/a"}[c.within_noise]
        cells += [_signed(c.delta), _ms(2 * c.standard_error), noise]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _tokens_line(runs: Sequence[Run]) -> str:
    parts = []
    for tool in TOOLS:
        own = [r for r in runs if r.tool == tool]
        equal = sum(r.tokens_equal for r in own)
        total = {k: sum(r.client.counts[k] for r in own) for k in TOKENS}
        served = {k: sum(r.server.counts[k] for r in own) for k in TOKENS}
        parts.append(
            f"{tool}: {equal} of {len(own)} runs equal to the counters ({total['requests']:.0f} "
            f"requests, {total['prompt_tokens']:.0f} prompt and "
            f"{total['generation_tokens']:.0f} generated tokens reported; the server counted "
            f"{served['requests']:.0f}, {served['prompt_tokens']:.0f} and "
            f"{served['generation_tokens']:.0f})"
        )
    hits = sum(r.server.counts["prefix_hits"] for r in runs)
    return "Tokens: " + "; ".join(parts) + f". Prefix-cache hits over all runs: {hits:.0f} tokens."


def section(runs: Sequence[Run], context: str) -> str:
    comparisons = compare(runs)
    beyond = [c for c in comparisons if c.within_noise is False]
    stalls = stalled(runs)
    if beyond:
        verdict = (
            "The tools differ beyond the run-to-run noise on "
            + ", ".join(
                f"{LABELS[c.metric]} at {c.rate:g}/s ({_signed(c.delta)} ms)" for c in beyond
            )
            + "; on every other metric and rate the difference is within it (or, with fewer "
            "than two runs of a tool, cannot be judged)."
        )
    else:
        verdict = (
            "On every metric at every rate the difference between the tools is within the "
            "run-to-run noise."
        )
    lines = [
        "## Truth and a peer on a real engine: ramplab and `vllm bench serve` against vLLM",
        "",
        context,
        "",
        *table(runs),
        "",
        "Per tool, rate and metric, Δ = client − server over the repeats; *ramplab − vllm bench* "
        "is the difference of the two tools' mean Δ, judged *within noise* when it is at most "
        "twice its standard error (from the two tools' run-to-run std, Welch). *stalled*: a run "
        f"whose server-side mean prefill was over {STALLED:g} × the median run's, an engine that "
        f"stopped ({len(stalls)} of {len(runs)} runs here); left out of this summary.",
        "",
        *summary(comparisons),
        "",
        verdict,
        "",
        _tokens_line(runs),
        "",
    ]
    return "\n".join(lines)
