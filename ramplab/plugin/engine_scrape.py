"""The master scrapes the server's Prometheus endpoint through the run (``results/engine.py``).

One greenlet: a scrape when the plan is made (before the first arrival), one a second through
the run, and a last one when the summary is made (after the drain), each appended to
``engine_metrics.jsonl`` as it is taken. ``auto`` looks at ``ORIGIN/metrics`` of ``--host``
and keeps scraping only when the first answer holds a known engine's names; an explicit URL that
answers with none is said once in the log. A failed scrape mid-run is skipped (the figures
around it still bracket the windows), never fatal: the load matters more than its telemetry. A
full disk is said once and ends the scraping, the run goes on; the file keeps whole lines only
(``write_sample``), so a killed master's or a full disk's file reads back as it was written.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from urllib.parse import urlsplit

import gevent
import httpx

from ramplab.results.engine import detect, parse, write_sample

__all__ = ["EngineScraper", "metrics_url"]

INTERVAL_S = 1.0
TIMEOUT_S = 2.0
log = logging.getLogger("ramplab.plugin")


def metrics_url(setting: str, host: str) -> str | None:
    """Where to scrape: the setting's URL, ``ORIGIN/metrics`` of ``host`` for ``auto``, or
    None (``off``, or no host)."""
    if setting == "off":
        return None
    if setting != "auto":
        return setting
    parts = urlsplit(host)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}/metrics"


class EngineScraper:
    def __init__(
        self, url: str, path: Path, client: httpx.Client | None = None, explicit: bool = False
    ) -> None:
        self.url = url
        self.path = path
        self.explicit = explicit
        self.client = client or httpx.Client(timeout=TIMEOUT_S)
        self.engine: str | None = None
        self.scrapes = 0
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        # In a greenlet of its own from the first request on: a server slow to answer its
        # /metrics must not hold the master while it hands out the plan.
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def _first(self) -> bool:
        try:
            response = self.client.get(self.url)
        except httpx.HTTPError as exc:
            self._say(f"no engine metrics: {self.url} did not answer ({exc})")
            return False
        if response.status_code != 200:
            self._say(f"no engine metrics: {self.url} answered {response.status_code}")
            return False
        try:
            self.engine = detect(response.text)
        except ValueError as exc:  # not Prometheus's text format
            self._say(f"no engine metrics: {self.url} is not a Prometheus exposition ({exc})")
            return False
        if self.engine is None:
            self._say(f"no engine metrics: {self.url} exposes no known engine's names")
            return False
        log.info("engine metrics: %s from %s", self.engine, self.url)
        self._record(response.text)
        return self.engine is not None

    def _say(self, message: str) -> None:
        # auto finding nothing is the common case (a server without /metrics): info only.
        log.log(logging.WARNING if self.explicit else logging.INFO, "%s", message)

    def _record(self, text: str) -> None:
        assert self.engine is not None
        try:
            write_sample(self.path, parse(text, self.engine, time.time()))
        except OSError as exc:  # the results disk is full: the records matter more
            log.warning("engine metrics stopped: %s: %s", self.path, exc.strerror)
            self.engine = None
            return
        self.scrapes += 1

    def scrape(self) -> None:
        if self.engine is None:
            return
        try:
            response = self.client.get(self.url)
            response.raise_for_status()
            self._record(response.text)
        except (httpx.HTTPError, ValueError) as exc:
            log.debug("engine metrics scrape failed: %s", exc)

    def _loop(self) -> None:
        if not self._first():
            return
        while True:
            gevent.sleep(INTERVAL_S)
            self.scrape()

    def stop(self) -> None:
        """The last scrape (after the drain), then no more."""
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=TIMEOUT_S)
            self._greenlet = None
            self.scrape()

    @property
    def samples_path(self) -> Path | None:
        return self.path if self.scrapes else None
