"""A workaround for a Locust worker stall: its default option values, computed once.

Locust 2.x rebuilds its whole argument parser for *every* option key on every spawn message a
worker receives (``runners.py``: ``k not in argument_parser.default_args_dict()`` inside a
comprehension). That stalls the worker's event loop for 100–200 ms each time the shape changes the
user count; in the rate-precision benchmark every arrival due meanwhile was sent that late (p99
arrival error 100–300 ms, single-digit ms with this cache). The defaults cannot change within a
process, so a copy of the first result is as good.
"""

from __future__ import annotations

import functools
from typing import Any

from locust import argument_parser as locust_arguments


def cache_default_args() -> None:
    """Make ``locust.argument_parser.default_args_dict`` compute its result once (idempotent)."""
    original = locust_arguments.default_args_dict
    if getattr(original, "_ramplab_cached", False):
        return
    cached = functools.cache(original)

    def default_args_dict() -> dict[str, Any]:
        return dict(cached())

    default_args_dict._ramplab_cached = True  # type: ignore[attr-defined]
    locust_arguments.default_args_dict = default_args_dict
