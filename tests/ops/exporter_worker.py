"""A load-generator worker reduced to its exporter: ``python -m tests.ops.exporter_worker``.

Feeds a deterministic set of records (:func:`records`) to a :class:`LoadMetrics`, serves it on a
free loopback port, prints ``port=N`` and then keeps observing a record every few milliseconds
(``--trickle``) or idles, until it is terminated. With ``--gevent`` it monkey-patches first, as a
Locust worker does.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable

from ramplab.measure.record import AttemptRecord, RequestRecord

KINDS = ("http_status", "timeout", "connect", "stream_incomplete")


def records(seed: int, count: int) -> list[RequestRecord]:
    """``count`` varied records: successes with token gaps and phases, errors, retried chains."""
    rng = random.Random(seed)
    out: list[RequestRecord] = []
    for i in range(count):
        attempts = 1 + (i % 3 == 0) + (i % 7 == 0)
        ok = i % 5 != 4
        log = [
            AttemptRecord(attempt=a + 1, start=0.0, status=rng.choice((429, 503, None)),
                          error_kind="http_status", duration_ms=1.0)
            for a in range(attempts - 1)
        ]  # fmt: skip
        tokens = rng.randint(2, 40)
        ttft = rng.uniform(5.0, 3000.0)
        itl = [rng.uniform(0.3, 120.0) for _ in range(tokens - 1)]
        ttlt = ttft + sum(itl)
        out.append(
            RequestRecord(
                request_id=f"{seed}-{i}",
                worker=f"w{seed}",
                intended_start=1000.0 + i,
                actual_start=1000.0 + i,
                ok=ok,
                status=200 if ok else rng.choice((429, 500, 503)),
                error_kind=None if ok else rng.choice(KINDS),
                attempts=attempts,
                attempt_log=log,
                lateness_ms=rng.uniform(0.0, 30.0),
                ttft_ms=ttft if ok else None,
                ttft_send_ms=ttft - 1.0 if ok else None,
                ttlt_ms=ttlt if ok else None,
                ttlt_send_ms=ttlt - 1.0 if ok else None,
                tpot_ms=(ttlt - ttft) / (tokens - 1) if ok else None,
                itl_ms=itl if ok else [],
                phases_ms={"dns": 0.0, "connect": rng.uniform(0.1, 3.0), "wait": ttft / 2},
                server_timing_ms={"queue": rng.uniform(0.0, 50.0), "prefill": ttft / 3},
                output_tokens=tokens if ok else None,
                slo_ok=(ttft < 2000.0) if ok else None,
            )
        )
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--run", default="r1")
    parser.add_argument("--trickle", action="store_true")
    parser.add_argument("--gevent", action="store_true")
    args = parser.parse_args(argv)
    sleep: Callable[[float], None]
    if args.gevent:
        from gevent import monkey

        monkey.patch_all()
        import gevent

        sleep = gevent.sleep
    else:
        import time

        sleep = time.sleep
    from prometheus_client import CollectorRegistry

    from ramplab.metrics.exporter import LoadMetrics, serve

    registry = CollectorRegistry()
    metrics = LoadMetrics(registry, run=args.run, scenario="test")
    for record in records(args.seed, args.records):
        metrics.observe(record)
    metrics.arrival_scheduled(args.records + 3)
    metrics.arrival_dropped(3)
    port = serve(registry, 0)
    print(f"port={port}", flush=True)
    extra = records(args.seed + 1000, 1)[0]
    while True:  # until the test terminates the process
        if args.trickle:
            metrics.observe(extra)
        sleep(0.005)


if __name__ == "__main__":
    main(sys.argv[1:])
