"""ramplab: open-loop, distributed load generation for streaming LLM APIs.

The public surface is ``__all__``: the exception tree, the exit codes and the Locust classes a
locustfile uses. The Locust classes load on first access, so that ``import ramplab`` (the CLI, a
report) never imports Locust, whose import monkey-patches the process with gevent.
"""

import importlib as _importlib
import typing as _typing
from importlib import metadata as _metadata

from ramplab.errors import (
    AuthError,
    CampaignError,
    FatalError,
    GateError,
    IntegrityError,
    MalformedResponse,
    ModelError,
    OptionError,
    PromConfigError,
    RamplabError,
    RecordsError,
    ResolveError,
    RetryableError,
    RetryConfigError,
    ShapeError,
    StackError,
    StorageError,
    UsageError,
)
from ramplab.exitcodes import ExitCode

if _typing.TYPE_CHECKING:
    from ramplab.plugin.ramp_user import RampUser
    from ramplab.plugin.shape import RampShape
    from ramplab.plugin.users import LLMStreamUser

try:
    __version__ = _metadata.version("ramplab")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

_LAZY = {
    "LLMStreamUser": "ramplab.plugin.users",
    "RampShape": "ramplab.plugin.shape",
    "RampUser": "ramplab.plugin.ramp_user",
}

__all__ = [
    "AuthError",
    "CampaignError",
    "ExitCode",
    "FatalError",
    "GateError",
    "IntegrityError",
    "LLMStreamUser",
    "MalformedResponse",
    "ModelError",
    "OptionError",
    "PromConfigError",
    "RampShape",
    "RampUser",
    "RamplabError",
    "RecordsError",
    "ResolveError",
    "RetryConfigError",
    "RetryableError",
    "ShapeError",
    "StackError",
    "StorageError",
    "UsageError",
    "__version__",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ramplab' has no attribute {name!r}")
    return getattr(_importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
