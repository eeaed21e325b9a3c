"""``ramplab run``'s flags for a run without a campaign file, and what the CLI does with them.

The campaign itself is built and validated by ``ramplab.campaign.flags``; this module declares
the options, refuses them beside a campaign file (exit 2 naming the first one: one source for
a run, never a merge the user has to guess), writes ``--print-campaign`` and prints the short
summary of what will run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ramplab.campaign.flags import FlagCampaign, RampFlags, campaign_from_flags
from ramplab.errors import UsageError

__all__ = [
    "Api",
    "ApiKeyEnv",
    "Arrivals",
    "Concurrency",
    "MaxTokens",
    "Model",
    "PrintCampaign",
    "PromptTokens",
    "Rates",
    "Step",
    "Warmup",
    "build",
    "print_summary",
    "refuse_beside_file",
    "write_campaign",
]

_PANEL = "Without a campaign file"


def _flag(help: str) -> Any:
    return typer.Option(help=help, show_default=False, rich_help_panel=_PANEL)


Rates = Annotated[
    str | None,
    _flag("Open loop: the steps' request rates, e.g. 1,2,5,10 (requests per second)."),
]
Concurrency = Annotated[
    str | None, _flag("Closed loop: the steps' numbers of users, e.g. 1,4,16 (not with --rates).")
]
Step = Annotated[str | None, _flag("How long each step holds, e.g. 30s or 2m (default 30s).")]
Warmup = Annotated[
    str | None,
    _flag("The unmeasured start of each step (default: a fifth of --step, e.g. 6s of 30s)."),
]
Arrivals = Annotated[
    str | None, _flag("Open loop's arrival process: poisson (default), constant or gamma:B.")
]
Model = Annotated[
    str | None, _flag("Model of each request (default: the first of the target's /v1/models).")
]
MaxTokens = Annotated[int | None, _flag("max_tokens of each request (default 128).")]
PromptTokens = Annotated[int | None, _flag("Synthetic prompt length in tokens (default 128).")]
Api = Annotated[
    str | None,
    _flag("The API to drive: chat (/v1/chat/completions, the default), completions "
          "(/v1/completions) or responses (/v1/responses, the Responses API)."),
]  # fmt: skip
ApiKeyEnv = Annotated[
    str | None,
    _flag("Name of the environment variable holding the API key (sent as a Bearer token; "
          "never printed or written)."),
]  # fmt: skip
PrintCampaign = Annotated[
    Path | None,
    _flag("Write the campaign YAML these flags make to FILE ('-': stdout) and exit without "
          "running; `ramplab run FILE` then does the same run."),
]  # fmt: skip


def refuse_beside_file(flags: RampFlags, print_campaign: Path | None, campaign: Path) -> None:
    """A campaign file and these flags together is exit 2, naming the first flag."""
    given = flags.given() + (["--print-campaign"] if print_campaign is not None else [])
    if given:
        raise UsageError(
            given[0],
            f"describes a run without a campaign file, and {campaign} was given: set it in "
            "the file (docs/cli.md) or leave the file out",
        )


def build(flags: RampFlags, target: str | None) -> FlagCampaign:
    """The campaign of the flags; without ``--rates`` or ``--concurrency``, exit 2."""
    if flags.rates is None and flags.concurrency is None:
        raise UsageError("CAMPAIGN", "give a campaign file, or --rates / --concurrency for a "
                         "run without one (ramplab run --help)")  # fmt: skip
    command = " ".join(["ramplab", *sys.argv[1:]])
    return campaign_from_flags(flags, os.environ, command, target)


def write_campaign(built: FlagCampaign, destination: Path) -> None:
    if str(destination) == "-":
        sys.stdout.write(built.text)
        sys.stdout.flush()
        return
    try:
        destination.write_text(built.text, encoding="utf-8")
    except OSError as exc:
        raise UsageError("--print-campaign", f"cannot write {str(destination)!r}: "
                         f"{exc.strerror}") from None  # fmt: skip


def print_summary(built: FlagCampaign, target: str | None, console: Console) -> None:
    """One paragraph: the loop, the steps, the request, the target."""
    campaign = built.campaign
    stages = campaign.load_shape.stages
    closed = campaign.mode == "closed"
    unit = "users" if closed else "QPS"
    levels = ", ".join(f"{s.rate:g}" for s in stages)
    first = stages[0]
    work = campaign.workload
    auth = " with an API key" if work.auth.mode == "api-key" else ""
    loop = "closed loop" if closed else f"open loop ({campaign.arrivals} arrivals)"
    console.print(
        f"run without a file: {loop}, {len(stages)} steps of {first.duration_s:g} s "
        f"(warm-up {first.warmup_s:g} s) at {levels} {unit}, "
        f"~{campaign.load_shape.duration_s:g} s of load\n"
        f"  each request: model {work.model or '(the target’s first)'}, "
        f"{work.prompt_tokens} prompt tokens, max_tokens {work.max_tokens}{auth}\n"
        f"  target: {target or 'the local reference target'} "
        f"(--print-campaign - shows the campaign)",
        highlight=False,
    )
