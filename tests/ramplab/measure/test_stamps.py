"""How exact the stamps are: each event its own packet's stamp however late it is read, one clock
per stamp, the send and the SYN stamped at their system calls, and honesty where reads cannot be
cut (coalesced events, their bound)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from ramplab.measure.attempt import run_attempt
from ramplab.measure.chain import Endpoint, RequestChain
from ramplab.measure.client import ClientOptions, make_client
from ramplab.measure.timebase import Timebase
from tests.support.processes import TargetProcess
from tests.support.tiny_server import DONE, ROLE, Reply, TinyServer, chunk, usage

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
APART_S = 0.03
BUSY_S = 0.25
PACED_TARGET = {
    "APP_LATENCY__PREFILL_OVERHEAD_MS": "20",
    "APP_LATENCY__PREFILL_PER_TOKEN_MS": "0",
    "APP_LATENCY__ITL_MS": str(APART_S * 1000),
    "APP_LATENCY__ITL_JITTER_MS": "0",
    "APP_SIGNING__MODE": "off",
}
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="kernel stamps are Linux only")


def test_one_clock_per_stamp() -> None:
    timebase = Timebase()
    assert timebase.bracket_s < 0.01
    now = time.perf_counter()
    assert timebase.monotonic(timebase.epoch(now)) == pytest.approx(now, abs=1e-6)
    assert abs(timebase.epoch(time.perf_counter()) - time.time()) < 0.01


def paced(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    return Reply(
        body=[
            ROLE,
            chunk(" a"),
            ("sleep", APART_S),
            chunk(" b"),
            ("sleep", APART_S),
            chunk(" c"),
            usage(3),
            DONE,
        ]
    )


@pytest.mark.timing  # the paced target must keep its pace: alone, after the parallel phase
def test_a_starved_reader_marks_the_events_it_read_together() -> None:
    """A thread spinning beside the reader holds the GIL for a tenth of a second at a time: the
    reader gets to the socket late, finds several tokens merged into one read and one stamp, and
    must say so — never pool their gaps as zero. The target runs in a process of its own, so it
    keeps its pace."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    body = {
        **BODY,
        "model": "ramplab-sim-1",
        "max_tokens": 12,
        "ignore_eos": True,
        "chunk_size": 1,
        "stream_options": {"include_usage": True},
    }
    interval = sys.getswitchinterval()
    with TargetProcess(PACED_TARGET) as target, make_client(ClientOptions()) as client:
        chain = RequestChain(client, Endpoint(target.url + "/v1/chat/completions"))
        chain.run(body)  # connected and warm
        hog = threading.Thread(target=spin, daemon=True)
        sys.setswitchinterval(0.1)
        hog.start()
        try:
            record = chain.run(body)
        finally:
            stop.set()
            hog.join()
            sys.setswitchinterval(interval)
    assert record.ok
    assert record.coalesced_events != []
    # What is pooled is what was measured: no gap of two events read as one.
    assert all(gap > APART_S * 1000 / 2 for gap in record.measured_itl())
    assert len(record.itl_ms) == 11  # the record keeps every gap, in order
    # How late it read, and how far its TTFT may be off, are on the record. (Not how much: on a
    # busy machine the target may be starved too and send its tokens in a burst, when merged
    # tokens did arrive together and the bound is rightly small.)
    assert record.read_delay_ms is not None
    assert record.stamp_error_ms is not None


@linux_only
@pytest.mark.timing
def test_the_last_token_is_not_stamped_with_the_tail_written_after_it() -> None:
    """The usage chunk and [DONE] follow the last token within a millisecond: read in one piece
    they would give it their stamp (the tail's)."""

    def tail_later(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        later = ("sleep", APART_S)
        return Reply(body=[ROLE, chunk(" a"), later, chunk(" b"), later, usage(2), DONE])

    with TinyServer(tail_later) as srv, make_client(ClientOptions()) as client:
        url = srv.url + "/v1/chat/completions"
        record = RequestChain(client, Endpoint(url), sleep=time.sleep).run(BODY)
        time.sleep(0)
        late = RequestChain(client, Endpoint(url)).run(BODY)
    for r in (record, late):
        assert r.ok
        assert r.ttlt_send_ms is not None
        assert r.ttft_send_ms is not None
        # The tail came APART_S after the last token: the TTLT must not include it.
        assert r.ttlt_send_ms - r.ttft_send_ms < APART_S * 1000 * 1.5
        assert r.coalesced_events == []
        assert r.stamp_error_ms is not None
        assert r.stamp_error_ms < 5.0
        assert r.read_delay_ms is not None


def whole_read(method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    # Both tokens in one write: one read, one stamp.
    return Reply(body=[ROLE, ("sleep", APART_S), chunk(" a") + chunk(" b"), ("sleep", 0.01), DONE])


def test_token_events_read_together_are_marked_coalesced() -> None:
    with TinyServer(whole_read) as srv, make_client(ClientOptions()) as client:
        url = srv.url + "/v1/chat/completions"
        record = RequestChain(client, Endpoint(url)).run(BODY)
        attempt = run_attempt(client, url, BODY, {}, 10.0)
    assert record.ok
    # " a" shared its read with " b": its stamp is only an upper bound, its gap not measured.
    assert record.coalesced_events == [0]
    assert record.itl_ms != []
    assert record.measured_itl() == []
    assert [event.coalesced for event in attempt.token_events] == [True, False]
    first = attempt.token_events[0]
    # The bound reaches back to the previous read (the role event's, APART_S earlier).
    assert first.late_by_at_most == pytest.approx(APART_S, abs=0.02)
    if record.stamp_error_ms is not None:  # kernel stamps: the bound includes the first token's
        assert record.stamp_error_ms >= first.late_by_at_most * 1000 * 0.5


@linux_only
def test_a_new_connection_is_timed_from_its_syn_and_connect_is_the_kernels_handshake() -> None:
    with TinyServer(paced) as srv, make_client(ClientOptions(reuse_connections=False)) as client:
        record = RequestChain(client, Endpoint(srv.url + "/v1/chat/completions")).run(BODY)
    phases = record.phases_ms
    assert record.ok
    # Loopback: the SYN → SYN-ACK round trip is tens of microseconds, the kernel's own figure.
    assert 0 < phases["connect"] < 5.0
    assert phases["stall"] >= 0.0
    # Stamped right around the connect system call: a bracket of microseconds, not a hub switch.
    assert record.stamp_error_ms is not None
    assert record.stamp_error_ms < 5.0
    assert record.local_port is not None
