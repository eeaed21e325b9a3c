"""The baseline of ``stream_accuracy``: a naive Locust ``HttpUser`` streaming chat completions.

What Locust-based LLM benchmarks typically do: ``requests`` with ``stream=True``, ``iter_lines()``,
``json.loads`` of each ``data:`` line, and the clock read *after* parsing, when a line turns out
to carry content. It asks the target for its per-event send times (``timing_detail``) exactly as
the ramplab run does, and appends one JSON line per finished stream to ``$BENCH_NAIVE_OUT``.
Settings come from ``BENCH_*`` variables so both clients run the very same job.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import Any

from locust import HttpUser, constant, task

OUT = open(os.environ.get("BENCH_NAIVE_OUT", os.devnull), "a", encoding="utf-8")  # noqa: SIM115
BODY: dict[str, Any] = {
    "model": os.environ.get("BENCH_MODEL", "ramplab-sim-1"),
    "messages": [{"role": "user", "content": "time data load rate"}],
    "max_tokens": int(os.environ.get("BENCH_MAX_TOKENS", "24")),
    "stream": True,
    "stream_options": {"include_usage": True},
    "ignore_eos": True,
    "chunk_size": 1,
    "timing_detail": True,
}
TIMING = b": ramplab-timing "


class NaiveStreamUser(HttpUser):
    wait_time = constant(0)

    @task
    def chat(self) -> None:
        start_epoch = time.time()
        started = time.perf_counter()
        stamps: list[float] = []
        server: dict[str, Any] = {}
        with self.client.post(
            "/v1/chat/completions", json=BODY, stream=True, catch_response=True
        ) as response:
            for line in response.iter_lines():
                if line.startswith(b"data: "):
                    payload = line[6:]
                    if payload == b"[DONE]":
                        continue  # read on to the end, so the connection can be kept alive
                    chunk = json.loads(payload)
                    choices = chunk.get("choices") or []
                    if choices and choices[0].get("delta", {}).get("content"):
                        stamps.append(time.perf_counter())  # after parsing, as peers do
                elif line.startswith(TIMING):
                    server = json.loads(line[len(TIMING) :])
            response.success()
        if not stamps:
            return
        record = {
            "start": start_epoch,
            "end": time.time(),
            "ttft_ms": (stamps[0] - started) * 1000.0,
            "itl_ms": [(b - a) * 1000.0 for a, b in itertools.pairwise(stamps)],
            "server_ttft_ms": server.get("ttft_ms"),
            "server_events_ms": server.get("events_ms", []),
        }
        OUT.write(json.dumps(record) + "\n")
        OUT.flush()
