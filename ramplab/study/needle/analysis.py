"""§3.2 Long-context needle heatmap: TTFT and TTLT per (context length, needle depth).

The campaign (``campaigns/needle.yaml``) sends needle contexts (``ramplab/workload/needle.py``)
whose cell every record names in ``prompt_labels``; one run per variant covers the whole grid,
so a cell's figures come from exactly its own requests. Per variant this analysis gives:

* the heatmaps of median TTFT and median TTLT (plotly, ``x`` depth, ``y`` context length) and the
  table behind them, with the mean ``cached_tokens`` the server reported when it did;
* the fit of TTFT against context length (``needle_model.fit_ttft``) over the requests that had
  nothing cached (every request of a variant without a prefix cache, the depth-0 requests of one
  with it), beside the prefill model the run's campaign configured on the reference target;
* the effect of depth: per length, the deepest needle's median TTFT over the shallowest's — with
  a shared prefix cached, a deep needle leaves more of its prompt cached; without, depth should
  not matter — and what the configured model predicts for it.

A request counts when it counts in its run's summary (its stage's measured window: the warm-up
keeps the cold first requests of each length out), succeeded, and carries its cell. TTFT and
TTLT are from the intended start, as everywhere in ramplab; the fit uses ``ttft_send_ms`` so the
generator's own lateness is not read as prefill.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
import yaml

from ramplab.experiment.sources import expand
from ramplab.experiment.study_result import StudyResult, StudyTable
from ramplab.results.digest import iter_records, step_shape
from ramplab.results.steps import group_measured
from ramplab.results.summary import RunSummary
from ramplab.runs.rundir import RunDir
from ramplab.study.needle.model import (
    Cell,
    Fit,
    PrefillModel,
    Row,
    cells,
    expected_cached,
    fit_ttft,
)

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["Variant", "analyse", "study_result"]

TITLE = "§3.2 Long-context needle heatmap"


@dataclass(frozen=True)
class Variant:
    """One variant's requests and what its campaign configured on the reference target."""

    name: str
    rows: list[Row]
    model: PrefillModel | None  # None: no target settings (an external endpoint)
    cache_on: bool  # the target's prefix cache, or any cached_tokens reported
    shared: bool  # workload.needle.shared_prefix
    block: int  # prefix_cache.block_tokens


def _get(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def _rows(run_dir: Path, summary: RunSummary) -> tuple[list[Row], Counter[str]]:
    """The measured requests' rows, and why the others were left out (their error kind, or
    ``no cell``: no needle label or no timing)."""
    shape = step_shape(summary)
    if shape is None:
        return [], Counter()
    measured = group_measured(
        iter_records(RunDir(run_dir).records), shape, summary.run_start or 0.0
    )
    rows: list[Row] = []
    skipped: Counter[str] = Counter()
    for record in (r for stage in measured for r in stage):
        labels = record.prompt_labels
        if (
            not record.ok
            or "needle_length" not in labels
            or record.ttft_ms is None
            or record.ttlt_ms is None
            or record.ttft_send_ms is None
        ):
            skipped[record.error_kind or "no cell"] += 1
            continue
        cached = getattr(record, "cached_tokens", None)  # reported usage, when recorded
        rows.append(
            Row(
                int(labels["needle_length"]),
                float(labels["needle_depth"]),
                int(labels["needle_position"]),
                record.ttft_ms,
                record.ttlt_ms,
                record.ttft_send_ms,
                cached if isinstance(cached, int) else None,
            )
        )
    return rows, skipped


def collect(directory: Path, notes: list[str]) -> list[Variant]:
    variants: list[Variant] = []
    for group in expand([directory], notes):
        rows: list[Row] = []
        campaign: Any = {}
        skipped: Counter[str] = Counter()
        for run in group.runs:
            campaign = yaml.safe_load((RunDir(run.path).campaign).read_text(encoding="utf-8"))
            found, left = _rows(run.path, RunSummary.from_json(run.summary))
            rows += found
            skipped += left
        if skipped:
            why = ", ".join(f"{kind}: {count}" for kind, count in sorted(skipped.items()))
            notes.append(f"{group.name}: {skipped.total()} measured requests left out ({why})")
        settings = _get(campaign, "target.settings")
        latency = _get(settings, "latency") if isinstance(settings, Mapping) else None
        reported = any(r.cached_tokens for r in rows)
        variants.append(
            Variant(
                name=group.name,
                rows=rows,
                model=PrefillModel.from_settings(latency or {}) if settings is not None else None,
                cache_on=bool(_get(settings, "prefix_cache.enabled")) or reported,
                shared=_get(campaign, "workload.needle.shared_prefix") is not False,
                block=int(_get(settings, "prefix_cache.block_tokens") or 16),
            )
        )
    return variants


def _uncached(variant: Variant) -> list[Row]:
    """The requests that could have found nothing cached."""
    if variant.cache_on and variant.shared:
        return [r for r in variant.rows if r.position == 0]
    return variant.rows


def _heatmap(
    variant: Variant, grid: Mapping[tuple[int, float], Cell], metric: str
) -> dict[str, Any]:
    lengths = sorted({k[0] for k in grid})
    depths = sorted({k[1] for k in grid})
    z = [[getattr(grid[n, d], metric) if (n, d) in grid else None for d in depths]
         for n in lengths]  # fmt: skip
    label = "TTFT" if metric == "ttft_ms" else "TTLT"
    fig = go.Figure(
        go.Heatmap(
            x=[f"{100 * d:g} %" for d in depths],
            y=[f"{n:,}" for n in lengths],
            z=z,
            colorscale="Viridis",
            colorbar={"title": {"text": f"{label} p50 ms"}},
            texttemplate="%{z:.0f}",
            hovertemplate="length %{y} tokens, depth %{x}: %{z:.1f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{label} p50 (ms) — {variant.name}",
        xaxis_title="needle depth",
        yaxis_title="context length (tokens)",
        yaxis={"type": "category"},
    )
    chart: dict[str, Any] = fig.to_plotly_json()
    return chart


def _cell_table(variant: Variant, grid: Mapping[tuple[int, float], Cell]) -> StudyTable:
    rows: list[list[Any]] = []
    for cell in grid.values():
        predicted: float | None = None
        if variant.model is not None:
            position = [r.position for r in variant.rows if (r.length, r.depth) ==
                        (cell.length, cell.depth)]  # fmt: skip
            cached = (
                expected_cached(int(sum(position) / len(position)), cell.length, variant.block)
                if variant.cache_on and variant.shared and position
                else 0
            )
            predicted = round(variant.model.prefill_ms(cell.length, cached), 1)
        rows.append([
            cell.length, f"{100 * cell.depth:g} %", cell.count, round(cell.ttft_ms, 1),
            round(cell.ttlt_ms, 1), predicted,
            None if cell.cached_tokens is None else round(cell.cached_tokens),
        ])  # fmt: skip
    headers = ["context tokens", "depth", "requests", "TTFT p50 ms", "TTLT p50 ms",
               "model prefill ms", "cached tokens (reported, mean)"]  # fmt: skip
    if all(cell.cached_tokens is None for cell in grid.values()):
        # The server reported no cached_tokens (or the records do not carry them): no column.
        headers, rows = headers[:-1], [row[:-1] for row in rows]
    return StudyTable(f"{variant.name}: median TTFT and TTLT per cell", headers, rows)


def _fit_table(fits: Sequence[tuple[Variant, Fit]]) -> StudyTable:
    rows: list[list[Any]] = []
    for variant, fit in fits:
        model = variant.model
        rows.append([
            variant.name, fit.n,
            f"{fit.intercept_ms:.1f} ± {fit.intercept_half_ms:.1f}",
            f"{fit.per_token_ms * 1e3:.4f} ± {fit.per_token_half_ms * 1e3:.4f}",
            f"{fit.per_token_sq_ms * 1e9:.3f} ± {fit.per_token_sq_half_ms * 1e9:.3f}",
            round(fit.rmse_ms, 2), round(fit.linear_rmse_ms, 2),
            None if model is None else model.overhead_ms,
            None if model is None else round(model.per_token_ms * 1e3, 4),
            None if model is None else round(model.per_token_sq_ms * 1e9, 3),
        ])  # fmt: skip
    return StudyTable(
        "TTFT against context length: fitted (95 %) vs configured",
        ["variant", "requests", "a ms", "b ms/1K tokens", "c ms/(1M tokens²)",
         "RMSE ms", "linear fit RMSE ms", "configured overhead ms", "configured ms/1K tokens",
         "configured ms/(1M tokens²)"],
        rows,
    )  # fmt: skip


def _depth_effect(variant: Variant, grid: Mapping[tuple[int, float], Cell]) -> list[dict[str, Any]]:
    out = []
    for length in sorted({k[0] for k in grid}):
        depths = sorted(d for n, d in grid if n == length)
        if len(depths) < 2:
            continue
        shallow, deep = grid[length, depths[0]], grid[length, depths[-1]]
        positions = [
            r.position for r in variant.rows if (r.length, r.depth) == (length, depths[-1])
        ]
        predicted: float | None = None
        if variant.model is not None and variant.cache_on and variant.shared and positions:
            cached = expected_cached(max(positions), length, variant.block)
            cold = variant.model.prefill_ms(length)
            predicted = variant.model.prefill_ms(length, cached) / cold - 1.0
        elif variant.model is not None:
            predicted = 0.0
        out.append({
            "length": length, "shallow_depth": depths[0], "deep_depth": depths[-1],
            "shallow_ttft_ms": shallow.ttft_ms, "deep_ttft_ms": deep.ttft_ms,
            "change": deep.ttft_ms / shallow.ttft_ms - 1.0 if shallow.ttft_ms > 0 else None,
            "model_change": predicted,
        })  # fmt: skip
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} %"


def _conclusions(
    fits: Sequence[tuple[Variant, Fit]], effects: Mapping[str, list[dict[str, Any]]],
    variants: Sequence[Variant],
) -> list[str]:  # fmt: skip
    out: list[str] = []
    for variant, fit in fits:
        text = (
            f"{variant.name}: TTFT (from the send) over {fit.n} requests with nothing cached "
            f"fits a + b·P + c·P² with b = {fit.per_token_ms * 1e3:.4f} ± "
            f"{fit.per_token_half_ms * 1e3:.4f} ms per 1K tokens and c = "
            f"{fit.per_token_sq_ms * 1e9:.3f} ± {fit.per_token_sq_half_ms * 1e9:.3f} ms per "
            f"(1M tokens)² (95 %), RMSE {fit.rmse_ms:.1f} ms against {fit.linear_rmse_ms:.1f} ms "
            "for the best straight line"
        )
        if variant.model is not None:
            m = variant.model
            text += (
                f"; the target was configured with {m.per_token_ms * 1e3:.4f} ms per 1K tokens "
                f"and {m.per_token_sq_ms * 1e9:.3f} ms per (1M tokens)², overhead "
                f"{m.overhead_ms:g} ms (fitted a = {fit.intercept_ms:.1f} ms: the rest is the "
                "request's trips and the server's parsing)"
            )
        out.append(text + ".")
    for variant in variants:
        rows = effects.get(variant.name) or []
        if not rows:
            continue
        longest = rows[-1]
        biggest = max((abs(r["change"]) for r in rows if r["change"] is not None), default=0.0)
        kind = "with its prefix cache and a shared haystack" if (
            variant.cache_on and variant.shared) else "without a cached shared prefix"  # fmt: skip
        out.append(
            f"{variant.name} ({kind}): at {longest['length']:,} tokens a needle at "
            f"{100 * longest['deep_depth']:g} % has median TTFT {longest['deep_ttft_ms']:.1f} ms "
            f"against {longest['shallow_ttft_ms']:.1f} ms at {100 * longest['shallow_depth']:g} % "
            f"({_pct(longest['change'])}; the configured model predicts "
            f"{_pct(longest['model_change'])}); over all lengths depth moved the median TTFT "
            f"by at most {100 * biggest:.1f} %."
        )
    return out


def study_result(variants: Sequence[Variant], notes: list[str]) -> StudyResult:
    """Tables, heatmaps, conclusions and data of the variants' grids."""
    tables: list[StudyTable] = []
    charts: list[dict[str, Any]] = []
    fits: list[tuple[Variant, Fit]] = []
    effects: dict[str, list[dict[str, Any]]] = {}
    data: dict[str, Any] = {"variants": {}}
    for variant in variants:
        if not variant.rows:
            notes.append(f"{variant.name}: no measured needle request")
            continue
        grid = cells(variant.rows)
        charts += [_heatmap(variant, grid, "ttft_ms"), _heatmap(variant, grid, "ttlt_ms")]
        tables.append(_cell_table(variant, grid))
        uncached = _uncached(variant)
        fit = fit_ttft([r.length for r in uncached], [r.ttft_send_ms for r in uncached])
        if fit is None:
            notes.append(f"{variant.name}: too few lengths or requests without a cache hit to fit")
        else:
            fits.append((variant, fit))
        effects[variant.name] = _depth_effect(variant, grid)
        data["variants"][variant.name] = {
            "cells": [asdict(c) for c in grid.values()],
            "fit": None if fit is None else asdict(fit),
            "model": None if variant.model is None else asdict(variant.model),
            "cache_on": variant.cache_on,
            "shared_prefix": variant.shared,
            "depth_effect": effects[variant.name],
        }
    if fits:
        tables.insert(0, _fit_table(fits))
    depth_rows = [
        [name, e["length"], f"{100 * e['deep_depth']:g} % vs {100 * e['shallow_depth']:g} %",
         round(e["deep_ttft_ms"], 1), round(e["shallow_ttft_ms"], 1), _pct(e["change"]),
         _pct(e["model_change"])]
        for name, rows in effects.items() for e in rows
    ]  # fmt: skip
    if depth_rows:
        tables.append(
            StudyTable(
                "Effect of depth: deepest vs shallowest needle, median TTFT",
                [
                    "variant",
                    "context tokens",
                    "depths",
                    "deep ms",
                    "shallow ms",
                    "measured",
                    "model",
                ],
                depth_rows,
            )
        )
    return StudyResult(
        "needle", TITLE, _conclusions(fits, effects, variants), tables, charts, data, notes
    )


def analyse(directory: Path, manifest: Manifest) -> StudyResult:
    """The needle study of an experiment directory (``study: needle``)."""
    notes: list[str] = []
    return study_result(collect(directory, notes), notes)
