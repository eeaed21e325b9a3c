"""The load generator's exception tree, split by what the caller does about it.

::

    RamplabError
    ├── UsageError            the user's input is wrong: print ``str(err)``, exit with code 2
    │   ├── ShapeError        a ramp shape (CLI string or YAML/dict) is invalid
    │   ├── RetryConfigError  a retry policy configuration is invalid
    │   ├── GateError         an SLO or gate expression cannot be parsed
    │   │   └── ConditionError  a condition's text and the column where reading it stopped
    │   │                       (``ramplab.conditions``: gates, request SLOs, ``fail_if``)
    │   ├── PromConfigError   a scrape target or option a Prometheus configuration cannot hold
    │   ├── OptionError       a Locust option of the plugin (``ramplab.options.settings``)
    │   ├── CampaignError     a campaign file that cannot be run (``ramplab.campaign``)
    │   ├── ModelError        a study sweep that cannot identify its model (``ramplab.study``)
    │   └── RecordsError      a records file this version cannot read (``ramplab.records``)
    ├── RetryableError        may succeed when tried again: record it, let the retry policy decide
    │   ├── AuthError         the token endpoint is unreachable or refused the credentials
    │   └── ResolveError      the DNS server of --resolver gave no address (``measure.resolver``)
    └── FatalError            trying again changes nothing: record or report it, stop that work
        ├── IntegrityError    a response's content does not match its signature or seed
        ├── MalformedResponse a response that breaks HTTP/1.1's syntax or framing
        │                     (``measure.http11``; recorded as ``protocol_error``)
        ├── StackError        a process of the local stack did not come up (``ramplab.stack.local``)
        └── StorageError      a results file could not be written (a full disk): the run stops,
                              what was written is kept, the CLI exits 4 naming the path

Every ``UsageError`` names the offending field and value in its message (``field`` holds the
dotted field name on its own) so a CLI can print it without a traceback.

Every class is defined here, so that a caller can catch a family without importing the layer
that raises it.

Control-flow signals are not errors and stay outside the tree: either private to the module that
raises and catches them (``ramplab.measure.attempt``'s stream failure, which ends up as a record's
``error_kind``), or, like ``KeyboardInterrupt``, a ``BaseException`` that no ``except Exception``
may swallow (``ramplab.runs.signals.Interrupted``: Ctrl-C during a run or a search).
"""

from __future__ import annotations

import errno
from pathlib import Path

__all__ = [
    "AuthError",
    "CampaignError",
    "FatalError",
    "GateError",
    "IntegrityError",
    "MalformedResponse",
    "ModelError",
    "OptionError",
    "PromConfigError",
    "RamplabError",
    "RecordsError",
    "ResolveError",
    "RetryConfigError",
    "RetryableError",
    "ShapeError",
    "StackError",
    "StorageError",
    "UsageError",
]


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


class PromConfigError(UsageError):
    """A target or option the generated Prometheus configuration cannot hold; the message names
    the target, job or option."""

    def __init__(self, message: str) -> None:
        super().__init__("", message)


class OptionError(UsageError):
    """A Locust option of the plugin that cannot be used; ``field`` is the ``--flag``."""


class CampaignError(UsageError):
    """A campaign file that cannot be run; ``field`` is the path inside the file."""


class RecordsError(UsageError):
    """A records file this version cannot read (a newer schema, or not a records file);
    ``field`` is its path."""


class ModelError(UsageError):
    """The sweep cannot identify the model (too few chunk sizes, no multi-event run): the
    campaign's ``matrix`` is what to change."""

    def __init__(self, message: str) -> None:
        super().__init__("matrix", message)


class RetryableError(RamplabError):
    """A failure that a later attempt may not meet (a refused or unreachable dependency)."""


class AuthError(RetryableError, RuntimeError):
    """The token endpoint refused the credentials or answered something unusable.

    A request chain records the attempt as ``auth_error`` and leaves the next try to its retry
    policy (each try fetches a token anew); model discovery at start-up turns it into a
    ``UsageError``.
    """


class ResolveError(RetryableError):
    """The DNS server of ``--resolver`` did not answer in time, refused the name, or had no A
    record for it."""


class FatalError(RamplabError):
    """A failure that trying again cannot fix."""


class IntegrityError(FatalError):
    """The response's content does not match its signature (or it has none to check)."""


class MalformedResponse(FatalError):
    """The response breaks HTTP/1.1's syntax or framing (a bad status line, header line, chunk
    size or Content-Length): the server speaks bad HTTP, where a connection closed early is the
    network's doing or a crash."""


class StackError(FatalError):
    """A process of the stack did not come up (or died); carries its name, exit code and log
    tail. Not a ``UsageError``: the CLI maps an exit code 2 of the process to "usage", anything
    else to "run failed"."""

    def __init__(self, process: str, message: str, exit_code: int | None, log_tail: str) -> None:
        self.process = process
        self.exit_code = exit_code
        self.log_tail = log_tail
        super().__init__(message)


class StorageError(FatalError):
    """A results file could not be written; ``path`` and ``reason`` (the OS's words) name it.
    Not a ``UsageError``: the input was fine, the disk was not (exit code 4, never 2)."""

    def __init__(self, path: Path | str, reason: str, *, full: bool = False) -> None:
        self.path = str(path)
        self.reason = reason
        self.full = full
        what = "results disk full" if full else "cannot write results"
        super().__init__(f"{what}: {self.path} ({reason})")

    @staticmethod
    def is_storage(exc: OSError) -> bool:
        """A write failure of the disk itself (full, over quota, I/O error), not of the input
        (a missing directory, a permission)."""
        return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO)

    @classmethod
    def of(cls, exc: OSError, path: Path | str | None = None) -> StorageError:
        """The error for ``exc``, raised while writing ``path`` (default: the error's file)."""
        where = path if path is not None else (exc.filename or "?")
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        return cls(where, exc.strerror or str(exc), full=full)
