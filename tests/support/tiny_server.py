"""A tiny purpose-built HTTP/1.1 server on 127.0.0.1:0 for producing every failure for real.

Raw asyncio streams on purpose: misbehaviour (a stream cut mid-chunk, a stall, malformed JSON)
must be byte-exact, which a framework would tidy up. Runs its own event loop in a thread.
Handlers get ``(method, path, headers, body)`` and return a ``Reply``: status, headers, and a
list of body actions — bytes to send, ``("sleep", seconds)``, ``"drop"`` (close the socket
without finishing), ``"stall"`` (send nothing more until the client gives up). A handler that
needs to know which client sent a request reads ``CLIENT_PORT`` (its connection's port on the
client's side, which tells one client process from another).
"""

from __future__ import annotations

import asyncio
import contextvars
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Action = bytes | tuple[str, float] | str


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: list[Action] = field(default_factory=list)
    chunked: bool = True  # False: no framing, the body ends when the connection closes


Handler = Callable[[str, str, dict[str, str], bytes], Reply]

# Set for the handler's call: each connection is served by its own task, with its own context.
CLIENT_PORT: contextvars.ContextVar[int] = contextvars.ContextVar("CLIENT_PORT")


class TinyServer:
    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.connections = 0
        self.client_ports: list[int] = []  # each connection's port on the client's side
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> TinyServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("tiny server did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", 0, ssl=self.ssl_context
            )
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()
        self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.client_ports.append(writer.get_extra_info("peername")[1])
        CLIENT_PORT.set(self.client_ports[-1])
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                reply = self.handler(method, path, headers, body)
                if not await self._respond(writer, reply):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.transport.abort()

    async def _respond(self, writer: asyncio.StreamWriter, reply: Reply) -> bool:
        head = [f"HTTP/1.1 {reply.status} X"]
        headers = {"content-type": "text/event-stream", **reply.headers}
        if reply.chunked:
            headers["transfer-encoding"] = "chunked"
        else:
            headers["connection"] = "close"
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        await writer.drain()
        for action in reply.body:
            if isinstance(action, bytes):
                writer.write(b"%x\r\n%s\r\n" % (len(action), action) if reply.chunked else action)
                await writer.drain()
            elif action == "drop":
                writer.transport.abort()
                return False
            elif action == "stall":
                await asyncio.sleep(30)
                return False
            elif isinstance(action, tuple):
                await asyncio.sleep(action[1])
        if not reply.chunked:
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def chunk(text: str) -> bytes:
    """An OpenAI stream event carrying ``text``."""
    import json

    data = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
DONE = b"data: [DONE]\n\n"


def usage(completion_tokens: int, prompt_tokens: int = 3) -> bytes:
    import json

    data = {
        "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"
