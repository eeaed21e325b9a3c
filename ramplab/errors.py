"""The load generator's exception tree, split by what the caller does about it.

::

    RamplabError
    └── UsageError          the user's input is wrong: print ``str(err)``, exit with code 2
        ├── ShapeError      a ramp shape (CLI string or YAML/dict) is invalid
        ├── RetryConfigError a retry policy configuration is invalid
        └── GateError       an SLO or gate expression cannot be parsed

Every ``UsageError`` names the offending field and value in its message (``field`` holds the
dotted field name on its own) so a CLI can print it without a traceback.
"""

from __future__ import annotations


class RamplabError(Exception):
    """Root of every error ramplab raises on purpose."""


class UsageError(RamplabError, ValueError):
    """Bad user input; ``field`` is the dotted name of the offending field ("" when global)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class ShapeError(UsageError):
    """An invalid ramp shape."""


class RetryConfigError(UsageError):
    """An invalid retry policy configuration."""


class GateError(UsageError):
    """An SLO threshold or gate expression that cannot be parsed."""
