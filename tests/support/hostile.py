"""A hostile HTTP server on 127.0.0.1: one misbehaviour per path, byte-exact on a raw socket.

Plain sockets and a thread per connection on purpose: the cases are what a framework (or
``tiny_server.py``'s asyncio streams) would refuse to send or tidy up — a head that never ends, a
chunk-size line that is not hex, a gzip body behind ``text/event-stream``, an HTTP/1.0 answer
ended by the close, bytes that are not UTF-8. Each case is a function that gets the connected
socket once the request has been read; whatever it does not send, the client never sees.
Everything a case waits for is bounded, so a client that never gives up cannot hang the suite.
"""

from __future__ import annotations

import contextlib
import email.utils
import gzip
import json
import math
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

Case = Callable[["Exchange"], None]
STALL_S = 8.0  # the longest any case keeps a client waiting: past every timeout the tests set


def event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def token(text: str) -> bytes:
    return event({"id": "c1", "choices": [{"index": 0, "delta": {"content": text}}]})


ROLE = event({"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
DONE = b"data: [DONE]\n\n"
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@dataclass(slots=True)
class Exchange:
    """One request, read; the case answers on ``sock``."""

    sock: socket.socket
    server: HostileServer
    path: str
    headers: dict[str, str]
    count: int  # 1 for the first request to this path, 2 for the second…

    def send(self, *parts: bytes) -> None:
        for part in parts:
            self.sock.sendall(part)

    def pause(self, seconds: float) -> bool:
        """Wait, unless the server is stopping; False once it is."""
        return not self.server.stopping.wait(seconds)


def silent(ex: Exchange) -> None:
    ex.pause(STALL_S)


def slow_headers(ex: Exchange) -> None:
    """A status line, then one header line every 0.2 s: every read is quick, the head never ends
    (until ``STALL_S``)."""
    ex.send(b"HTTP/1.1 200 OK\r\n")
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < STALL_S and ex.pause(0.2):
        n += 1
        ex.send(f"x-slow-{n}: {n}\r\n".encode())
    ex.send(b"Content-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n")


def trickle(ex: Exchange) -> None:
    """A token every 1.2 s: each shorter than the read timeout, together longer than the
    request's."""
    ex.send(SSE_HEAD + chunk(ROLE))
    started = time.monotonic()
    while time.monotonic() - started < STALL_S and ex.pause(1.2):
        ex.send(chunk(token(" a")))
    ex.send(chunk(DONE) + b"0\r\n\r\n")


HTML = b"<!doctype html><html><head><title>Sign in</title></head><body>Sign in to continue"


def html(ex: Exchange) -> None:
    ex.send(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
        + f"Content-Length: {len(HTML)}\r\n\r\n".encode()
        + HTML
    )


def gzip_stream(ex: Exchange) -> None:
    body = gzip.compress(ROLE + token("hi") + DONE)
    ex.send(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def redirect(ex: Exchange) -> None:
    ex.send(
        b"HTTP/1.1 307 Temporary Redirect\r\n"
        + f"Location: {ex.server.url}/v2/chat/completions\r\n".encode()
        + b"Content-Length: 0\r\n\r\n"
    )


def bad_chunk(ex: Exchange) -> None:
    ex.send(SSE_HEAD + chunk(ROLE) + b"zz\r\n" + token(" a") + b"\r\n")
    ex.pause(STALL_S)


def invalid_utf8(ex: Exchange) -> None:
    bad = b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"a\xff\xfeb"}}]}\n\n'
    ex.send(SSE_HEAD + chunk(ROLE) + chunk(bad) + chunk(token(" c")) + chunk(DONE) + b"0\r\n\r\n")


def empty(ex: Exchange) -> None:
    """What llama.cpp's server sends for a stream it cut: the opening chunk, then ``[DONE]``."""
    ex.send(SSE_HEAD + chunk(ROLE) + chunk(DONE) + b"0\r\n\r\n")


def tool_calls(ex: Exchange) -> None:
    """A stream whose output is a tool call: no content, no usage, and still an answer."""
    call = {"index": 0, "id": "t1", "type": "function", "function": {"name": "f", "arguments": ""}}
    delta = {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
    ex.send(SSE_HEAD + chunk(ROLE + event(delta) + DONE) + b"0\r\n\r\n")


def empty_json(ex: Exchange) -> None:
    """A plain (not streamed) answer with an empty message and no usage."""
    body = json.dumps({"id": "c1", "choices": [{"message": {"role": "assistant", "content": ""}}]})
    ex.send(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    )


def retry_after_date(ex: Exchange) -> None:
    """429 asking for a wait as an HTTP-date (whole seconds, at least 1.5 s ahead), then 200."""
    if ex.count == 1:
        until = math.ceil(time.time() + 1.5)
        ex.server.retry_at = until
        date = email.utils.formatdate(until, usegmt=True)
        ex.send(
            f"HTTP/1.1 429 Too Many Requests\r\nRetry-After: {date}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        )
        return
    ex.send(SSE_HEAD + chunk(ROLE + token("ok") + usage(1) + DONE) + b"0\r\n\r\n")


def usage(completion: int) -> bytes:
    return event(
        {"id": "c1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": completion}}
    )


def http10(ex: Exchange) -> None:
    """HTTP/1.0, no length, no chunking: the body ends when the server closes."""
    ex.send(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    ex.send(ROLE, token(" a"), token(" b"), usage(2), DONE)


def no_space(ex: Exchange) -> None:
    body = (ROLE + token(" a") + token(" b") + DONE).replace(b"data: ", b"data:")
    ex.send(SSE_HEAD + chunk(body) + b"0\r\n\r\n")


def crlf(ex: Exchange) -> None:
    body = (ROLE + token(" a") + token(" b") + DONE).replace(b"\n", b"\r\n")
    ex.send(SSE_HEAD + chunk(body) + b"0\r\n\r\n")


def utf8_split(ex: Exchange) -> None:
    """ "日本語" with its bytes split across two writes (and two chunks), mid-character."""
    event_bytes = token("日本語")
    cut = event_bytes.index("本".encode()) + 1
    ex.send(SSE_HEAD + chunk(ROLE) + chunk(event_bytes[:cut]))
    ex.pause(0.05)
    ex.send(chunk(event_bytes[cut:]) + chunk(DONE) + b"0\r\n\r\n")


def usage_only(ex: Exchange) -> None:
    """The final chunk carries usage and an empty ``choices``, as OpenAI's include_usage does."""
    ex.send(SSE_HEAD + chunk(ROLE + token(" a") + token(" b") + usage(2) + DONE) + b"0\r\n\r\n")


CASES: dict[str, Case] = {
    "/silent": silent,
    "/slow-headers": slow_headers,
    "/trickle": trickle,
    "/html": html,
    "/gzip": gzip_stream,
    "/redirect": redirect,
    "/bad-chunk": bad_chunk,
    "/invalid-utf8": invalid_utf8,
    "/empty": empty,
    "/tool-calls": tool_calls,
    "/empty-json": empty_json,
    "/retry-after-date": retry_after_date,
    "/http10": http10,
    "/no-space": no_space,
    "/crlf": crlf,
    "/utf8-split": utf8_split,
    "/usage-only": usage_only,
}


@dataclass(slots=True)
class HostileServer:
    """Serves ``CASES`` on 127.0.0.1 (an ephemeral port), one thread per connection; every
    connection is closed after its one exchange."""

    port: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)
    requests: list[Exchange] = field(default_factory=list)
    retry_at: float | None = None  # the epoch second ``retry_after_date`` asked to wait until
    _counts: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serve(self, listener: socket.socket) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # the listener was closed: stopping
            if self.stopping.is_set():
                sock.close()
                return
            thread = threading.Thread(target=self._exchange, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _exchange(self, sock: socket.socket) -> None:
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(STALL_S + 2)
            try:
                path, headers = _read_request(sock)
                with self._lock:
                    self._counts[path] += 1
                    ex = Exchange(sock, self, path, headers, self._counts[path])
                    self.requests.append(ex)
                case = CASES.get(path)
                if case is None:
                    sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    return
                case(ex)
            except OSError:
                return  # the client gave up first: what most cases are for


def _read_request(sock: socket.socket) -> tuple[str, dict[str, str]]:
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise ConnectionResetError("client closed before its request ended")
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        more = sock.recv(65536)
        if not more:
            break
        body += more
    return lines[0].split(" ")[1], headers


@contextmanager
def hostile_server() -> Iterator[HostileServer]:
    server = HostileServer()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        server.port = listener.getsockname()[1]
        acceptor = threading.Thread(target=server.serve, args=(listener,), daemon=True)
        acceptor.start()
        try:
            yield server
        finally:
            server.stopping.set()
            # A connection of its own wakes the acceptor, which then sees it is stopping.
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", server.port), 1).close()
            acceptor.join(5)
    for thread in server._threads:
        thread.join(STALL_S + 5)
