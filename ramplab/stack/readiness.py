"""What "healthy" means for each process of the stack, checked by polling with a deadline."""

from __future__ import annotations

import re
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx

from ramplab.errors import ResolveError
from ramplab.measure.resolver import DnsResolver

__all__ = ["DnsReady", "HttpReady", "LogReady", "PortReady", "Readiness"]


class Readiness(Protocol):
    """One non-blocking check; ``describe`` says what was awaited, for the error message."""

    def ready(self) -> bool: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class HttpReady:
    """``url`` answers 200; over HTTPS verified with ``ca_file`` (which the server may write only
    as it starts: not there yet means not ready)."""

    url: str
    ca_file: Path | None = None

    def ready(self) -> bool:
        verify: ssl.SSLContext | bool = True
        if self.ca_file is not None:
            if not self.ca_file.is_file():
                return False
            verify = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            return httpx.get(self.url, timeout=1.0, verify=verify).status_code == 200
        except httpx.HTTPError:
            return False

    def describe(self) -> str:
        return f"GET {self.url} → 200"


@dataclass(frozen=True, slots=True)
class PortReady:
    port: int
    host: str = "127.0.0.1"

    def ready(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def describe(self) -> str:
        return f"{self.host}:{self.port} accepting connections"


@dataclass(frozen=True, slots=True)
class DnsReady:
    """A DNS server on loopback ``port`` answers an A query for ``name``."""

    port: int
    name: str
    timeout_s: float = 1.0

    def ready(self) -> bool:
        try:
            DnsResolver(("127.0.0.1", self.port)).resolve(self.name, self.timeout_s)
        except (OSError, ResolveError):
            return False
        return True

    def describe(self) -> str:
        return f"an A record of {self.name} from 127.0.0.1:{self.port}/udp"


@dataclass(frozen=True, slots=True)
class LogReady:
    """A line matching ``pattern`` in a log file (e.g. the master counting its workers)."""

    path: Path
    pattern: str

    def ready(self) -> bool:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return re.search(self.pattern, text, re.MULTILINE) is not None

    def describe(self) -> str:
        return f"/{self.pattern}/ in {self.path.name}"
