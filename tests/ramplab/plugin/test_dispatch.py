"""The dispatcher hands each arrival to the user that parked last, so spare users stay parked."""

from __future__ import annotations

import gevent

from ramplab.load.pacer import Arrival
from ramplab.plugin.dispatch import Dispatcher


def test_the_user_that_parked_last_gets_the_next_arrival() -> None:
    dispatcher = Dispatcher()
    got: dict[str, int | None] = {}

    def user(name: str) -> None:
        arrival = dispatcher.wait()
        got[name] = None if arrival is None else arrival.index

    users = [gevent.spawn(user, name) for name in ("a", "b", "c")]
    gevent.sleep(0)  # all three park, in this order
    assert dispatcher.idle == 3
    assert dispatcher.try_dispatch(Arrival(0, 0.0, 0.0))
    assert dispatcher.try_dispatch(Arrival(1, 0.1, 0.1))
    gevent.sleep(0)
    assert got == {"c": 0, "b": 1}  # "a", parked first, was never needed
    assert dispatcher.busy == 2
    assert dispatcher.idle == 1
    dispatcher.close()
    gevent.joinall(users, timeout=5)
    assert got["a"] is None  # released when the run ends
    assert not dispatcher.try_dispatch(Arrival(2, 0.2, 0.2))  # nobody parked: dropped
