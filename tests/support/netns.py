"""Hosts made of Linux network namespaces: one per host, joined by veth pairs to a bridge.

``Network`` creates a hub namespace holding a bridge and, per host, a namespace whose ``eth0``
is one end of a veth pair (the other end is a bridge port in the hub). Addresses come from
198.18.0.0/15, the range reserved for network benchmark tests (RFC 2544), inside the
namespaces only: nothing is added to the test machine's own namespace, so no traffic of the
test can leave it, and nothing outside can reach the test's processes. A host named in
``delays`` is joined by a delaying cable instead of a veth pair (``cable.py``: two TAP devices
and a process copying frames between them late, since this kernel has no ``tc netem``), so
every frame to and from that host waits that long.

Every name carries a random tag, so parallel runs never collide; ``close`` kills whatever still
runs in the namespaces and deletes them (the veths go with them), also after a failure.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

SUBNET = "198.18.{index}.{host}"
CABLE = Path(__file__).with_name("cable.py")


def usable() -> str | None:
    """Why namespaces cannot be used here, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    if not os.access("/dev/net/tun", os.R_OK | os.W_OK):
        return "no /dev/net/tun for the delaying cable"
    return None


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=20, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Host:
    """One namespace: its name and its address on the bridge."""

    namespace: str
    address: str

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *args]


@dataclass
class Network:
    """Hosts on one bridge; use as a context manager (``close`` always runs)."""

    names: Sequence[str]
    delays: Mapping[str, float] = field(default_factory=dict)  # host → ms each way
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    hosts: dict[str, Host] = field(default_factory=dict)
    _created: list[str] = field(default_factory=list)
    _cables: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def hub(self) -> str:
        return f"rl{self.tag}-hub"

    def open(self) -> Network:
        index = int(self.tag, 16) % 250  # a /24 per network, for readable logs only
        self._add_namespace(self.hub)
        _run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self.hub, "link", "set", "br0", "up")
        for number, name in enumerate(self.names, start=1):
            namespace = f"rl{self.tag}-{name}"
            self._add_namespace(namespace)
            port = f"p{number}"
            if name in self.delays:
                self._cable(port, namespace, self.delays[name])
            else:
                _run("ip", "-n", self.hub, "link", "add", port, "type", "veth",
                     "peer", "name", "eth0", "netns", namespace)  # fmt: skip
            _run("ip", "-n", self.hub, "link", "set", port, "master", "br0", "up")
            address = SUBNET.format(index=index, host=number)
            _run("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _run("ip", "-n", namespace, "link", "set", "eth0", "up")
            _run("ip", "-n", namespace, "link", "set", "lo", "up")
            self.hosts[name] = Host(namespace, address)
        return self

    def _cable(self, port: str, namespace: str, delay_ms: float) -> None:
        """``port`` on the bridge, ``eth0`` in ``namespace``, ``delay_ms`` between them."""
        far = f"{port}x"
        cable = subprocess.Popen(
            ["ip", "netns", "exec", self.hub, sys.executable, str(CABLE), port, far,
             str(delay_ms)], stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self._cables.append(cable)
        assert cable.stdout is not None
        if cable.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the delaying cable did not start (exit {cable.wait(5)})")
        _run("ip", "-n", self.hub, "link", "set", far, "netns", namespace)
        _run("ip", "-n", namespace, "link", "set", far, "name", "eth0")

    def close(self) -> None:
        for cable in self._cables:
            cable.kill()
            cable.wait(10)
            if cable.stdout is not None:
                cable.stdout.close()
        self._cables.clear()
        for namespace in reversed(self._created):
            listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                                    text=True, timeout=10, check=False)  # fmt: skip
            for pid in listed.stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=10,
                           check=False)  # fmt: skip
        self._created.clear()

    def _add_namespace(self, namespace: str) -> None:
        _run("ip", "netns", "add", namespace)
        self._created.append(namespace)

    def __enter__(self) -> Network:
        try:
            return self.open()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
