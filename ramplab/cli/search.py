"""``ramplab search``: the max rate under the campaign's SLO (``ramplab.search``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ramplab.campaign.schema import load_campaign
from ramplab.campaign.search import SearchSpec
from ramplab.cli.console import console
from ramplab.cli.errors import user_errors
from ramplab.cli.invocation import command_line
from ramplab.cli.options import (
    CampaignArg,
    Locustfile,
    SearchName,
    SearchRedisUrl,
    SearchResultsDir,
    SearchTarget,
    SearchWorkers,
    check_target,
)
from ramplab.errors import StackError
from ramplab.exitcodes import ExitCode
from ramplab.search.run import SearchRequest, execute_search
from ramplab.stack import probe
from ramplab.stack.run import DEFAULT_LOCUSTFILE

__all__ = ["search"]


def search(
    context: typer.Context,
    campaign: CampaignArg,
    target: SearchTarget = None,
    workers: SearchWorkers = None,
    results_dir: SearchResultsDir = Path("results"),
    run_name: SearchName = None,
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
    redis_url: SearchRedisUrl = None,
    locustfile: Locustfile = None,
) -> None:
    """Find the max rate at which goodput_min % of requests meet every SLO of the campaign.

    Geometric probes, then bisection; each probe is an open-loop run with a warm-up and a hold
    split into windows. Writes search.json and a run directory per probe (docs/cli.md)."""
    with user_errors():
        parsed = load_campaign(campaign)
        given = {"goodput_min": goodput_min, "start_qps": start_qps, "max_qps": max_qps,
                 "resolution_pct": resolution_pct}  # fmt: skip
        spec = (parsed.search or SearchSpec()).with_flags(given)
        if target is not None:
            target = check_target(target, lambda text: console.print(f"note: {text}"))
            try:  # the campaign's preflight before the first probe (docs/cli.md)
                probe.preflight(target, parsed, parsed.stack.health_timeout_s,
                                lambda text: console.print(f"note: {text}"))  # fmt: skip
            except StackError as exc:
                sys.stderr.write(f"ramplab: {exc}\n")
                raise typer.Exit(int(ExitCode.RUN_FAILED)) from None
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
            argv=command_line(context),
        )
        code = execute_search(request, console)
    raise typer.Exit(int(code))
