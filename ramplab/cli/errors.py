"""The CLI's one error handler: a user's mistake is a message and exit code 2, not a traceback.

Every ``UsageError`` (``ramplab.errors``: bad input, its message naming the field) raised inside
``with user_errors():`` is written to stderr as ``ramplab: error: <message>`` and ends the
command with ``ExitCode.USAGE``. A verb wraps what reads and checks its input, and no more: an
error of ours raised later (while measuring, while writing a report) is a bug, and its traceback
is wanted.

``storage_errors()`` is the other end: a results file that cannot be written (a full disk) is
``ramplab: error: results disk full: <path> (<reason>)`` and ``ExitCode.RUN_FAILED`` (4) — the
input was fine, so never 2, and never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from ramplab.errors import StorageError, UsageError
from ramplab.exitcodes import ExitCode

__all__ = ["storage_errors", "user_errors"]


@contextmanager
def user_errors(prog: str = "ramplab") -> Iterator[None]:
    """Turn a ``UsageError`` into ``<prog>: error: <message>`` on stderr and exit code 2."""
    try:
        yield
    except UsageError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        raise typer.Exit(int(ExitCode.USAGE)) from None


@contextmanager
def storage_errors(prog: str = "ramplab") -> Iterator[None]:
    """Turn a ``StorageError`` (or a disk's own ``OSError``: full, over quota, I/O) into
    ``<prog>: error: <message>`` on stderr and exit code 4."""
    try:
        yield
    except StorageError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        raise typer.Exit(int(ExitCode.RUN_FAILED)) from None
    except OSError as exc:
        if not StorageError.is_storage(exc):
            raise
        sys.stderr.write(f"{prog}: error: {StorageError.of(exc)}\n")
        raise typer.Exit(int(ExitCode.RUN_FAILED)) from None
