"""Read a Prometheus endpoint with the official text parser."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families


def sample_values(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a /metrics page, keyed by (name, sorted labels)."""
    text = httpx.get(url, timeout=5.0).text
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def metric(url: str, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels``."""
    total = 0.0
    for (sample_name, sample_labels), value in sample_values(url).items():
        if sample_name == name and set(labels.items()) <= set(sample_labels):
            total += value
    return total


def wait_for(predicate: Callable[[], bool], timeout_s: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout_s} s: {what}")
        time.sleep(0.05)
