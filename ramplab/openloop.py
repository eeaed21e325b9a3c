"""Compatibility: ``from ramplab.openloop import RampShape, RampUser`` keeps working.

The open-loop engine's Locust parts live in :mod:`ramplab.plugin`; its pure parts (plan,
arrivals, pacer, sizing) in :mod:`ramplab.load`.
"""

from ramplab.plugin.ramp_user import RampUser
from ramplab.plugin.shape import RampShape

__all__ = ["RampShape", "RampUser"]
