"""The options of a Locust process running ramplab's plugin, and the settings built from them.

Every option is one entry of ``ramplab.options.schema``. The plugin (``ramplab.plugin``) uses
only these functions; each raises a ``UsageError`` that names the offending option.
"""

from __future__ import annotations

from typing import Any

from ramplab.options import run as _run
from ramplab.options import settings as _settings
from ramplab.options.run import RunOptions
from ramplab.options.settings import MetricsSettings, UserSettings

__all__ = [
    "MetricsSettings",
    "RunOptions",
    "UserSettings",
    "metrics_settings",
    "register_ramp_options",
    "register_stream_options",
    "run_options",
    "user_settings",
]


def register_stream_options(parser: Any) -> None:
    """The streaming user's and the exporter's options, on Locust's parser."""
    _settings.register(parser)


def register_ramp_options(parser: Any) -> None:
    """The ramp engine's ``--ramplab-*`` options, on Locust's parser."""
    _run.register(parser)


def user_settings(parsed: Any) -> UserSettings:
    """The streaming user's settings from Locust's parsed options, checked."""
    return _settings.from_options(parsed)


def metrics_settings(parsed: Any) -> MetricsSettings:
    """The exporter's settings from Locust's parsed options, checked."""
    return _settings.metrics_from_options(parsed)


def run_options(parsed: Any) -> RunOptions:
    """The ramp engine's options from Locust's parsed options, checked."""
    return _run.from_options(parsed)
