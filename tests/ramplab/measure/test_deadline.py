"""The deadline's arithmetic on a clock the test moves: which limit a blocking operation gets,
and what its timeout says. The real-socket cases are in ``test_faults.py``."""

from __future__ import annotations

from dataclasses import dataclass

import httpcore
import pytest

from ramplab.measure.deadline import NO_DEADLINE, Deadline


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_shorter_of_the_own_limit_and_the_time_left() -> None:
    clock = Clock()
    deadline = Deadline.after(5.0, clock.now, clock)
    assert deadline.limit(60.0, "read").seconds == 5.0
    assert deadline.limit(60.0, "read").name == "request"
    assert deadline.limit(2.0, "read").name == "read"
    clock.now += 4.0
    assert deadline.limit(2.0, "read").seconds == pytest.approx(1.0)
    assert deadline.limit(None, "connect").seconds == pytest.approx(1.0)
    assert NO_DEADLINE.limit(None, "read").seconds is None


def test_a_timeout_names_the_limit_and_what_was_being_done() -> None:
    clock = Clock()
    deadline = Deadline.after(5.0, clock.now, clock)

    def times_out(timeout: float | None) -> bytes:
        raise httpcore.ReadTimeout("timed out")

    with pytest.raises(httpcore.ReadTimeout, match=r"^read timeout \(2 s\) passed while reading"):
        deadline.run(2.0, "read", "reading the body", times_out)
    with pytest.raises(httpcore.ReadTimeout, match=r"^request timeout \(5 s\) passed while wait"):
        deadline.run(60.0, "read", "waiting for the response head", times_out)
    with pytest.raises(httpcore.ConnectTimeout, match=r"^request timeout \(5 s\) passed while con"):
        deadline.run(10.0, "connect", "connecting", times_out)


def test_past_the_deadline_nothing_blocks() -> None:
    clock = Clock()
    deadline = Deadline.after(5.0, clock.now, clock)
    clock.now += 5.0
    called: list[float | None] = []
    with pytest.raises(httpcore.ReadTimeout, match="request timeout"):
        deadline.run(60.0, "read", "reading the body", called.append)
    assert called == []  # a zero socket timeout would have made the read non-blocking
    with pytest.raises(httpcore.ReadTimeout, match="request timeout"):
        deadline.check("reading the body")
    NO_DEADLINE.check("reading the body")  # without a request timeout, never
