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

This module only assembles the app: each verb group is a module of ``ramplab.cli`` (``run``,
``report``, ``search``, ``attention``, ``prompts``, ``dataset``, ``container``), user errors
go through ``ramplab.cli.errors.user_errors``, and the options two verbs share are declared in
``ramplab.cli.options``. A verb parses, calls the package that does the work, and prints.
The order of registration is the order of ``ramplab --help``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

from ramplab.cli import attention, dataset, export, prompts, report, run, search
from ramplab.cli.console import line_buffered
from ramplab.cli.container import container_app
from ramplab.cli.invocation import Invocation

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
app.command()(run.campaigns)
app.add_typer(container_app, name="container")
app.command()(run.run)
app.command()(run.validate)
app.command()(report.report)
app.command()(report.compare)
app.command()(export.export)
app.command()(search.search)
app.add_typer(prompts.prompts_app, name="prompts")
app.command()(attention.attention)
app.add_typer(dataset.dataset_app, name="dataset")


def main(args: Sequence[str] | None = None) -> None:
    """The ``ramplab`` console script: ``args`` after ``ramplab`` (by default ``sys.argv[1:]``),
    handed to the verbs too (``ramplab.cli.invocation``: what ``run.json`` records)."""
    given = tuple(sys.argv[1:] if args is None else args)
    line_buffered()
    app(list(given), prog_name="ramplab", obj=Invocation(given))


if __name__ == "__main__":
    main()
