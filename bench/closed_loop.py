"""A closed-loop load process: ``C`` kept-alive connections, each sending the next request as soon
as the previous answer is read.

It runs as its own process (``python -m bench.closed_loop``) so that it never shares an
interpreter, a GIL or an event loop with the server it measures, and it reports its own CPU time
so a benchmark can show it was not the bottleneck. It is hand-written on purpose: plain HTTP/1.1
on uvloop streams, the request bytes built once, the response read by ``Content-Length`` and never
parsed — tens of microseconds of client CPU per request.

Protocol on stdin/stdout, one JSON line per step, so the parent can scrape the server between
phases:

1. connect, run the warm-up for ``--warmup-s``, let every in-flight request finish, print
   ``{"ready": true}``;
2. wait for a line on stdin, run the measured phase for ``--duration-s``, let every in-flight
   request finish (so the server has seen exactly the measured requests), print the result:
   ``requests``, ``errors`` (by status), ``elapsed_s``, ``cpu_s`` (this process), ``p50_ms``,
   ``p99_ms``, ``mean_ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import orjson
import uvloop


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    errors: Counter[int] = field(default_factory=Counter)


def build_request(host: str, port: int, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def content_length(head: bytes) -> int:
    lowered = head.lower()
    at = lowered.find(b"\r\ncontent-length:")
    if at < 0:
        raise ValueError("response without content-length")
    end = lowered.find(b"\r\n", at + 2)
    return int(lowered[at + len(b"\r\ncontent-length:") : end])


async def user(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    request: bytes,
    deadline: float,
    phase: Phase,
) -> None:
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(content_length(head))
        phase.latencies.append(time.perf_counter() - start)
        status = int(head[9:12])
        if status != 200:
            phase.errors[status] += 1


async def main(args: argparse.Namespace) -> None:
    request = build_request(args.host, args.port, args.path, args.body.encode())
    connections = [
        await asyncio.open_connection(args.host, args.port) for _ in range(args.concurrency)
    ]

    async def run(seconds: float) -> Phase:
        phase = Phase()
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(user(r, w, request, deadline, phase) for r, w in connections))
        return phase

    await run(args.warmup_s)
    print(orjson.dumps({"ready": True}).decode(), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    phase = await run(args.duration_s)
    cpu_s, elapsed_s = time.process_time() - cpu0, time.perf_counter() - wall0
    for _, writer in connections:
        writer.close()
    ms = np.array(phase.latencies) * 1000
    result = {
        "requests": len(phase.latencies),
        "errors": {str(k): v for k, v in phase.errors.items()},
        "elapsed_s": elapsed_s,
        "cpu_s": cpu_s,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
    }
    print(orjson.dumps(result).decode(), flush=True)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/v1/chat/completions")
    parser.add_argument("--body", required=True, help="the JSON request body")
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--warmup-s", type=float, default=0.5)
    parser.add_argument("--duration-s", type=float, default=3.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    uvloop.run(main(parse(sys.argv[1:])))
