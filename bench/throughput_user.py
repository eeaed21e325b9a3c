"""The baseline of ``bench/rate_precision.py``: Locust's own ``constant_throughput`` pacing.

A locustfile (``locust -f bench/throughput_user.py``): each user runs its requests at
``BENCH_USER_QPS`` per second with ``constant_throughput``, and the shape sets users = step rate ÷
per-user rate, the way Locust users get a rate without an arrival engine. The streaming user's
measurement is unchanged; each request is tagged with the step it was sent in (by the shared
``BENCH_START`` epoch) and with ``<user>-<sequence>`` as its id, so the benchmark can compare
every user's sends with its ideal period.
"""

from __future__ import annotations

import itertools
import math
import os
import time

from locust import LoadTestShape, constant_throughput

from ramplab.load.shapes import parse_shape
from ramplab.measure.record import RequestRecord
from ramplab.plugin import users
from ramplab.plugin.default_args import cache_default_args

SHAPE = parse_shape(os.environ.get("BENCH_SHAPE", "1@1s"))
START = float(os.environ.get("BENCH_START", "0"))
PER_USER_QPS = float(os.environ.get("BENCH_USER_QPS", "1"))
_users = itertools.count()
# The same fix of a Locust worker stall as the engine gets, so both sides pace on equal terms.
cache_default_args()


# ``users.LLMStreamUser``, not the bare name: Locust runs every concrete User class it finds in a
# locustfile's namespace, and the closed-loop streaming user would run beside this one.
class ThroughputUser(users.LLMStreamUser):
    wait_time = constant_throughput(PER_USER_QPS)

    def on_start(self) -> None:
        self.uid = next(_users)
        self.sequence = 0

    def run_request(
        self,
        intended_start: float | None = None,
        step: int | None = None,
        target_qps: float | None = None,
    ) -> RequestRecord:
        stage = SHAPE.stage_at(time.time() - START)
        if stage is None:
            return super().run_request()
        return super().run_request(step=stage.index, target_qps=stage.rate)

    def finish_record(self, record: RequestRecord) -> None:
        record.request_id = f"{self.uid}-{self.sequence}"
        self.sequence += 1


class ThroughputSteps(LoadTestShape):
    """Users for the current step (the first step's before ``BENCH_START``); stops at the end."""

    def tick(self) -> tuple[int, float] | None:
        elapsed = time.time() - START
        if elapsed >= SHAPE.duration_s:
            return None
        stage = SHAPE.stage_at(max(0.0, elapsed))
        assert stage is not None
        users = max(1, math.ceil(stage.rate / PER_USER_QPS))
        return users, float(max(users, 100))
