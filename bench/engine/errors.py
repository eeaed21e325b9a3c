"""Why the engine cannot be installed or served, said so that nobody needs a traceback."""

from __future__ import annotations

from pathlib import Path


class EngineError(RuntimeError):
    """The engine cannot be installed, started or reached here; ``str(err)`` says why and what
    to do. ``python -m bench.engine`` prints it and exits 1; tests let it fail the test."""


class EngineRefused(EngineError):
    """Refused before anything ran — this machine or this request cannot serve (the CPU, the
    memory, the disk, the port, no wheel to install) — and nothing was left behind: the message
    is one line naming the cause and the fix. ``python -m bench.engine`` exits 2."""


def tail(log: Path, lines: int = 20) -> str:
    """The last non-blank lines of a log, to quote in an error."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(kept) if kept else "(empty)"
