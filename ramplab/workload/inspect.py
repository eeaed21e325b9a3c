"""``ramplab dataset inspect``: what a dataset would send — prompt and output lengths.

Histograms use power-of-two bins (``[1, 2)``, ``[2, 4)``, … ``[512, 1024)``): LLM request lengths
spread over orders of magnitude, and a request's cost grows with its length class, not its exact
count. Percentiles are exact (numpy's linear interpolation) over every kept prompt. The
tokenizer is named in every output (``approx`` unless ``--tokenizer`` says otherwise), since the
same file counts differently with each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from ramplab.workload.dataset import Dataset, lengths

__all__ = ["histogram", "print_inspection", "to_json"]

_BAR = 40


def histogram(values: Sequence[int]) -> list[dict[str, int]]:
    """``[{"low", "high", "count"}, …]``: power-of-two bins from the smallest to the largest
    value, empty bins in between kept (a gap in a distribution is information)."""
    if not values:
        return []
    counts = Counter(max(int(v), 0).bit_length() for v in values)  # bin b holds [2^(b-1), 2^b)
    bins = range(min(counts), max(counts) + 1)
    return [
        {"low": 0 if b == 0 else 1 << (b - 1), "high": 1 << b, "count": counts.get(b, 0)}
        for b in bins
    ]


def _stats(values: Sequence[int]) -> dict[str, Any]:
    if not values:
        return {"count": 0, "histogram": []}
    arr = np.asarray(values, dtype=np.float64)
    p50, p90, p99 = (float(v) for v in np.percentile(arr, [50, 90, 99]))
    return {
        "count": len(values),
        "sum": int(arr.sum()),
        "min": int(arr.min()),
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": int(arr.max()),
        "mean": float(arr.mean()),
        "histogram": histogram(values),
    }


def to_json(dataset: Dataset) -> dict[str, Any]:
    prompts, outputs = lengths(dataset.entries)
    return {
        "file": str(dataset.path),
        "format": dataset.format,
        "tokenizer": dataset.tokenizer,
        "read": dataset.read,
        "skipped": dict(Counter(s.why for s in dataset.skipped)),
        "filtered_out": dataset.filtered,
        "kept": len(dataset),
        "prompt_tokens": _stats(prompts),
        "output_tokens": _stats(outputs),
    }


def _table(title: str, stats: dict[str, Any]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("tokens", justify="right")
    table.add_column("prompts", justify="right")
    table.add_column("", min_width=_BAR)
    peak = max((b["count"] for b in stats["histogram"]), default=1) or 1
    for b in stats["histogram"]:
        bar = "█" * round(_BAR * b["count"] / peak)
        span = str(b["low"]) if b["high"] - b["low"] == 1 else f"{b['low']}–{b['high'] - 1}"
        table.add_row(span, str(b["count"]), bar)
    if stats["count"]:
        table.caption = (
            f"n {stats['count']} · min {stats['min']} · p50 {stats['p50']:.0f} · "
            f"p90 {stats['p90']:.0f} · p99 {stats['p99']:.0f} · max {stats['max']} · "
            f"mean {stats['mean']:.1f}"
        )
    return table


def print_inspection(console: Console, dataset: Dataset) -> None:
    data = to_json(dataset)
    skipped = ", ".join(f"{n} {why}" for why, n in data["skipped"].items()) or "none"
    console.print(
        f"{data['file']} · format {data['format']} · tokenizer [bold]{data['tokenizer']}[/] · "
        f"{data['read']} read, skipped: {skipped}, {data['filtered_out']} filtered out, "
        f"{data['kept']} kept",
        highlight=False,
    )
    console.print(_table(f"Prompt tokens ({data['tokenizer']})", data["prompt_tokens"]))
    if data["output_tokens"]["count"]:
        console.print(_table(f"Output tokens ({data['tokenizer']})", data["output_tokens"]))
    else:
        console.print("no output lengths in this file (no answers, no output_tokens)")
