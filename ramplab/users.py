"""Deprecated: ``from ramplab.users import LLMStreamUser`` still works in 0.x, with a warning.

Locustfiles import the Locust classes from the package root: ``from ramplab import
LLMStreamUser``. This module goes in the next release (CHANGELOG.md).
"""

import warnings

from ramplab.plugin.users import LLMStreamUser

warnings.warn(
    "ramplab.users is deprecated: use `from ramplab import LLMStreamUser`",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["LLMStreamUser"]
