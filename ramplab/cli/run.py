"""``ramplab run``, ``validate`` and ``campaigns``: a campaign run, checked, or listed."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from ramplab import data
from ramplab.campaign import preflight
from ramplab.campaign.flags import RampFlags
from ramplab.campaign.schema import load_campaign
from ramplab.campaign.variants import Experiment, load_experiment
from ramplab.cli import flags as cli_flags
from ramplab.cli.console import console
from ramplab.cli.errors import storage_errors, user_errors
from ramplab.cli.invocation import command_line
from ramplab.cli.options import (
    CampaignArg,
    CampaignOrFlags,
    Locustfile,
    RunName,
    RunRedisUrl,
    RunResultsDir,
    RunTarget,
    RunWorkers,
    check_target,
)
from ramplab.errors import StackError, UsageError
from ramplab.exitcodes import ExitCode
from ramplab.experiment.order import plan_runs
from ramplab.experiment.runner import run_experiment
from ramplab.results.slo import parse_gates
from ramplab.search.strategy import describe
from ramplab.stack import probe
from ramplab.stack.run import DEFAULT_LOCUSTFILE, RunRequest, execute
from ramplab.study.registry import analyse

__all__ = ["campaigns", "run", "validate"]


def campaigns() -> None:
    """List the campaigns shipped with ramplab (usable by name from any directory)."""
    table = Table(title_justify="left")
    for column in ("name", "description", "file"):
        table.add_column(column)
    for path in data.campaigns():
        try:
            text = load_campaign(path).description or ""
        except UsageError:  # an experiment's file: its description is read without checks
            text = str(
                (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("description", "")
            )
        table.add_row(path.stem, " ".join(text.split()), str(path))
    console.print(table)


def run(
    context: typer.Context,
    campaign: CampaignOrFlags = None,
    target: RunTarget = None,
    workers: RunWorkers = None,
    results_dir: RunResultsDir = Path("results"),
    run_name: RunName = None,
    web_ui: Annotated[
        bool, typer.Option("--web-ui", help="Serve Locust's web UI on 127.0.0.1 during the run.")
    ] = False,
    gate: Annotated[
        list[str] | None,
        typer.Option(
            help="Extra SLO gate, e.g. 'ttft_ms.p99 < 800' (repeatable); a miss exits 3.",
            show_default=False,
        ),
    ] = None,
    redis_url: RunRedisUrl = None,
    locustfile: Locustfile = None,
    metrics: Annotated[
        bool,
        typer.Option(
            "--metrics",
            help="Each worker serves /metrics on its own free port, the master its run gauges; "
            "labels run=<run dir name>, scenario=<campaign name>; URLs printed and in run.json.",
        ),
    ] = False,
    prometheus: Annotated[
        bool,
        typer.Option(
            "--prometheus",
            help="--metrics, plus a local Prometheus (the `prometheus` binary) scraping the "
            "target, the master and every worker, with the shipped rules; data in the run dir.",
        ),
    ] = False,
    linger: Annotated[
        float,
        typer.Option(
            min=0,
            help="After the ramp, keep Prometheus, the target and the exporters up this many "
            "seconds to look at (Ctrl-C ends it early; the run's exit code stands).",
        ),
    ] = 0.0,
    no_preflight: Annotated[
        bool,
        typer.Option(
            "--no-preflight",
            help="With --target: skip the model check and the one request sent before the ramp "
            "(the target must still accept connections).",
        ),
    ] = False,
    max_error_ratio: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Exit 3 when the run's error ratio passes this (default: the campaign's "
            "max_error_ratio, 0.5); a run whose every request failed always exits 3.",
            show_default=False,
        ),
    ] = None,
    rates: cli_flags.Rates = None,
    concurrency: cli_flags.Concurrency = None,
    step: cli_flags.Step = None,
    warmup: cli_flags.Warmup = None,
    arrivals: cli_flags.Arrivals = None,
    model: cli_flags.Model = None,
    max_tokens: cli_flags.MaxTokens = None,
    prompt_tokens: cli_flags.PromptTokens = None,
    api_key_env: cli_flags.ApiKeyEnv = None,
    api: cli_flags.Api = None,
    print_campaign: cli_flags.PrintCampaign = None,
) -> None:
    """Run a campaign: start the stack, ramp, print the per-step table, apply the gates.

    A campaign with variants (matrix/variants/repeat) is an experiment: every run under one
    directory, interleaved, then the comparison. Without a file, the flags of the last panel
    describe a stepped ramp (--rates) or closed loop (--concurrency) that runs the same way."""
    flags = RampFlags(rates, concurrency, step, warmup, arrivals, model, max_tokens,
                      prompt_tokens, api_key_env, api)  # fmt: skip
    experiment: Experiment | None = None
    with storage_errors(), user_errors():
        if target is not None:
            # With --print-campaign -, stdout is the YAML alone: a note goes to stderr there.
            quiet = print_campaign is not None and str(print_campaign) == "-"
            target = check_target(target, _note_to_stderr if quiet else _note)
        gates = parse_gates(gate or [], field="--gate")
        if campaign is None:
            built = cli_flags.build(flags, target)
            if print_campaign is not None:
                cli_flags.write_campaign(built, print_campaign)
                raise typer.Exit(0)
            cli_flags.print_summary(built, target, console)
            parsed, campaign_path, text = built.campaign, Path("(flags)"), built.text
        else:
            cli_flags.refuse_beside_file(flags, print_campaign, campaign)
            experiment = load_experiment(campaign, check_target=target is None)
            parsed = experiment.variants[0].campaign if experiment else load_campaign(campaign)
            campaign_path, text = campaign, campaign.read_text(encoding="utf-8")
        request = RunRequest(
            campaign=parsed,
            campaign_path=campaign_path,
            campaign_text=text,
            results_dir=results_dir,
            run_name=None if experiment else run_name,
            target_url=target,
            workers=workers,
            web_ui=web_ui,
            gates=gates,
            redis_url=redis_url,
            locustfile=locustfile or DEFAULT_LOCUSTFILE,
            argv=command_line(context),
            metrics=metrics or prometheus,
            prometheus=prometheus,
            linger_s=linger,
            preflight=not no_preflight,
            max_error_ratio=max_error_ratio,
        )
        if experiment is not None:
            code = run_experiment(experiment, request, console, analyse, run_name)
        else:
            code = execute(request, console)
    raise typer.Exit(int(code))


def _note(text: str) -> None:
    console.print(f"[yellow]note:[/] {escape(text)}")


def _note_to_stderr(text: str) -> None:
    sys.stderr.write(f"note: {text}\n")


def validate(
    campaign: CampaignArg,
    probe_target: Annotated[
        bool,
        typer.Option(
            "--probe",
            help="Also run the preflight against --target (reached, model listed, one request) "
            "without running the campaign.",
        ),
    ] = False,
    target: Annotated[
        str | None,
        typer.Option(help="The server --probe checks (required with --probe).", show_default=False),
    ] = None,
) -> None:
    """Check a campaign file without running it; prints its stages (and an experiment's
    variants and run order). With ``--probe --target URL``, also the preflight against it."""
    with user_errors():
        if probe_target:
            if target is None:
                raise UsageError("--probe", "needs --target URL (the server to probe)")
            _probe(campaign, check_target(target, _note))
            return
        experiment = load_experiment(campaign)
        if experiment is not None:
            _print_experiment(experiment)
            return
        parsed = load_campaign(campaign)
        if parsed.search is not None and parsed.shape is None and parsed.steps is None:
            preflight.check_campaign(
                parsed.model_copy(update={"shape": parsed.search.shape_text(1.0)})
            )
            preflight.target_check(parsed)
            console.print(f"{campaign}: ok — {parsed.name}, {describe(parsed.search)}")
            return
        preflight.check_campaign(parsed)
        preflight.target_check(parsed)
    shape = parsed.load_shape
    # A closed loop holds a number of users (each sends its next request when the last ends):
    # a stage's "rate" is its concurrency and there is no arrival count to announce.
    closed = parsed.mode == "closed"
    load = f"up to {max(st.rate for st in shape.stages):g} users" if closed else (
        f"~{shape.expected_arrivals:.0f} arrivals")  # fmt: skip
    console.print(
        f"{campaign}: ok — {parsed.name}, {parsed.mode} loop, {len(shape.stages)} stages, "
        f"{shape.duration_s:g} s, {load}"
    )
    unit = "users" if closed else "QPS"
    for st in shape.stages:
        console.print(f"  step {st.index}: {st.rate:g} {unit} for {st.duration_s:g} s "
                      f"(warm-up {st.warmup_s:g} s)", highlight=False)  # fmt: skip


def _probe(campaign: Path, target: str) -> None:
    """``validate --probe``: the campaign's checks and the target's preflight; exit 4 when the
    target cannot be reached or fails the request, 2 for the campaign's own mistakes."""
    experiment = load_experiment(campaign, check_target=False)
    parsed = experiment.variants[0].campaign if experiment else load_campaign(campaign)
    preflight.check_campaign(parsed)
    checks = parsed.preflight.model_copy(update={"models": True, "request": True})
    started = time.monotonic()
    try:
        probe.preflight(
            target,
            parsed.model_copy(update={"preflight": checks}),
            parsed.stack.health_timeout_s,
            _note,
        )
    except StackError as exc:
        sys.stderr.write(f"ramplab: {exc}\n")
        raise typer.Exit(int(ExitCode.RUN_FAILED)) from None
    console.print(f"{campaign}: ok — {target} serves {parsed.workload.model or 'its first model'}"
                  f" and answered one request ({time.monotonic() - started:.1f} s)",
                  highlight=False)  # fmt: skip


def _print_experiment(experiment: Experiment) -> None:
    plan = plan_runs(experiment)
    each = sum(v.campaign.load_shape.duration_s for v in experiment.variants) * experiment.repeat
    console.print(
        f"ok — experiment {experiment.name}: {len(experiment.variants)} variants × repeat "
        f"{experiment.repeat} = {len(plan)} runs (~{each:g} s of load, plus each run's start "
        f"and drain), order {experiment.order}, baseline {experiment.baseline}",
        highlight=False,
    )
    table = Table(title="variants", title_justify="left")
    for column in ("variant", "overrides", "stages", "duration"):
        table.add_column(column)
    for v in experiment.variants:
        overrides = ", ".join(f"{o.path}={o.value!r}" for o in v.overrides) or "-"
        vshape = v.campaign.load_shape
        table.add_row(v.name, overrides, str(len(vshape.stages)), f"{vshape.duration_s:g} s")
    console.print(table)
    console.print("run order: " + ", ".join(p.dir for p in plan), highlight=False)
    for text in experiment.fail_if:
        console.print(f"fail_if: {text}", highlight=False)
