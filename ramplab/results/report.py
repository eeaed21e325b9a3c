"""The report of a run directory: the per-step table, and ``report.md`` beside the results.

The source is ``summary.json`` as the master wrote it. When it is missing (a run killed before
the master could write it) the summary is rebuilt from ``requests.jsonl`` by the same producer
the master uses, with the facts saved in the run directory: the campaign (shape, mode,
arrivals, seed, retry, SLO) and ``progress.json`` (plan start, the workers' dispatched and
dropped counts at the last snapshot). Only what the master alone knew — which worker sent what,
the membership epochs — is missing, and the summary says ``"rebuilt": true``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ramplab.errors import UsageError
from ramplab.load.shapes import Shape, custom
from ramplab.results.htmlreport import write_html
from ramplab.results.producer import EngineCounts, RunFacts, scheduled_counts, summarize
from ramplab.results.slo import Gate, parse_request_slo
from ramplab.results.summary import GateVerdict, RunSummary
from ramplab.results.writer import load_records
from ramplab.stack.campaign import Campaign, CampaignError, load_campaign

__all__ = [
    "gate_rows",
    "interrupted_summary",
    "load_summary",
    "rebuild_summary",
    "steps_table",
    "write_report",
]

CAMPAIGN_FILE = "campaign.yaml"

# Terminal width below which the per-step table is printed as two.
WIDE = 150
# (header, path in a step dict, format)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("step", "index", "{:d}"),
    ("target QPS", "target_qps", "{:g}"),
    ("achieved QPS", "achieved_qps", "{:.2f}"),
    ("dropped", "dropped", "{:d}"),
    ("requests", "requests", "{:d}"),
    ("errors", "errors", ""),
    ("goodput QPS", "goodput_qps", "{:.2f}"),
    ("tokens/s", "output_tokens_per_s", "{:.0f}"),
    ("TTFT p50 ms", "ttft_ms.p50", "{:.1f}"),
    ("TTFT p99 ms", "ttft_ms.p99", "{:.1f}"),
    ("ITL p50 ms", "itl_ms.p50", "{:.2f}"),
    ("TPOT p50 ms", "tpot_ms.p50", "{:.2f}"),
    ("TTLT p99 ms", "ttlt_ms.p99", "{:.1f}"),
)


def _get(step: Mapping[str, Any], path: str) -> Any:
    value: Any = step
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _cell(step: Mapping[str, Any], path: str, fmt: str) -> str:
    value = _get(step, path)
    if path == "errors":
        return ", ".join(f"{k}×{v}" for k, v in sorted(dict(value or {}).items())) or "0"
    if value is None:
        return "-"
    if path == "target_qps" and step.get("target_users") is not None:
        return f"{step['target_users']:g} users"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def rows(summary: RunSummary, columns: Sequence[tuple[str, str, str]] = COLUMNS) -> list[list[str]]:
    """The table's cells, one row per step (shared by the terminal table and report.md)."""
    steps = summary.to_json()["steps"]
    return [[_cell(step, path, fmt) for _, path, fmt in columns] for step in steps]


def steps_table(
    summary: RunSummary,
    title: str = "per-step summary",
    columns: Sequence[tuple[str, str, str]] = COLUMNS,
) -> Table:
    table = Table(title=title, title_justify="left")
    for header, _, _ in columns:
        table.add_column(header, justify="left" if header == "errors" else "right")
    for row in rows(summary, columns):
        table.add_row(*row)
    return table


def print_steps(summary: RunSummary, console: Console, title: str = "per-step summary") -> None:
    """The per-step table; on a narrow terminal as two tables (load, then latencies)."""
    if console.width >= WIDE:
        console.print(steps_table(summary, title))
        return
    split = next(i for i, column in enumerate(COLUMNS) if column[0].startswith("TTFT"))
    console.print(steps_table(summary, f"{title}: load", COLUMNS[:split]))
    console.print(steps_table(summary, f"{title}: latency", (*COLUMNS[:2], *COLUMNS[split:])))


def truncated(shape: Shape, stop_s: float) -> Shape | None:
    """The stages run before ``stop_s``: later ones dropped, the one cut short ending there
    (dropped too when the cut falls in its warm-up: it has no measured window); ``None`` when
    no measured window ran."""
    kept = []
    for st in shape.stages:
        end = min(st.end_s, stop_s)
        if end - st.start_s > st.warmup_s:
            kept.append((st.rate, end - st.start_s, st.warmup_s))
        if st.end_s >= stop_s:
            break
    return custom(kept) if kept else None


def _progress(run_dir: Path) -> dict[str, Any]:
    data = json.loads((run_dir / "progress.json").read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("progress.json is not an object")
    return data


def _counts(progress: Mapping[str, Any], key: str, stages: int) -> list[int] | None:
    # The engine counts per stage up to its end; a cut stage's counts are up to the stop.
    values = progress.get(key)
    if not isinstance(values, list) or len(values) < stages:
        return None
    return [int(v) for v in values[:stages]]


def rebuild_facts(
    campaign: Campaign,
    progress: Mapping[str, Any],
    stopped_at_s: float | None = None,
    gates: Sequence[Gate] = (),
) -> RunFacts | None:
    """The facts the master had, from the saved campaign and progress snapshot; with
    ``stopped_at_s`` over the measured windows that ran before it (``None``: none ran)."""
    plan = campaign.load_shape
    shape = truncated(plan, stopped_at_s) if stopped_at_s is not None else plan
    if shape is None:
        return None
    stages = len(shape.stages)
    # The engine counts per stage up to its end; a cut stage's counts are up to the stop.
    dispatched, dropped = (
        _counts(progress, "dispatched", stages),
        _counts(progress, "dropped", stages),
    )
    counts = EngineCounts(dispatched, dropped) if dispatched and dropped else None
    scheduled = None
    if campaign.mode == "open":
        scheduled = scheduled_counts(plan, campaign.arrivals, campaign.seed, shape)
    retry = campaign.retry.strip() if isinstance(campaign.retry, str) else campaign.retry
    return RunFacts(
        shape=shape,
        run_start=float(progress["run_start"]),
        mode=campaign.mode,
        shape_text=campaign.shape_text(),
        arrivals=campaign.arrivals,
        seed=campaign.seed,
        retry=retry,
        slo=parse_request_slo(campaign.slo),
        scheduled=scheduled,
        counts=counts,
        gates=gates,
        stopped_at_s=stopped_at_s,
        rebuilt=True,
    )


def rebuild_summary(
    run_dir: Path, stopped_at_s: float | None = None, gates: Sequence[Gate] = ()
) -> RunSummary:
    """The summary from ``requests.jsonl``, the saved campaign and ``progress.json``; with
    ``stopped_at_s`` (an interrupted run) over the measured windows that ran before it. The
    ``gates`` are evaluated on it (the master's verdicts are lost with its summary)."""
    requests = run_dir / "requests.jsonl"
    if not requests.is_file():
        raise UsageError("RUN_DIR", f"{run_dir} has neither summary.json nor requests.jsonl")
    try:
        campaign = load_campaign(run_dir / CAMPAIGN_FILE)
        progress = _progress(run_dir)
        facts = rebuild_facts(campaign, progress, stopped_at_s, gates)
    except (CampaignError, OSError, ValueError, KeyError):
        raise UsageError(
            "RUN_DIR", f"{run_dir}: no summary.json, and no {CAMPAIGN_FILE} + progress.json to "
            "rebuild it from requests.jsonl"
        ) from None  # fmt: skip
    if facts is None:
        # Interrupted in the first warm-up: nothing was measured, which the summary says.
        facts = RunFacts(shape=None, run_start=float(progress["run_start"]), rebuilt=True,
                         stopped_at_s=stopped_at_s, gates=gates)  # fmt: skip
        return summarize([], facts).model_copy(update={"steps": ()})
    return summarize(load_records(requests), facts)


def interrupted_summary(
    run_dir: Path, stopped_at: float | None = None, gates: Sequence[Gate] = ()
) -> RunSummary:
    """An interrupted run's summary over what ran before ``stopped_at`` (epoch seconds; default:
    the master's last progress snapshot). The master's ``summary.json`` divides by whole planned
    windows, so it is kept as ``summary.master.json`` and replaced."""
    try:
        progress = _progress(run_dir)
        stop = (stopped_at or float(progress["time"])) - float(progress["run_start"])
    except (OSError, ValueError, KeyError):
        raise UsageError(
            "RUN_DIR", f"{run_dir}: no progress.json, cannot tell when it stopped"
        ) from None
    master = run_dir / "summary.json"
    if master.is_file():
        os.replace(master, run_dir / "summary.master.json")
    summary = rebuild_summary(run_dir, stop, gates)
    summary.write(run_dir / "summary.json")
    return summary


def load_summary(
    run_dir: Path, *, rebuild_if_missing: bool = True, gates: Sequence[Gate] = ()
) -> RunSummary:
    """``summary.json`` of a run directory; rebuilt (with ``gates`` evaluated) when missing and
    possible."""
    path = run_dir / "summary.json"
    if path.is_file():
        summary = RunSummary.read(path)
        if summary.steps or summary.stopped_at_s is not None:
            return summary
    if not rebuild_if_missing:
        raise UsageError("RUN_DIR", f"{run_dir} has no summary.json")
    return rebuild_summary(run_dir, gates=gates)


def _markdown_table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def write_report(run_dir: Path, summary: RunSummary, gates: Sequence[GateVerdict] = ()) -> Path:
    """``report.md`` (what ran, the per-step table, totals, gates) and ``report.html`` (the
    table with charts); both self-contained. Returns the Markdown file's path."""
    data = summary.to_json()
    meta: dict[str, Any] = {}
    meta_path = run_dir / "run.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    parts = [f"# ramplab run `{run_dir.name}`", ""]
    if meta.get("command"):
        parts += ["Command:", "", "```", str(meta["command"]), "```", ""]
    facts = [
        ("campaign", meta.get("campaign")),
        ("target", meta.get("target")),
        ("workers", meta.get("workers")),
        ("mode", summary.mode),
        ("shape", summary.shape),
        ("arrivals", summary.arrivals),
        ("requests", summary.requests),
        ("exit code", meta.get("exit_code")),
    ]
    parts += [f"- {k}: `{v}`" for k, v in facts if v is not None]
    if summary.stopped_at_s is not None:
        parts.append(
            f"- interrupted after {summary.stopped_at_s:.1f} s: steps cover what ran before"
        )
    elif summary.rebuilt:
        parts.append("- summary rebuilt from requests.jsonl (the run did not write one)")
    parts += ["", "## Per step", "", _markdown_table([c[0] for c in COLUMNS], rows(summary)), ""]
    totals = [
        ("achieved QPS", summary.achieved_qps),
        ("goodput QPS", summary.goodput_qps),
        ("error ratio", summary.error_ratio),
        ("drop ratio", summary.drop_ratio),
        ("retry amplification", summary.retry_amplification),
        ("TTFT p99 ms", summary.ttft_ms.p99),
        ("TTLT p99 ms", summary.ttlt_ms.p99),
    ]
    shown = [(k, f"{v:.4g}") for k, v in totals if isinstance(v, int | float)]
    if shown:
        parts += [
            "## Over all measured windows",
            "",
            _markdown_table([k for k, _ in shown], [[v for _, v in shown]]),
        ]
        parts.append("")
    if gates:
        parts += [
            "## SLO gates",
            "",
            _markdown_table(("gate", "observed", "result"), gate_rows(gates)),
            "",
        ]
    parts += [
        "Definitions: docs/metrics.md. Latencies are exact percentiles of successful requests;",
        "steps exclude their warm-up. `requests.jsonl` holds every request.",
        "",
    ]
    out = run_dir / "report.md"
    out.write_text("\n".join(parts), encoding="utf-8")
    write_html(
        run_dir / "report.html",
        f"ramplab run {run_dir.name}",
        [(k, str(v)) for k, v in facts if v is not None],
        [c[0] for c in COLUMNS],
        rows(summary),
        data["steps"],
    )
    return out


def gate_rows(verdicts: Sequence[GateVerdict]) -> list[tuple[str, str, str]]:
    """(gate, observed values, pass/fail/invalid) for report.md."""
    return [
        (
            v.gate,
            ", ".join(f"{x:g}" if isinstance(x, int | float) else str(x) for _, x in v.observed)
            or v.detail,
            v.status,
        )
        for v in verdicts
    ]
