"""The CLI's one error handler: a user's mistake is a message and exit code 2, not a traceback.

Every ``UsageError`` (``ramplab.errors``: bad input, its message naming the field) raised inside
``with user_errors():`` is written to stderr as ``ramplab: error: <message>`` and ends the
command with ``ExitCode.USAGE``. A verb wraps what reads and checks its input, and no more: an
error of ours raised later (while measuring, while writing a report) is a bug, and its traceback
is wanted.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode

__all__ = ["user_errors"]


@contextmanager
def user_errors(prog: str = "ramplab") -> Iterator[None]:
    """Turn a ``UsageError`` into ``<prog>: error: <message>`` on stderr and exit code 2."""
    try:
        yield
    except UsageError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        raise typer.Exit(int(ExitCode.USAGE)) from None
