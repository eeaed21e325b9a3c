"""``python -m bench.timing_tap OUT.jsonl [target options]``: the target, keeping its own record of
every stream for clients that throw it away.

The target writes when it sent every content event into a comment line at the end of each stream
(``timing_detail``); a client that discards comments — GuideLLM keeps only the first and last
token's times, no raw packets — leaves nothing to compare with. This ASGI wrapper copies each
comment, with the stream's completion id and the epoch time the request reached the app, into
``OUT.jsonl`` (one line a stream: ``{"id": "chatcmpl-…", "arrival": s, "events_ms": [...]}``);
``bench/peers/streams.py`` pairs the lines with the client's requests by the id (GuideLLM keeps
it as ``response_id``). It adds a substring test or two per body write to the target's work and
nothing to its stamps, which are taken before the write.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TextIO

from starlette.applications import Starlette

import target_service.server as target_server
from target_service.app import create_app
from target_service.generation import TIMING_COMMENT

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PREFIX = b": " + TIMING_COMMENT.encode() + b" "
ID = re.compile(rb'"id":"([^"]+)"')


def timing_lines(body: bytes) -> list[dict[str, Any]]:
    """The timing comments in one body write (an SSE comment is never split across writes)."""
    if PREFIX not in body:
        return []
    return [
        json.loads(line[len(PREFIX) :]) for line in body.split(b"\n") if line.startswith(PREFIX)
    ]


class TimingTap:
    def __init__(self, app: Starlette, out: TextIO) -> None:
        self.app = app
        self.out = out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrival = time.time()
        completion_id: str | None = None

        async def tapped(message: Message) -> None:
            nonlocal completion_id
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                if completion_id is None and (found := ID.search(body)):
                    completion_id = found.group(1).decode()
                for timing in timing_lines(body):
                    record = {
                        "id": completion_id,
                        "arrival": arrival,
                        "events_ms": timing.get("events_ms"),
                    }
                    self.out.write(json.dumps(record) + "\n")
                    self.out.flush()  # read by the benchmark while the target still runs
            await send(message)

        await self.app(scope, receive, tapped)


def main(argv: list[str]) -> None:
    out = open(argv[0], "a")  # noqa: SIM115 — open for the life of the process
    build = create_app

    def tapped_app(*args: Any, **kwargs: Any) -> Any:
        return TimingTap(build(*args, **kwargs), out)

    # serve() looks create_app up in its module at call time; one worker process only.
    target_server.create_app = tapped_app  # type: ignore[attr-defined]
    target_server.cli(args=argv[1:], prog_name="python -m bench.timing_tap")


if __name__ == "__main__":
    main(sys.argv[1:])
