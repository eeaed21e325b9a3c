"""``--workers 2``: two processes share the port and one /metrics sums them both."""

from __future__ import annotations

import concurrent.futures

import httpx

from tests.support.scrape import metric
from tests.target.conftest import StartTarget

MODEL = "ramplab-sim-1"


def test_two_workers_serve_and_metrics_sum_across_them(start_target: StartTarget) -> None:
    target = start_target(workers=2)
    pids: set[int] = set()
    # Each request on a new connection; the kernel hands accepts to whichever process wins.
    for _ in range(400):
        with httpx.Client() as client:
            pids.add(client.get(target.url + "/healthz").json()["pid"])
        if len(pids) == 2:
            break
    assert len(pids) == 2

    requests = 24

    def complete(seed: int) -> int:
        with httpx.Client(timeout=30) as client:
            response = client.post(
                target.url + "/v1/chat/completions",
                json={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 7,
                    "ignore_eos": True,
                    "stream": seed % 2 == 0,
                    "seed": seed,
                },
            )
            response.read()
            return response.status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(complete, range(requests)))
    assert statuses == [200] * requests
    url = target.url + "/metrics"
    # Whichever process answers the scrape, the totals cover both.
    for _ in range(6):
        assert metric(url, "target_completions_total", outcome="completed") == requests
        assert metric(url, "target_output_tokens_total") == requests * 7
        assert (
            metric(
                url,
                "target_http_request_duration_seconds_count",
                route="/v1/chat/completions",
                status="200",
            )
            == requests
        )
