"""An experiment end to end: one directory, every variant's runs in the interleaved order.

``results/<name>-<UTC time>/`` holds the campaign as written (``campaign.yaml``), the manifest
(``experiment.json``, rewritten after every change) and one ordinary run directory per run
(``01-locked-r1/``, made by ``ramplab.stack.run.execute`` exactly as ``ramplab run`` makes one,
with the variant's own complete campaign in its ``campaign.yaml``), then ``comparison.json``
and ``comparison.md``, the study when the campaign names one, and the experiment's own
``report.md`` and ``report.html``, written once the experiment's verdict is known.

A failed run (exit 4) is recorded and the experiment goes on — its variant is compared on the
runs that finished; bad input found only at run time (exit 2) stops it, since later runs would
meet it too; Ctrl-C stops the run in progress (its results kept, as ``ramplab run`` keeps them),
skips the rest and still compares what finished. Exit code: 130 interrupted, 2 stopped on bad
input, 4 a run failed, 3 a ``fail_if`` condition held or a run missed a gate, else 0.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from ramplab.campaign.schema import Campaign, parse_campaign
from ramplab.campaign.variants import Experiment, Variant
from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.experiment.order import PlannedRun, plan_runs
from ramplab.experiment.report import analyse_experiment, write_experiment_report
from ramplab.experiment.study_result import StudyAnalysis
from ramplab.runs.manifest import Manifest, RunEntry, VariantEntry, now, status_of
from ramplab.runs.naming import new_results_dir
from ramplab.runs.rebuild import CAMPAIGN_FILE
from ramplab.stack.run import RunRequest, execute

__all__ = ["run_campaign", "run_experiment"]


def run_campaign(variant: Variant, seed: int, source: str) -> tuple[Campaign, str]:
    """The campaign of one run (the variant with its repeat's seed) and its YAML text, with
    file paths made absolute so the run directory stands on its own."""
    data: dict[str, Any] = dict(variant.data)
    data["seed"] = seed
    campaign = parse_campaign(data, source)
    files = {
        name: path.resolve()
        for name in ("prompts_file", "ca_file")
        if (path := getattr(variant.campaign.workload, name)) is not None
    }
    if files:
        campaign = campaign.model_copy(
            update={"workload": campaign.workload.model_copy(update=files)}
        )
        data["workload"] = {**data.get("workload", {}), **{k: str(v) for k, v in files.items()}}
    header = f"# variant {variant.name} of {source}, seed {seed}\n"
    return campaign, header + yaml.safe_dump(data, sort_keys=False)


def _manifest(experiment: Experiment, plan: list[PlannedRun], template: RunRequest) -> Manifest:
    return Manifest(
        name=experiment.name,
        campaign=str(template.campaign_path),
        seed=experiment.seed,
        repeat=experiment.repeat,
        order=experiment.order,
        baseline=experiment.baseline,
        fail_if=list(experiment.fail_if),
        study=experiment.study,
        variants=[VariantEntry(v.name, v.slug, v.overrides_dict()) for v in experiment.variants],
        runs=[RunEntry(p.index, p.variant, p.repeat, p.seed, p.dir) for p in plan],
        command=" ".join(template.argv) if template.argv else None,
    )


def _one(
    experiment: Experiment,
    planned: PlannedRun,
    template: RunRequest,
    directory: Path,
    console: Console,
) -> int:
    variant = experiment.variant(planned.variant)
    campaign, text = run_campaign(variant, planned.seed, str(template.campaign_path))
    request = dataclasses.replace(
        template,
        campaign=campaign,
        campaign_text=text,
        results_dir=directory,
        run_name=planned.dir,
    )
    try:
        return int(execute(request, console))
    except UsageError as exc:
        console.print(f"[red]{planned.dir}: {exc}[/]", highlight=False)
        return int(ExitCode.USAGE)


def run_experiment(
    experiment: Experiment,
    template: RunRequest,
    console: Console,
    analyse: StudyAnalysis,
    name: str | None = None,
) -> ExitCode:
    """Run every variant ``repeat`` times in the planned order under one directory; compare."""
    directory = new_results_dir(template.results_dir, name, experiment.name)
    (directory / CAMPAIGN_FILE).write_text(template.campaign_text, encoding="utf-8")
    plan = plan_runs(experiment)
    manifest = _manifest(experiment, plan, template)
    manifest.write(directory)
    console.print(
        f"[bold]ramplab[/] experiment [cyan]{directory}[/]: {len(experiment.variants)} variants"
        f" × {experiment.repeat} = {len(plan)} runs, order {experiment.order}"
    )
    stopped: ExitCode | None = None
    current: RunEntry | None = None
    try:
        for planned, entry in zip(plan, manifest.runs, strict=True):
            current = entry
            entry.status, entry.started = "running", now()
            manifest.write(directory)
            console.rule(
                f"run {planned.index}/{len(plan)}: {planned.variant} "
                f"(repeat {planned.repeat}, seed {planned.seed})"
            )
            code = _one(experiment, planned, template, directory, console)
            entry.status, entry.exit_code, entry.finished = status_of(code), code, now()
            manifest.write(directory)
            current = None
            if code == ExitCode.INTERRUPTED:
                stopped = ExitCode.INTERRUPTED
                break
            if code == ExitCode.USAGE:
                stopped = ExitCode.USAGE
                break
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: the finished runs are kept[/]")
        if current is not None:
            current.status, current.exit_code = "interrupted", int(ExitCode.INTERRUPTED)
            current.finished = now()
        stopped = ExitCode.INTERRUPTED
    for entry in manifest.runs:
        if entry.status == "pending":
            entry.status = "skipped"
    manifest.write(directory)
    verdict = ExitCode.OK
    compared = None
    notes: list[str] = []
    cut = False  # Ctrl-C during the comparison: the user wants out, the report can wait
    try:
        compared = analyse_experiment(directory, manifest, console, analyse)
        if compared is not None:
            verdict = compared[0].exit_code
    except UsageError as exc:
        console.print(f"[red]no comparison: {exc}[/]", highlight=False)
        notes.append(f"no comparison: {exc}")
        verdict = ExitCode.USAGE
    except KeyboardInterrupt:
        stopped, cut = ExitCode.INTERRUPTED, True
    result = stopped if stopped is not None else _verdict(manifest, verdict)
    manifest.status = (
        "interrupted" if result == ExitCode.INTERRUPTED
        else "done" if result in (ExitCode.OK, ExitCode.SLO_MISSED) else "failed"
    )  # fmt: skip
    manifest.exit_code, manifest.finished = int(result), now()
    manifest.write(directory)
    try:  # after the verdict, so the report states how the experiment ended
        if not cut:
            write_experiment_report(directory, manifest, compared, console, notes)
    except KeyboardInterrupt:
        cut = True
    if cut:
        console.print(f"[yellow]no experiment report: `ramplab report {directory}` writes it[/]")
    console.print(f"experiment: {directory} (exit code {int(result)})")
    return result


def _verdict(manifest: Manifest, comparison: ExitCode) -> ExitCode:
    """A failed run outranks the comparison's verdict, which outranks a run's missed gate."""
    if any(r.status == "failed" for r in manifest.runs):
        return ExitCode.RUN_FAILED
    if comparison != ExitCode.OK:
        return comparison
    if any(r.status == "gate_missed" for r in manifest.runs):
        return ExitCode.SLO_MISSED
    return ExitCode.OK
