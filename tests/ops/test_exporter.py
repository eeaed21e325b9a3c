"""The load generator's exporter: exact values, the text format, cardinality, two processes."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ramplab.measure.record import AttemptRecord, RequestRecord
from ramplab.metrics.exporter import (
    GAP_BUCKETS,
    LATENCY_BUCKETS,
    MAX_STEPS,
    LoadMetrics,
    MasterGauges,
    serve,
)
from tests.ops.exporter_worker import records
from tests.support.processes import Process, poll_until, python
from tests.support.scrape import wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in out, f"duplicate sample {key}"
            out[key] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


def scrape(registry: CollectorRegistry) -> Samples:
    return parse(generate_latest(registry).decode())


def ok_record(**overrides: object) -> RequestRecord:
    fields: dict[str, object] = {
        "request_id": "a",
        "worker": "w",
        "intended_start": 10.0,
        "actual_start": 10.004,
        "ok": True,
        "status": 200,
        "error_kind": None,
        "lateness_ms": 4.0,
        "ttft_ms": 120.0,
        "ttft_send_ms": 116.0,
        "ttlt_ms": 620.0,
        "ttlt_send_ms": 616.0,
        "tpot_ms": 100.0,
        "itl_ms": [30.0, 170.0, 100.0, 100.0, 100.0],
        "phases_ms": {"dns": 0.3, "connect": 1.2, "wait": 80.0},
        "server_timing_ms": {"queue": 7.0, "prefill": 60.0},
        "output_tokens": 6,
        "slo_ok": True,
    }
    fields.update(overrides)
    return RequestRecord(**fields)  # type: ignore[arg-type]


def test_values_match_the_records_exactly() -> None:
    registry = CollectorRegistry()
    metrics = LoadMetrics(registry, run="r7", scenario="decay")
    metrics.observe(ok_record())
    metrics.observe(ok_record(request_id="b", ttft_ms=2600.0, slo_ok=False, output_tokens=4))
    metrics.observe(
        ok_record(
            request_id="c", ok=False, status=503, error_kind="http_status", attempts=3,
            attempt_log=[
                AttemptRecord(1, 0.0, 429, "http_status", 1.0),
                AttemptRecord(2, 0.0, None, "connect", 1.0),
                AttemptRecord(3, 0.0, 503, "http_status", 1.0),
            ],
        )
    )  # fmt: skip
    metrics.arrival_scheduled(5)
    metrics.arrival_dropped(2)
    s = scrape(registry)
    const = {"run": "r7", "scenario": "decay"}

    assert value(s, "ramplab_requests_total", outcome="ok", status="200", error_kind="none") == 2
    assert (
        value(s, "ramplab_requests_total", outcome="error", status="503", error_kind="http_status")
        == 1
    )
    assert value(s, "ramplab_attempts_total", **const) == 5
    assert value(s, "ramplab_retries_total", status="429") == 1
    assert value(s, "ramplab_retries_total", status="none") == 1
    assert value(s, "ramplab_retries_total") == 2
    assert value(s, "ramplab_goodput_requests_total") == 1
    assert value(s, "ramplab_output_tokens_total") == 10  # the failed chain's tokens do not count
    assert value(s, "ramplab_arrivals_scheduled_total") == 5
    assert value(s, "ramplab_arrivals_dropped_total") == 2

    # Histograms take the two successes only.
    assert value(s, "ramplab_ttft_seconds_count", start="intended") == 2
    assert value(s, "ramplab_ttft_seconds_sum", start="intended") == pytest.approx(2.72)
    assert value(s, "ramplab_ttft_seconds_sum", start="actual") == pytest.approx(0.232)
    assert value(s, "ramplab_ttft_seconds_bucket", start="intended", le="0.15") == 1
    assert value(s, "ramplab_ttft_seconds_bucket", start="intended", le="2.0") == 1
    assert value(s, "ramplab_ttft_seconds_bucket", start="intended", le="3.0") == 2
    assert value(s, "ramplab_ttft_seconds_bucket", start="intended", le="+Inf") == 2
    assert value(s, "ramplab_ttlt_seconds_sum", start="actual") == pytest.approx(1.232)
    assert value(s, "ramplab_inter_token_seconds_count") == 10
    assert value(s, "ramplab_inter_token_seconds_sum") == pytest.approx(1.0)
    assert value(s, "ramplab_inter_token_seconds_bucket", le="0.04") == 2
    assert value(s, "ramplab_inter_token_seconds_bucket", le="0.15") == 8
    assert value(s, "ramplab_inter_token_seconds_bucket", le="0.25") == 10
    assert value(s, "ramplab_tpot_seconds_count") == 2
    assert value(s, "ramplab_stream_tokens_per_second_sum") == pytest.approx(6 / 0.616 + 4 / 0.616)
    assert value(s, "ramplab_phase_seconds_count", side="client", phase="connect") == 2
    assert value(s, "ramplab_phase_seconds_sum", side="server", phase="prefill") == pytest.approx(
        0.12
    )
    assert value(s, "ramplab_schedule_lateness_seconds_sum") == pytest.approx(0.008)
    # Every series carries the run's constant labels.
    for _name, labels in s:
        assert {"run": "r7", "scenario": "decay"}.items() <= dict(labels).items()


def test_buckets_are_cumulative_and_follow_le() -> None:
    registry = CollectorRegistry()
    metrics = LoadMetrics(registry, run="r", scenario="s")
    gaps = [0.05, 0.1, 1.0, 1.0, 25.0, 26.0, 5000.0]  # ms; 1.0 ms sits exactly on a bound
    metrics.observe(ok_record(itl_ms=gaps))
    s = scrape(registry)
    for bound in GAP_BUCKETS:
        expected = sum(1 for gap in gaps if gap / 1000.0 <= bound)
        got = value(s, "ramplab_inter_token_seconds_bucket", le=repr(float(bound)))
        assert got == expected, bound
    assert value(s, "ramplab_inter_token_seconds_bucket", le="+Inf") == len(gaps)


def test_buckets_cover_multi_second_streams() -> None:
    assert LATENCY_BUCKETS[-1] >= 120.0
    assert sum(1 for b in LATENCY_BUCKETS if 1.0 <= b <= 30.0) >= 8


def test_outside_label_values_are_capped() -> None:
    registry = CollectorRegistry()
    metrics = LoadMetrics(registry, run="r", scenario="s")
    for i in range(100):
        metrics.observe(ok_record(ok=False, status=500, error_kind=f"kind{i}", server_timing_ms={}))
        metrics.observe(ok_record(server_timing_ms={f"phase{i}": 1.0, "bad name!": 1.0}))
    s = scrape(registry)
    kinds = {dict(ls)["error_kind"] for n, ls in s if n == "ramplab_requests_total"}
    assert len(kinds) <= 34  # 32 admitted, "other", and "none" for the successes
    assert value(s, "ramplab_requests_total", error_kind="other") == 100 - 32
    phases = {
        dict(ls)["phase"]
        for n, ls in s
        if n == "ramplab_phase_seconds_count" and dict(ls)["side"] == "server"
    }
    assert len(phases) == 33
    assert "other" in phases
    assert value(s, "ramplab_phase_seconds_count", side="server") == 200


def test_streaming_histograms_carry_the_step_and_its_rate() -> None:
    registry = CollectorRegistry()
    metrics = LoadMetrics(registry, run="r", scenario="s")
    metrics.observe(ok_record(step=0, target_qps=6.0))
    metrics.observe(ok_record(step=1, target_qps=12.5))
    metrics.observe(ok_record(step=1, target_qps=12.5))
    metrics.observe(ok_record())  # outside a ramp
    for i in range(MAX_STEPS + 10):
        metrics.observe(ok_record(step=100 + i, target_qps=1.0))
    s = scrape(registry)
    count = "ramplab_ttft_seconds_count"
    assert value(s, count, step="0", target_qps="6", start="intended") == 1
    assert value(s, count, step="1", target_qps="12.5", start="intended") == 2
    assert value(s, count, step="none", target_qps="none", start="intended") == 1
    assert value(s, "ramplab_stream_tokens_per_second_count", step="1") == 2
    assert value(s, "ramplab_inter_token_seconds_count", step="1") == 10
    steps = {dict(ls)["step"] for n, ls in s if n == count}
    assert len(steps) == MAX_STEPS + 2  # the cap, "none", and "other"
    assert value(s, count, step="other", target_qps="other", start="intended") == 12
    # The phase histograms and counters stay without the step.
    assert value(s, "ramplab_requests_total") == MAX_STEPS + 14


def test_master_gauges() -> None:
    registry = CollectorRegistry()
    gauges = MasterGauges(registry, run="r9", scenario="demo")
    gauges.update(step=3, target_qps=40.0, workers=4, users=120)
    s = scrape(registry)
    labels = {"run": "r9", "scenario": "demo"}
    assert value(s, "ramplab_run_info", **labels) == 1
    assert value(s, "ramplab_step", **labels) == 3
    assert value(s, "ramplab_target_qps", **labels) == 40
    assert value(s, "ramplab_workers", **labels) == 4
    assert value(s, "ramplab_users", **labels) == 120
    gauges.finish()
    s = scrape(registry)
    assert value(s, "ramplab_run_info") == 0
    assert value(s, "ramplab_target_qps") == 0


def test_serve_on_loopback_serves_the_registry() -> None:
    registry = CollectorRegistry()
    metrics = LoadMetrics(registry, run="r", scenario="s")
    metrics.observe(ok_record())
    port = serve(registry, 0)
    s = parse(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
    assert value(s, "ramplab_requests_total") == 1
    assert value(s, "ramplab_inter_token_seconds_count") == 5


@contextmanager
def worker(seed: int, count: int, *flags: str) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="ramplab-exporter-") as tmp:
        out = Path(tmp) / "stdout"
        process = Process(
            python("-m", "tests.ops.exporter_worker", "--seed", str(seed), "--records",
                   str(count), *flags),
            out, stderr_path=Path(tmp) / "stderr", grace_s=10,
        )  # fmt: skip
        # A worker hung in C code is killed after the grace period, not waited on.
        with process:
            poll_until(lambda: "\n" in process.log(), 30, "the worker printed its port",
                       process.running)  # fmt: skip
            line = process.log().splitlines()[0]
            assert line.startswith("port="), f"worker printed {line!r}"
            yield f"http://127.0.0.1:{int(line.removeprefix('port='))}/metrics"


@pytest.mark.timeout(60)
def test_two_worker_processes_sum_to_the_totals() -> None:
    counts = {1: 37, 2: 53}
    with worker(1, counts[1]) as first, worker(2, counts[2]) as second:
        scraped = [parse(httpx.get(url, timeout=5).text) for url in (first, second)]
    summed: Samples = {}
    for samples in scraped:
        for key, v in samples.items():
            summed[key] = summed.get(key, 0.0) + v

    # One exporter in this process fed both workers' records must give the same sums.
    registry = CollectorRegistry()
    reference = LoadMetrics(registry, run="r1", scenario="test")
    for seed, count in counts.items():
        for record in records(seed, count):
            reference.observe(record)
        reference.arrival_scheduled(count + 3)
        reference.arrival_dropped(3)
    expected = scrape(registry)
    assert summed.keys() == expected.keys()
    for key, v in expected.items():
        assert summed[key] == pytest.approx(v, rel=1e-9), key

    every = records(1, counts[1]) + records(2, counts[2])
    assert value(summed, "ramplab_requests_total") == 90
    assert value(summed, "ramplab_requests_total", outcome="ok") == sum(r.ok for r in every)
    assert value(summed, "ramplab_attempts_total") == sum(r.attempts for r in every)
    assert value(summed, "ramplab_retries_total") == sum(r.attempts - 1 for r in every)
    assert value(summed, "ramplab_inter_token_seconds_count") == sum(
        len(r.itl_ms) for r in every if r.ok
    )
    assert value(summed, "ramplab_output_tokens_total") == sum(
        r.output_tokens or 0 for r in every if r.ok
    )
    assert value(summed, "ramplab_arrivals_dropped_total") == 6


@pytest.mark.timeout(60)
def test_serves_under_gevent_monkey_patching_while_observing() -> None:
    with worker(3, 10, "--gevent", "--trickle") as url:

        def requests() -> float:
            return value(parse(httpx.get(url, timeout=5).text), "ramplab_requests_total")

        first = requests()
        assert first >= 10
        # Scrapes answer while the main greenlet keeps observing: the count moves on.
        wait_for(lambda: requests() > first, timeout_s=20, what="the count to grow")
