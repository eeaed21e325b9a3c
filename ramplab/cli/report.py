"""``ramplab report`` and ``compare``: a run's saved results read again, runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ramplab.campaign.fail_if import parse_conditions
from ramplab.cli.console import console
from ramplab.cli.errors import storage_errors, user_errors
from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.experiment.compare import compare as compare_groups
from ramplab.experiment.recommendations import variant_recommendations
from ramplab.experiment.render import TABLE_METRICS, print_comparison, write_comparison
from ramplab.experiment.report import report_experiment
from ramplab.experiment.sources import expand
from ramplab.report.run import print_results, write_report
from ramplab.results.outcome import exit_code
from ramplab.results.slo import evaluate_gates, parse_gates
from ramplab.runs.manifest import MANIFEST, Manifest
from ramplab.runs.rebuild import load_summary
from ramplab.runs.rundir import RunDir
from ramplab.search.report import write_search_report
from ramplab.search.table import print_search, read_search
from ramplab.study.registry import analyse

__all__ = ["compare", "report"]


def report(
    run_dir: Annotated[
        Path, typer.Argument(help="A results/<run>/ directory, or an experiment's directory.")
    ],
    gate: Annotated[
        list[str] | None,
        typer.Option(
            help="SLO gate to evaluate on the saved summary (repeatable).", show_default=False
        ),
    ] = None,
) -> None:
    """Rebuild the per-step table, report.md and report.html from a run's saved results; for an
    experiment, every run's report and the comparison.

    With ``--gate`` the given gates are evaluated on the saved summary and decide the exit code;
    without, the verdicts the run recorded are shown again and the exit code is 0."""
    with storage_errors():
        with user_errors():
            if not run_dir.is_dir():
                raise UsageError("RUN_DIR", f"{run_dir} is not a directory")
            if RunDir(run_dir).is_search():  # a search: its probe table, answer and report
                data = read_search(run_dir)
                print_search(data, console)
                markdown, _ = write_search_report(run_dir, data)
                console.print(f"report: {markdown} (and {RunDir.SEARCH_HTML})")
                raise typer.Exit(0)
            gates = parse_gates(gate or [], field="--gate")
            if (run_dir / MANIFEST).is_file():
                raise typer.Exit(int(report_experiment(run_dir, gates, console, analyse)))
            summary = load_summary(run_dir)
        if summary.rebuilt:
            RunDir(run_dir).write_summary(summary)
            console.print("[yellow]summary.json rebuilt from the records[/]")
        code = ExitCode.OK
        verdicts = summary.gates
        if gates:
            verdicts = evaluate_gates(gates, summary.to_json())
            code = exit_code(summary.model_copy(update={"gates": verdicts}))
        written = write_report(run_dir, summary, verdicts)
        # What the run itself printed: the verdict, the table, the gates, warnings, the rules.
        print_results(summary.model_copy(update={"gates": verdicts}), written, console)
        console.print(f"report: {written.markdown}")
        raise typer.Exit(int(code))


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories and/or experiment directories (an experiment expands to its "
            "variants, repeats grouped).",
            show_default=False,
        ),
    ],
    baseline: Annotated[
        str | None,
        typer.Option(
            help="The reference: a variant or run directory name (default: an experiment's "
            "baseline, else the first).",
            show_default=False,
        ),
    ] = None,
    fail_if: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-if",
            help="Exit 3 when this holds for a variant, e.g. 'ttft_ms.p99 > 1.1 * baseline' "
            "(repeatable; language in docs/cli.md).",
            show_default=False,
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            help="Table column (a summary path, e.g. ttft_ms.p90, lateness_ms.p99; repeatable; "
            "default: the key metrics).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            help="Write comparison.json and comparison.md here (default: into the experiment "
            "directory when one experiment is compared).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Compare runs side by side per step of offered QPS, with deltas against a baseline."""
    with user_errors():
        conditions = parse_conditions(fail_if or [], field="--fail-if")
        notes: list[str] = []
        groups = expand(runs, notes)
        only = runs[0] if len(runs) == 1 and (runs[0] / MANIFEST).is_file() else None
        chosen = baseline
        if chosen is None and only is not None:
            declared = Manifest.read(only).baseline
            chosen = declared if declared in [g.name for g in groups] else None
        comparison = compare_groups(
            groups, chosen, conditions, notes=notes, extra=list(metric or [])
        )
        directory = output if output is not None else only
        if directory is not None:
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError("--output", f"{directory}: {exc.strerror}") from None
    keys = list(metric) if metric else TABLE_METRICS
    advice = variant_recommendations(comparison.groups)
    print_comparison(comparison, console, keys, advice)
    if directory is not None:
        json_path, _ = write_comparison(comparison, directory, advice)
        console.print(f"comparison: {json_path} (and .md)", highlight=False)
    raise typer.Exit(int(comparison.exit_code))
