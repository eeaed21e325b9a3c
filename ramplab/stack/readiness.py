"""What "healthy" means for each process of the stack, checked by polling with a deadline."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx

__all__ = ["HttpReady", "LogReady", "PortReady", "Readiness"]


class Readiness(Protocol):
    """One non-blocking check; ``describe`` says what was awaited, for the error message."""

    def ready(self) -> bool: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class HttpReady:
    url: str

    def ready(self) -> bool:
        try:
            return httpx.get(self.url, timeout=1.0).status_code == 200
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
