"""Compatibility: ``from ramplab.users import LLMStreamUser`` in existing locustfiles keeps working.

The streaming user lives in :mod:`ramplab.plugin.users`, with the rest of the Locust plugin.
"""

from ramplab.plugin.users import LLMStreamUser

__all__ = ["LLMStreamUser"]
