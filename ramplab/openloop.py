"""Deprecated: ``from ramplab.openloop import RampShape, RampUser`` still works in 0.x, with a
warning.

Locustfiles import the Locust classes from the package root: ``from ramplab import RampShape,
RampUser``. This module goes in the next release (CHANGELOG.md).
"""

import warnings

from ramplab.plugin.ramp_user import RampUser
from ramplab.plugin.shape import RampShape

warnings.warn(
    "ramplab.openloop is deprecated: use `from ramplab import RampShape, RampUser`",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["RampShape", "RampUser"]
