"""What each part of ``study.py`` measured, read back from its run directories as Markdown.

The figures come from ramplab's own files — ``requests.parquet`` (every request, with the
server's ``cached_tokens``), ``summary.json`` (per step, and vLLM's ``/metrics`` scraped through
the run into ``engine``), ``recommendations.json`` (the report's verdict) and ``search.json``
— so they can be computed again from a saved study with ``python -m bench.engine study
--findings-only``. The rules that decide something (a hit expected, a knee) are the pure
functions at the top, tested without an engine.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import yaml

from ramplab.results.digest import iter_records, step_shape
from ramplab.results.steps import group_measured
from ramplab.results.summary import RunSummary
from ramplab.runs.rundir import RunDir
from ramplab.study.decay.knee import MIN_STREAMS, find_knee
from ramplab.study.decay.steps import stream_rate
from ramplab.study.needle.analysis import collect
from ramplab.study.needle.model import Row, fit_ttft

Runs = Sequence[Mapping[str, Any]]
Findings = tuple[dict[str, Any], str]

TTFT_KNEE = 2.0  # a step's TTFT p50 this many times the plateau's: the queue has formed


# --- rules -----------------------------------------------------------------------------------


def expected_hit(arrival: int, prefixes: int, per_prefix: int) -> bool:
    """Whether arrival ``arrival`` can find its shared prefix cached: every arrival but the
    first use of each prefix of its generation (docs/workloads.md#shared-prefixes)."""
    return arrival % (prefixes * per_prefix) >= prefixes


@dataclass(frozen=True)
class Accounting:
    """ramplab's per-request cache figures against the server's counters over one run."""

    requests: int
    expected_hits: int  # by arrival index
    hits: int  # requests with cached_tokens > 0
    cached_tokens: int  # Σ over the records
    prompt_tokens: int
    server_hits: float  # the counters' increase over the run
    server_queries: float
    ttft_hit_ms: float | None  # median, requests with a hit
    ttft_miss_ms: float | None  # median, requests without

    @property
    def exact(self) -> bool:
        return self.cached_tokens == self.server_hits and self.prompt_tokens == self.server_queries

    @property
    def token_hit_ratio(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    @property
    def saved_ms(self) -> float | None:
        if self.ttft_hit_ms is None or self.ttft_miss_ms is None:
            return None
        return self.ttft_miss_ms - self.ttft_hit_ms


@dataclass(frozen=True)
class Request:
    arrival: int | None
    prompt_tokens: int
    cached_tokens: int
    ttft_ms: float | None


def account(
    requests: Sequence[Request],
    server_hits: float,
    server_queries: float,
    prefixes: int,
    per_prefix: int,
) -> Accounting:
    hit = [r.ttft_ms for r in requests if r.cached_tokens > 0 and r.ttft_ms is not None]
    miss = [r.ttft_ms for r in requests if r.cached_tokens == 0 and r.ttft_ms is not None]
    return Accounting(
        requests=len(requests),
        expected_hits=sum(
            1
            for r in requests
            if r.arrival is not None and expected_hit(r.arrival, prefixes, per_prefix)
        ),
        hits=sum(1 for r in requests if r.cached_tokens > 0),
        cached_tokens=sum(r.cached_tokens for r in requests),
        prompt_tokens=sum(r.prompt_tokens for r in requests),
        server_hits=server_hits,
        server_queries=server_queries,
        ttft_hit_ms=median(hit) if hit else None,
        ttft_miss_ms=median(miss) if miss else None,
    )


def ttft_knee(offered: Sequence[float], ttft_p50: Sequence[float | None]) -> float | None:
    """The first offered rate whose TTFT p50 is ``TTFT_KNEE`` × the plateau's (the median of
    the three lowest steps'), ``None`` when none is: where requests start to wait."""
    points = [(x, y) for x, y in zip(offered, ttft_p50, strict=True) if y is not None]
    if len(points) < 4:
        return None
    plateau = median(y for _, y in points[:3])
    return next((x for x, y in points[3:] if y >= TTFT_KNEE * plateau), None)


def quantile(values: Iterable[float], q: float) -> float | None:
    array = np.fromiter(values, dtype=np.float64)
    return float(np.percentile(array, q)) if array.size else None


# --- reading --------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _load_line(run: Mapping[str, Any]) -> str:
    before = ", ".join(f"{v:.1f}" for v in run["load_before"])
    after = ", ".join(f"{v:.1f}" for v in run["load_after"])
    return (
        f"`{run['command']}` (vLLM `{' '.join(run['server_arguments'])}`, ready in "
        f"{run['server_ready_s']} s), {run['started_utc']}, exit {run['exit_code']}, "
        f"{run['seconds']} s; load average (1, 5, 15 min) {before} before, {after} after"
    )


def _runs_of(directory: Path) -> list[Path]:
    """The run directories of an experiment directory, or the directory itself for one run."""
    if (directory / "summary.json").exists():
        return [directory]
    return sorted(p.parent for p in directory.glob("*/summary.json"))


def _needle_grid(rows: Sequence[Row]) -> tuple[str, dict[str, Any]]:
    cells: dict[tuple[int, float], list[Row]] = defaultdict(list)
    for row in rows:
        cells[(row.length, row.depth)].append(row)
    lengths = sorted({k[0] for k in cells})
    depths = sorted({k[1] for k in cells})
    head = "| context tokens | " + " | ".join(f"{d:.0%}" for d in depths) + " |"
    lines = [head, "|---" * (len(depths) + 1) + "|"]
    data: dict[str, Any] = {}
    for length in lengths:
        out = []
        for depth in depths:
            cell = cells.get((length, depth), [])
            p50 = quantile((r.ttft_send_ms for r in cell), 50)
            p90 = quantile((r.ttft_send_ms for r in cell), 90)
            cached = [r.cached_tokens for r in cell if r.cached_tokens is not None]
            mean_cached = sum(cached) / len(cached) if cached else None
            data[f"{length}@{depth}"] = {
                "n": len(cell), "ttft_p50_ms": p50, "ttft_p90_ms": p90, "cached_mean": mean_cached
            }  # fmt: skip
            out.append(f"{_fmt(p50)} / {_fmt(p90)} ({_fmt(mean_cached)})")
        lines.append(f"| {length:,} | " + " | ".join(out) + " |")
    return "\n".join(lines), data


def needle(runs: Runs) -> Findings:
    text = ["## §3.2 on vLLM: context length × needle depth", ""]
    data: dict[str, Any] = {"variants": {}}
    for run in runs:
        text.append(f"- {run['label']}: {_load_line(run)}")
    text.append("")
    for run in runs:
        for variant in collect(Path(run["directory"]), []):
            name = f"{run['label']}/{variant.name}"
            grid, cells = _needle_grid(variant.rows)
            lengths = sorted({r.length for r in variant.rows})
            cold = [r for r in variant.rows if not r.cached_tokens]
            medians = [
                quantile((r.ttft_send_ms for r in cold if r.length == n), 50) for n in lengths
            ]
            pairs = [(n, m) for n, m in zip(lengths, medians, strict=True) if m is not None]
            fit = fit_ttft([n for n, _ in pairs], [m for _, m in pairs])
            data["variants"][name] = {
                "requests": len(variant.rows), "cells": cells,
                "cold_median_by_length": dict(pairs),
                "fit": None if fit is None else {
                    "a_ms": fit.intercept_ms, "b_ms_per_token": fit.per_token_ms,
                    "c_ms_per_token2": fit.per_token_sq_ms, "rmse_ms": fit.rmse_ms,
                },
            }  # fmt: skip
            text += [
                f"### {name}: TTFT from the send p50 / p90 ms (mean cached tokens), "
                f"{len(variant.rows)} measured requests",
                "",
                grid,
                "",
            ]
            effect = _depth_effect(cells, lengths)
            data["variants"][name]["depth_effect"] = effect
            text.append(
                "The deepest needle's TTFT p50 against the shallowest's, by length: "
                + ", ".join(f"{n:,}: {e:+.0%}" for n, e in effect.items())
                + "."
            )
            text.append("")
            if fit is not None:
                text.append(
                    "Median TTFT of the requests with nothing cached, by length: "
                    + ", ".join(f"{n:,}: {m:.0f} ms" for n, m in pairs)
                    + f"; fitted a + b·P + c·P² over those medians: a = {fit.intercept_ms:.1f} "
                    f"ms, b = {fit.per_token_ms * 1e3:.1f} ms per 1K tokens, c = "
                    f"{fit.per_token_sq_ms * 1e6:.1f} ms per (1K tokens)², RMSE "
                    f"{fit.rmse_ms:.1f} ms."
                )
                text.append("")
    return data, "\n".join(text) + "\n"


def _depth_effect(cells: Mapping[str, Any], lengths: Sequence[int]) -> dict[int, float]:
    effect = {}
    for length in lengths:
        depths = sorted(float(k.split("@")[1]) for k in cells if k.startswith(f"{length}@"))
        shallow = cells[f"{length}@{depths[0]}"]["ttft_p50_ms"]
        deep = cells[f"{length}@{depths[-1]}"]["ttft_p50_ms"]
        if shallow and deep is not None:
            effect[length] = deep / shallow - 1.0
    return effect


def _shared_prefix(run_dir: Path) -> tuple[int, int, int]:
    campaign: Any = yaml.safe_load(RunDir(run_dir).campaign.read_text(encoding="utf-8"))
    spec = campaign["workload"]["shared_prefix"]
    return int(spec["prefixes"]), int(spec["prefix_tokens"]), int(spec["requests_per_prefix"])


def prefix(runs: Runs) -> Findings:
    text = ["## Shared prefixes on vLLM: ramplab's cached tokens against vLLM's counters", ""]
    for run in runs:
        text.append(f"- {run['label']}: {_load_line(run)}")
    text += [
        "",
        "| variant | prefix tokens × requests each | requests | hits expected / seen | "
        "Σ cached_tokens (ramplab) | Δ prefix_cache_hits (vLLM) | Σ prompt_tokens | "
        "Δ prefix_cache_queries | equal | token hit ratio | TTFT p50 miss / hit ms | saved |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    data: dict[str, Any] = {"variants": {}}
    for run in runs:
        for run_dir in _runs_of(Path(run["directory"])):
            summary = json.loads((run_dir / "summary.json").read_text())
            engine = summary.get("engine") or {}
            prefixes, tokens, per_prefix = _shared_prefix(run_dir)
            requests = [
                Request(r.arrival, r.prompt_tokens or 0, r.cached_tokens or 0, r.ttft_send_ms)
                for r in iter_records(RunDir(run_dir).records)
                if r.ok
            ]
            got = account(
                requests,
                float(engine.get("prefix_hits") or 0.0),
                float(engine.get("prefix_queries") or 0.0),
                prefixes,
                per_prefix,
            )
            name = run_dir.name.split("-", 1)[1].rsplit("-r", 1)[0]
            saved = got.saved_ms
            share = f"{saved:.0f} ms ({saved / got.ttft_miss_ms:.0%})" if (
                saved is not None and got.ttft_miss_ms) else "-"  # fmt: skip
            text.append(
                f"| {name} | {tokens:,} × {per_prefix} | {got.requests} | {got.expected_hits} "
                f"/ {got.hits} | {got.cached_tokens:,} | {got.server_hits:,.0f} | "
                f"{got.prompt_tokens:,} | {got.server_queries:,.0f} | "
                f"{'yes' if got.exact else '**no**'} | {_fmt(got.token_hit_ratio, 3)} | "
                f"{_fmt(got.ttft_miss_ms)} / {_fmt(got.ttft_hit_ms)} | {share} |"
            )
            data["variants"][name] = {
                **got.__dict__, "exact": got.exact, "token_hit_ratio": got.token_hit_ratio,
                "saved_ms": saved, "prefix_tokens": tokens, "prefixes": prefixes,
                "requests_per_prefix": per_prefix,
            }  # fmt: skip
    return data, "\n".join(text) + "\n"


def _step_rates(run_dir: Path, summary: RunSummary) -> list[float | None]:
    shape = step_shape(summary)
    if shape is None:
        return []
    groups = group_measured(iter_records(RunDir(run_dir).records), shape, summary.run_start or 0)
    rates = []
    for group in groups:
        values = [v for v in (stream_rate(r) for r in group) if v is not None]
        rates.append(median(values) if len(values) >= MIN_STREAMS else None)
    return rates


def _verdict_knee(run_dir: Path) -> str | None:
    path = run_dir / "recommendations.json"
    if not path.exists():
        return None
    lines = json.loads(path.read_text()).get("verdict", {}).get("lines", {})
    knee = lines.get("knee")
    return str(knee) if knee else None


def _mean(figure: Any) -> float | None:
    return figure.get("mean") if isinstance(figure, Mapping) else None


def decay(runs: Runs) -> Findings:
    text = ["## §4.2 on vLLM: the knee from max_num_seqs", ""]
    data: dict[str, Any] = {"servers": {}}
    for run in runs:
        run_dir = Path(run["directory"])
        raw = json.loads((run_dir / "summary.json").read_text())
        summary = RunSummary.model_validate(raw)
        rates = _step_rates(run_dir, summary)
        offered = [float(step.get("target_qps") or 0.0) for step in raw["steps"]]
        ttft = [step["ttft_ms"].get("p50") for step in raw["steps"]]
        knee = find_knee(offered, rates)
        queue_knee = ttft_knee(offered, ttft)
        verdict = _verdict_knee(run_dir)
        text += [
            f"### {run['label']}",
            "",
            _load_line(run),
            "",
            "| offered QPS | achieved QPS | tokens/s per stream p50 | TTFT p50 / p99 ms | "
            "vLLM TTFT mean ms | vLLM queue mean ms | running mean / max | waiting mean / max |",
            "|---|---|---|---|---|---|---|---|",
        ]
        steps = []
        for step, rate in zip(raw["steps"], rates, strict=False):
            engine = step.get("engine") or {}
            running, waiting = engine.get("running") or {}, engine.get("waiting") or {}
            row = {
                "offered_qps": step.get("target_qps"), "achieved_qps": step.get("achieved_qps"),
                "stream_tokens_per_s": rate, "ttft_p50_ms": step["ttft_ms"].get("p50"),
                "ttft_p99_ms": step["ttft_ms"].get("p99"),
                "server_ttft_mean_ms": _mean(engine.get("ttft_ms")),
                "server_queue_mean_ms": _mean(engine.get("queue_ms")),
                "running": running, "waiting": waiting,
            }  # fmt: skip
            steps.append(row)
            text.append(
                f"| {_fmt(row['offered_qps'], 0)} | {_fmt(row['achieved_qps'], 2)} | "
                f"{_fmt(rate, 0)} | {_fmt(row['ttft_p50_ms'])} / {_fmt(row['ttft_p99_ms'])} | "
                f"{_fmt(row['server_ttft_mean_ms'])} | {_fmt(row['server_queue_mean_ms'])} | "
                f"{_fmt(running.get('mean'), 1)} / {_fmt(running.get('max'))} | "
                f"{_fmt(waiting.get('mean'), 1)} / {_fmt(waiting.get('max'))} |"
            )
        text += [
            "",
            f"- tokens/s knee (the §4.2 rule, `ramplab/study/decay/knee.py`): {knee.describe()}",
            f"- TTFT knee (first step with TTFT p50 ≥ {TTFT_KNEE:g}× the three lowest steps' "
            f"median): {_fmt(queue_knee, 0) + ' QPS' if queue_knee is not None else 'none'}",
            f"- the report's verdict: {verdict or '-'}",
            "",
        ]
        data["servers"][run["label"]] = {
            "steps": steps, "knee": knee.to_json(), "ttft_knee_qps": queue_knee,
            "verdict_knee": verdict,
        }  # fmt: skip
    return data, "\n".join(text) + "\n"


def search(runs: Runs) -> Findings:
    """The search's own report (``search.md``: every probe, the bracket, the answer)."""
    text = ["## The search under a TTFT SLO on vLLM", ""]
    data: dict[str, Any] = {}
    for run in runs:
        text += [_load_line(run), ""]
        found = sorted(Path(run["directory"]).glob("**/search.json"))
        if not found:
            text.append("no search.json: the search did not finish")
            continue
        result = json.loads(found[0].read_text())
        data[run["label"]] = {"answer": result.get("answer"), "probes": result.get("probes")}
        report = found[0].with_name("search.md")
        if report.exists():
            text.append(report.read_text())
    return data, "\n".join(text) + "\n"


PARTS: dict[str, Callable[[Runs], Findings]] = {
    "needle": needle,
    "prefix": prefix,
    "decay": decay,
    "search": search,
}
