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
    │   └── CampaignError     a campaign file that cannot be run (``ramplab.stack.campaign``)
    ├── RetryableError        may succeed when tried again: record it, let the retry policy decide
    │   ├── AuthError         the token endpoint is unreachable or refused the credentials
    │   └── ResolveError      the DNS server of --resolver gave no address (``measure.resolver``)
    └── FatalError            trying again changes nothing: record or report it, stop that work
        ├── IntegrityError    a response's content does not match its signature or seed
        └── StackError        a process of the local stack did not come up (``ramplab.stack.local``)

Every ``UsageError`` names the offending field and value in its message (``field`` holds the
dotted field name on its own) so a CLI can print it without a traceback.

Control-flow signals are not errors and stay outside the tree: they are private to the module
that raises and catches them (``ramplab.stack.run``'s interruption, ``ramplab.measure.attempt``'s
stream failure, which ends up as a record's ``error_kind``).
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "FatalError",
    "GateError",
    "IntegrityError",
    "PromConfigError",
    "RamplabError",
    "RetryConfigError",
    "RetryableError",
    "ShapeError",
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


class RetryableError(RamplabError):
    """A failure that a later attempt may not meet (a refused or unreachable dependency)."""


class AuthError(RetryableError, RuntimeError):
    """The token endpoint refused the credentials or answered something unusable.

    A request chain records the attempt as ``auth_error`` and leaves the next try to its retry
    policy (each try fetches a token anew); model discovery at start-up turns it into a
    ``UsageError``.
    """


class FatalError(RamplabError):
    """A failure that trying again cannot fix."""


class IntegrityError(FatalError):
    """The response's content does not match its signature (or it has none to check)."""
