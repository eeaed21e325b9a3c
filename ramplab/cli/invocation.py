"""The command line a verb records: ``run.json``'s and ``search.json``'s ``command``.

``sys.argv`` is the process's command line, not always the app's: ``make demo`` runs
``python -m ramplab.cli.demo``, whose ``sys.argv`` holds the demo's own arguments (none, so
``run.json`` said only ``ramplab``). The entry points therefore hand the app the arguments it parses
through typer's context object, and a verb records exactly those, as ``ramplab ...``: a command
line that reruns the run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import typer

__all__ = ["Invocation", "command_line"]


@dataclass(frozen=True, slots=True)
class Invocation:
    """The arguments the app was given after ``ramplab`` (the root context's ``obj``)."""

    args: tuple[str, ...]


def command_line(context: typer.Context) -> list[str]:
    """``ramplab`` and the app's arguments; ``sys.argv`` where no entry point set them (the app
    called by another program, typer's test runner)."""
    given = context.find_object(Invocation)
    args = given.args if given is not None else tuple(sys.argv[1:])
    return ["ramplab", *args]
