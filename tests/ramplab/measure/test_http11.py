"""``http11.py``, the measured request's own HTTP/1.1 exchange, against a raw socket server that
writes byte-exact responses: every framing, where bytes are cut, when connections are reused,
and every protocol failure as the httpcore exception callers map to an error kind."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpcore
import pytest

from ramplab.errors import MalformedResponse
from ramplab.measure.client import ClientOptions, MeasuredClient, PhaseTrace, make_client
from ramplab.measure.http11 import request_head

# One scripted response: pieces written one after another (a callable is called in between:
# it may wait for the client), then the connection is closed when ``close`` says so.
Piece = bytes | Callable[[], object]


@dataclass
class Script:
    pieces: list[Piece]
    close: bool = False


@dataclass
class RawServer:
    """Answers the n-th request with ``scripts[n]``; counts connections and keeps requests."""

    scripts: list[Script]
    connections: int = 0
    port: int = 0
    requests: list[bytes] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)  # a script closed
    _listener: socket.socket = field(default_factory=socket.socket)

    def __enter__(self) -> RawServer:
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen()
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(10)
        with conn:
            buffer = b""
            while self.scripts:
                while b"\r\n\r\n" not in buffer:
                    try:
                        data = conn.recv(65536)
                    except ConnectionResetError:
                        return  # a client that closes with a response unread resets
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buffer[:length])
                buffer = buffer[length:]
                script = self.scripts.pop(0)
                for piece in script.pieces:
                    if callable(piece):
                        piece()
                    else:
                        conn.sendall(piece)
                if script.close:
                    conn.close()
                    self.closed.set()
                    return


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
EVENTS = [b'data: {"a": 1}\n\n', b"data: [DONE]\n\n"]


@pytest.fixture
def client() -> Iterator[MeasuredClient]:
    with make_client(ClientOptions(read_timeout_s=5.0)) as measured:
        yield measured


def fetch(client: MeasuredClient, server: RawServer) -> tuple[int, bytes]:
    response = client.open(server.url, {"x-test": "1"}, b"{}", PhaseTrace())
    try:
        return response.status, response.read()
    finally:
        response.close()


def test_a_chunked_body_cut_at_every_byte_is_read_whole_and_the_connection_kept(
    client: MeasuredClient,
) -> None:
    whole = HEAD + chunked(*EVENTS)
    one_by_one: list[Piece] = [whole[i : i + 1] for i in range(len(whole))]
    with RawServer([Script(one_by_one), Script([HEAD + chunked(*EVENTS)])]) as server:
        assert fetch(client, server) == (200, b"".join(EVENTS))
        assert fetch(client, server) == (200, b"".join(EVENTS))
        assert server.connections == 1


def test_many_chunks_in_one_read_extensions_and_trailers(client: MeasuredClient) -> None:
    body = b"5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nx-trailer: 1\r\n\r\n"
    with RawServer([Script([HEAD + body]), Script([HEAD + chunked(b"again")])]) as server:
        assert fetch(client, server) == (200, b"hello world")
        assert fetch(client, server) == (200, b"again")
        assert server.connections == 1


def test_a_chunks_data_is_handed_over_before_its_crlf_arrives(client: MeasuredClient) -> None:
    handed_over = threading.Event()

    def wait_for_the_client() -> None:
        assert handed_over.wait(5), "the client did not hand over the data it had"

    script = Script([HEAD + b"5\r\nhello", wait_for_the_client, b"\r\n0\r\n\r\n"])
    with RawServer([script]) as server:
        response = client.open(server.url, {}, b"{}", PhaseTrace())
        pieces = []
        for piece in response:
            pieces.append(piece)
            handed_over.set()
        response.close()
    assert pieces == [b"hello"]


def test_content_length_and_close_delimited_bodies(client: MeasuredClient) -> None:
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    unframed = b"HTTP/1.1 200 OK\r\n\r\nuntil the end"
    with RawServer(
        [Script([sized]), Script([sized]), Script([unframed], close=True), Script([sized])]
    ) as server:
        assert fetch(client, server) == (200, b"hello")
        assert fetch(client, server) == (200, b"hello")
        assert server.connections == 1  # a sized body keeps the connection
        assert fetch(client, server) == (200, b"until the end")
        assert fetch(client, server) == (200, b"hello")
        assert server.connections == 2  # a close-delimited body cannot


def test_interim_responses_are_skipped(client: MeasuredClient) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
    with RawServer([Script([interim + HEAD + chunked(b"x")])]) as server:
        assert fetch(client, server) == (200, b"x")


def test_connection_close_and_http_1_0_are_not_reused(client: MeasuredClient) -> None:
    closing = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\na"
    old = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nb"
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nc"
    scripts = [Script([closing], close=True), Script([old], close=True), Script([sized])]
    with RawServer(scripts) as server:
        assert [fetch(client, server)[1] for _ in range(3)] == [b"a", b"b", b"c"]
        assert server.connections == 3


def test_an_idle_connection_the_server_closed_is_replaced(client: MeasuredClient) -> None:
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    with RawServer([Script([sized], close=True), Script([sized])]) as server:
        assert fetch(client, server) == (200, b"ok")
        assert server.closed.wait(5)  # on loopback its FIN is in our socket once close returns
        assert fetch(client, server) == (200, b"ok")
        assert server.connections == 2


def test_a_body_left_unread_closes_its_connection(client: MeasuredClient) -> None:
    with RawServer([Script([HEAD + chunked(*EVENTS)]), Script([HEAD + chunked(b"b")])]) as server:
        client.open(server.url, {}, b"{}", PhaseTrace()).close()
        assert fetch(client, server) == (200, b"b")
        assert server.connections == 2


CUT = httpcore.RemoteProtocolError  # the connection ended early: what httpcore raises
BAD = MalformedResponse  # the server broke HTTP/1.1's syntax or framing


@pytest.mark.parametrize(
    ("response", "raised", "message"),
    [
        (b"", CUT, "Server disconnected without sending a response"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", CUT, "Server disconnected without sending a response"),
        (b"HTTP/2 200 OK\r\n\r\n", BAD, "bad status line"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", BAD, "bad header line"),
        (HEAD + b"zz\r\nhello\r\n", BAD, "bad chunk size line"),
        (HEAD + b"5\r\nhello!!", BAD, "chunk data not followed by CRLF"),
        (HEAD + b"5\r\nhel", CUT, "incomplete chunked read"),
        (HEAD + b"5\r\nhello\r\n", CUT, "incomplete chunked read"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello", CUT, "4 bytes missing"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            BAD,
            "Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", BAD, "Transfer-Encoding"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", BAD, "101"),
    ],
)
def test_protocol_failures_tell_a_cut_from_bad_http(
    client: MeasuredClient, response: bytes, raised: type[Exception], message: str
) -> None:
    with (
        RawServer([Script([response], close=True)]) as server,
        pytest.raises(raised, match=message),
    ):
        fetch(client, server)


def test_a_response_head_past_the_limit_is_refused(client: MeasuredClient) -> None:
    endless = b"HTTP/1.1 200 OK\r\n" + b"x-filler: " + b"a" * 200_000
    with (
        RawServer([Script([endless])]) as server,
        pytest.raises(MalformedResponse, match="response head too large"),
    ):
        fetch(client, server)


def test_a_silent_server_is_a_read_timeout() -> None:
    with (
        make_client(ClientOptions(read_timeout_s=0.2)) as client,
        RawServer([Script([HEAD + b"5\r\nhello", lambda: threading.Event().wait(2)])]) as server,
    ):
        response = client.open(server.url, {}, b"{}", PhaseTrace())
        with pytest.raises(httpcore.ReadTimeout):
            response.read()


def test_the_request_goes_out_in_one_piece_with_its_headers(client: MeasuredClient) -> None:
    with RawServer([Script([HEAD + chunked(b"x")])]) as server:
        fetch(client, server)
    request = server.requests[0]
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    assert lines[1] == f"Host: 127.0.0.1:{server.port}".encode()
    assert b"x-test: 1" in lines
    assert b"Content-Length: 2" in lines
    assert body == b"{}"


@pytest.mark.parametrize(
    "header",
    [(b"x-bad", b"one\r\nInjected: yes"), (b"bad name", b"1"), (b"x-nul", b"a\x00b")],
)
def test_a_header_that_could_split_the_request_is_refused(header: tuple[bytes, bytes]) -> None:
    with pytest.raises(httpcore.LocalProtocolError, match="illegal header"):
        request_head(b"/", [header])


def test_the_phases_are_traced_as_httpcore_traces_them(client: MeasuredClient) -> None:
    with RawServer([Script([HEAD + chunked(b"x")]), Script([HEAD + chunked(b"y")])]) as server:
        first, second = PhaseTrace(), PhaseTrace()
        for trace in (first, second):
            response = client.open(server.url, {}, b"{}", trace)
            response.read()
            response.close()
    assert first.connected
    assert not second.connected
    assert set(first.phases_ms()) == {"dns", "connect", "tls", "stall", "send", "wait"}
    # A new connection went out with its SYN (less the resolving before it), stamped right
    # around the system call: after the trace's own mark, which comes before resolving.
    connection = first.connection
    assert connection is not None
    assert connection.connect_from is not None
    assert connection.connect_until is not None
    assert first.went_out == connection.connect_from - connection.dns_s
    assert first.went_out >= first.marks["connection.connect_tcp.started"]
    assert first.send_uncertainty_s == connection.connect_until - connection.connect_from
    assert second.went_out == second.marks["http11.send_request_headers.started"]
    assert second.phases_ms()["connect"] == 0.0
    assert first.headers_at is not None
    assert first.headers_at >= first.marks["http11.send_request_body.complete"]
