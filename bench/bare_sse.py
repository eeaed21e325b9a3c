"""The baseline: a bare sse-starlette endpoint streaming pre-built events as fast as it can.

It sends the same bytes per event as the target does at the same chunk size (a chat chunk with
``chunk_size`` words), so the ratio measures only what the target adds: validation, scheduling,
pacing bookkeeping, metrics.
"""

from __future__ import annotations

import orjson
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

EVENT_TEMPLATE = (
    b'data: {"id":"chatcmpl-000000000000000000000000","object":"chat.completion.chunk",'
    b'"created":1700000000,"model":"ramplab-sim-1","system_fingerprint":"ramplab-sim",'
    b'"choices":[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null}]}\n\n'
)


async def stream(request: Request) -> EventSourceResponse:
    body = orjson.loads(await request.body())
    tokens = int(body["max_tokens"])
    chunk = int(body.get("chunk_size") or 1)
    event = EVENT_TEMPLATE % orjson.dumps(" word" * chunk)

    async def events():  # type: ignore[no-untyped-def]
        for _ in range((tokens + chunk - 1) // chunk):
            yield event
        yield b"data: [DONE]\n\n"

    return EventSourceResponse(events(), sep="\n", send_timeout=10)


app = Starlette(routes=[Route("/v1/chat/completions", stream, methods=["POST"])])
