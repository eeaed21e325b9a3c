"""The console every verb prints to, and stdout made line-buffered for pipes."""

from __future__ import annotations

import io
import sys

from rich.console import Console

__all__ = ["console", "line_buffered"]

# Piped output (make demo | tee, CI logs) gets a width that fits the per-step table.
console = Console(width=None if sys.stdout.isatty() else 180)


def line_buffered() -> None:
    """Progress lines must reach a pipe (make demo | tee, CI logs) as they are printed."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
