"""The study analyses a campaign may name with ``study:``, checked when the campaign is loaded.

Names map to ``"module:function"`` strings that ``ramplab.study.registry`` imports on use: a
campaign is validated without importing any analysis (or the layers above the campaign's).
"""

from __future__ import annotations

from ramplab.errors import UsageError

__all__ = ["STUDIES", "check_study"]

STUDIES: dict[str, str] = {
    "chunking": "ramplab.study.chunking.analysis:analyse",
    "decay": "ramplab.study.decay.analysis:analyse",
    "decomposition": "ramplab.study.decomposition.analysis:analyse",
    "inflation": "ramplab.study.inflation.analysis:analyse",
    "retries": "ramplab.study.retries.analysis:analyse",
    "needle": "ramplab.study.needle.analysis:analyse",
}


def check_study(name: object, field: str = "study") -> str:
    """``name`` when it is a registered analysis; ``UsageError`` naming ``field`` otherwise."""
    if not isinstance(name, str) or name not in STUDIES:
        known = ", ".join(sorted(STUDIES)) or "none yet"
        raise UsageError(field, f"{name!r} is not a study analysis (known: {known})")
    return name
