"""A small disk of its own for one test: a tmpfs mounted on a fresh directory (root only), and a
way to fill it. Tests that need it are skipped where mounting is not allowed."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

MiB = 1 << 20


@contextlib.contextmanager
def tmpfs(path: Path, size_mib: int) -> Iterator[Path]:
    """``path`` as a tmpfs of ``size_mib`` MiB, unmounted on the way out."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "ramplab-test", str(path)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True, timeout=30)


def fill(directory: Path) -> Path:
    """A file that takes every free byte of ``directory``'s file system."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (MiB, 4096, 1):
            try:
                while out.write(b"\0" * chunk):
                    pass
            except OSError as full:
                if full.errno != errno.ENOSPC:
                    raise
    return filler
