"""An experiment directory's reports, rebuilt from what exists.

``ramplab report EXPERIMENT_DIR`` rebuilds every run's ``report.md``/``report.html`` (its
``summary.json`` first, from the records, when the run was killed before writing one),
then ``conclude``: the comparison of the finished runs with the campaign's baseline and
``fail_if`` conditions and each variant's recommendations (``comparison.json``/``.md``), the
study when the campaign names one (``study.json``/``.md``), and the experiment's own report
(``report.md``, ``report.html``: ``overview``, ``mdreport``, ``htmlreport``) — the same files
``ramplab run`` writes at the end, so an interrupted or killed experiment gets them too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from ramplab.campaign.fail_if import parse_conditions
from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.experiment.compare import Comparison, compare
from ramplab.experiment.htmlreport import render_html
from ramplab.experiment.mdreport import render_markdown
from ramplab.experiment.overview import gather
from ramplab.experiment.recommendations import variant_recommendations
from ramplab.experiment.render import Advice, print_comparison, write_comparison
from ramplab.experiment.sources import expand
from ramplab.experiment.study_result import StudyAnalysis, StudyResult
from ramplab.report.run import write_report
from ramplab.results.outcome import exit_code
from ramplab.results.slo import Gate, evaluate_gates
from ramplab.runs.manifest import Manifest
from ramplab.runs.rebuild import load_summary
from ramplab.runs.rundir import ExperimentDir, RunDir

__all__ = [
    "analyse_experiment",
    "compare_experiment",
    "conclude",
    "report_experiment",
    "study_experiment",
    "write_experiment_report",
]

REPORT_MD = ExperimentDir.REPORT_MD
REPORT_HTML = ExperimentDir.REPORT_HTML


def compare_experiment(
    directory: Path, manifest: Manifest, console: Console
) -> tuple[Comparison, Advice] | None:
    """Compare the finished runs with the manifest's baseline and conditions, with each
    variant's recommendations; print it and write ``comparison.json``/``.md``. ``None`` when no
    run finished."""
    notes: list[str] = []
    groups = expand([directory], notes)
    if not groups:
        for note in notes:
            console.print(f"[yellow]note:[/] {note}", highlight=False)
        console.print("[yellow]no finished run: no comparison[/]")
        return None
    baseline = manifest.baseline
    if baseline not in [g.name for g in groups]:
        notes.append(f"baseline {baseline} has no finished run: {groups[0].name} stands in")
        baseline = groups[0].name
    conditions = parse_conditions(manifest.fail_if, field="fail_if")
    comparison = compare(groups, baseline, conditions, field="fail_if", notes=notes)
    advice = variant_recommendations(comparison.groups)
    print_comparison(comparison, console, advice=advice)
    json_path, _ = write_comparison(comparison, directory, advice)
    console.print(f"comparison: {json_path} (and .md)", highlight=False)
    return comparison, advice


def study_experiment(
    directory: Path, manifest: Manifest, console: Console, analyse: StudyAnalysis
) -> StudyResult | None:
    """The campaign's study analysis on the finished runs (``study.json``/``.md``); ``None``
    when the campaign names none. A failing analysis is reported, never fatal: the runs and the
    comparison stand on their own."""
    if manifest.study is None:
        return None
    try:
        result = analyse(manifest.study, directory, manifest)
    except Exception as exc:  # an analysis bug must not cost the experiment its report
        console.print(f"[red]study {manifest.study}: analysis failed: {exc!r}[/]", highlight=False)
        return None
    path = result.write(directory)
    console.print(f"[bold]{result.title}[/]", highlight=False)
    for sentence in result.conclusions:
        console.print(f"  • {sentence}", highlight=False)
    for note in result.notes:
        console.print(f"  [yellow]note:[/] {note}", highlight=False)
    console.print(f"study: {path} (and study.md)", highlight=False)
    return result


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_experiment_report(
    directory: Path,
    manifest: Manifest,
    compared: tuple[Comparison, Advice] | None,
    console: Console,
    notes: Sequence[str] = (),
) -> Path | None:
    """``report.md`` and ``report.html`` of the experiment (each written atomically); returns
    the Markdown file's path, ``None`` when it could not be built — the comparison and the
    runs' own reports stand without it, so a failure is reported, never fatal."""
    comparison, advice = compared if compared is not None else (None, {})
    try:
        overview = gather(directory, manifest, comparison, advice)
        _atomic(directory / REPORT_MD, render_markdown(overview, notes))
        _atomic(directory / REPORT_HTML, render_html(overview, notes))
    except (OSError, ValueError, UsageError) as exc:
        console.print(f"[red]experiment report not written: {exc}[/]", highlight=False)
        return None
    console.print(f"report: {directory / REPORT_MD} (and {REPORT_HTML})", highlight=False)
    return directory / REPORT_MD


def analyse_experiment(
    directory: Path, manifest: Manifest, console: Console, analyse: StudyAnalysis
) -> tuple[Comparison, Advice] | None:
    """The comparison (with each variant's recommendations), then the study; ``None``: no run
    finished. ``ramplab run`` writes the report after it, once the verdict is in the manifest."""
    compared = compare_experiment(directory, manifest, console)
    if compared is not None:
        study_experiment(directory, manifest, console, analyse)
    return compared


def conclude(
    directory: Path, manifest: Manifest, console: Console, analyse: StudyAnalysis
) -> Comparison | None:
    """What rebuilds an experiment's conclusions (``ramplab report``): the comparison, the
    study, then the experiment's report of them. ``None``: no run finished."""
    compared = analyse_experiment(directory, manifest, console, analyse)
    write_experiment_report(directory, manifest, compared, console)
    return None if compared is None else compared[0]


def report_experiment(
    directory: Path, gates: Sequence[Gate], console: Console, analyse: StudyAnalysis
) -> ExitCode:
    """Every run's report, then ``conclude``; exit 3 when a gate or condition holds."""
    manifest = Manifest.read(directory)
    console.print(
        f"experiment {manifest.name}: {len(manifest.runs)} runs, status {manifest.status}",
        highlight=False,
    )
    worst = ExitCode.OK  # of the gates: 2 a gate names no metric, 3 one missed
    for entry in manifest.runs:
        run_dir = directory / entry.dir
        if not run_dir.is_dir():
            console.print(f"  {entry.dir}: {entry.status}", highlight=False)
            continue
        try:
            summary = load_summary(run_dir)
        except UsageError as exc:
            console.print(f"  {entry.dir}: {entry.status}, no report ({exc})", highlight=False)
            continue
        if summary.rebuilt:
            summary.write(RunDir(run_dir).summary)
        verdicts = summary.gates
        if gates:
            verdicts = evaluate_gates(gates, summary.to_json())
            code = exit_code(summary.model_copy(update={"gates": verdicts}))
            if code != ExitCode.OK and worst != ExitCode.USAGE:
                worst = code
        written = write_report(run_dir, summary, verdicts)
        console.print(
            f"  {entry.dir}: {entry.status}, report {written.markdown} — "
            f"{written.verdict.headline}",
            highlight=False,
        )
    comparison = conclude(directory, manifest, console, analyse)
    if worst == ExitCode.OK and comparison is not None:
        return comparison.exit_code
    return worst
