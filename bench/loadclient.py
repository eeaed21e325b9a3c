"""A minimal asyncio HTTP/1.1 streaming client for benchmarks.

Hand-written on purpose: the benchmark must measure the *server*, so the client does the least
possible work per byte (it counts event separators, it does not parse JSON), and it stamps each
read with ``perf_counter`` the moment the bytes arrive.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import orjson


@dataclass
class StreamResult:
    events: int
    started: float
    event_times: list[float] = field(default_factory=list)
    ok: bool = True


async def one_stream(
    host: str, port: int, body: dict[str, object], keep_times: bool = False
) -> StreamResult:
    payload = orjson.dumps(body)
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request)
    result = StreamResult(events=0, started=started)
    previous_last = b""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            now = time.perf_counter()
            joined = previous_last + data
            found = joined.count(b"\n\n")
            result.events += found
            if keep_times:
                result.event_times.extend([now] * found)
            previous_last = data[-1:]
    except OSError:
        result.ok = False
    finally:
        writer.close()
    return result


async def run_for(
    host: str,
    port: int,
    body: dict[str, object],
    concurrency: int,
    duration_s: float,
) -> tuple[int, int, float]:
    """Keep ``concurrency`` streams going for ``duration_s``; (streams, events, elapsed)."""
    deadline = time.perf_counter() + duration_s
    streams = 0
    events = 0

    async def worker() -> None:
        nonlocal streams, events
        while time.perf_counter() < deadline:
            result = await one_stream(host, port, body)
            streams += 1
            events += result.events

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return streams, events, time.perf_counter() - start
