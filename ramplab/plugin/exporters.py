"""What one Locust process serves on ``/metrics``, and the greenlet that keeps it current.

A worker started with ``--metrics-port P`` feeds every finished record to a ``LoadMetrics`` (the
plugin adds :meth:`Exporters.observe` to the process's sinks) and serves it on
``http://HOST:P/metrics``; a master with ``--master-metrics-port P`` serves :class:`MasterGauges`.
A local (single-process) run may use both. ``process_*`` series come along, for the
generator-CPU alert.

The ramp engine is read, not changed: the plugin hands the exporters its engines (none in a plain
``llm_stream.py`` run), and one greenlet polls their public state every ``POLL_S`` (the pacer's
counts on a worker; plan, shape, users and live workers on the master) and once more when the test
stops.

``--metrics-linger S`` keeps the process (and its ``/metrics``) up for ``S`` seconds after the
run, or until SIGTERM, so that a last scrape sees every request of the run.
"""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event
from locust.runners import STATE_MISSING, MasterRunner, Runner
from prometheus_client import CollectorRegistry, ProcessCollector

from ramplab.errors import UsageError
from ramplab.measure.record import RequestRecord
from ramplab.metrics.exporter import LiveLatency, LoadMetrics, MasterGauges, serve
from ramplab.options import MetricsSettings
from ramplab.plugin.master import MasterEngine
from ramplab.plugin.role import Role
from ramplab.plugin.worker import WorkerEngine

POLL_S = 0.5
log = logging.getLogger("ramplab.metrics.exporter")


def scenario_name(parsed: Any, chosen: str | None) -> str:
    """``--scenario``, else the locustfile's stem."""
    if chosen:
        return chosen
    locustfile = str(getattr(parsed, "locustfile", "") or "locustfile").split(",")[0]
    return Path(locustfile).stem or "locustfile"


class Exporters:
    """The registries one process serves, fed by records and by polling the engines."""

    def __init__(
        self,
        settings: MetricsSettings,
        runner: Runner,
        worker: WorkerEngine | None = None,
        master: MasterEngine | None = None,
    ) -> None:
        self.settings = settings
        self.runner = runner
        self.worker = worker
        self.master = master
        self.load: LoadMetrics | None = None
        self.gauges: MasterGauges | None = None
        self.ports: list[int] = []
        self._poller: gevent.Greenlet | None = None
        self._scheduled_seen = 0
        self._dropped_seen = 0
        self._closed = False

    @staticmethod
    def wanted(settings: MetricsSettings, role: Role) -> bool:
        return (settings.port > 0 and role.sends) or (settings.master_port > 0 and role.coordinates)

    def start(self, role: Role, scenario: str) -> None:
        """Serve what ``role`` asks for; a port that cannot be served is a ``UsageError``."""
        chosen = self.settings
        option = "--metrics-port"
        try:
            if chosen.port > 0 and role.sends:
                registry = CollectorRegistry()
                ProcessCollector(registry=registry)
                self.load = LoadMetrics(registry, chosen.run_id, scenario)
                self.ports.append(serve(registry, chosen.port, chosen.host))
            if chosen.master_port > 0 and role.coordinates:
                option = "--master-metrics-port"
                registry = CollectorRegistry()
                ProcessCollector(registry=registry)
                self.gauges = MasterGauges(registry, chosen.run_id, scenario)
                if self.master is not None:
                    LiveLatency(registry, chosen.run_id, scenario, self.master.live.snapshot)
                self.ports.append(serve(registry, chosen.master_port, chosen.host))
        except OSError as exc:  # the port is taken, or the host is not an address of this machine
            raise UsageError(option, f"cannot serve /metrics on {chosen.host}: {exc}") from None
        log.info("serving /metrics on %s ports %s", chosen.host, self.ports)
        self._poller = gevent.spawn(self._poll)

    def observe(self, record: RequestRecord) -> None:
        """A record sink: every finished record of this process."""
        if self.load is not None:
            self.load.observe(record)

    def sync(self) -> None:
        """Copy what the engines did since the last call into the counters and gauges."""
        if self.load is not None:
            self._sync_arrivals(self.load)
        if self.gauges is not None:
            self._sync_gauges(self.gauges)

    def _sync_arrivals(self, load: LoadMetrics) -> None:
        pacer = self.worker.pacer if self.worker is not None else None
        if pacer is None:
            return
        stats = pacer.stats
        reached = stats.dispatched + stats.dropped + pacer.queued
        if reached > self._scheduled_seen:
            load.arrival_scheduled(reached - self._scheduled_seen)
            self._scheduled_seen = reached
        if stats.dropped > self._dropped_seen:
            load.arrival_dropped(stats.dropped - self._dropped_seen)
            self._dropped_seen = stats.dropped

    def _sync_gauges(self, gauges: MasterGauges) -> None:
        runner = self.runner
        if isinstance(runner, MasterRunner):
            workers = sum(1 for node in runner.clients.values() if node.state != STATE_MISSING)
        else:
            workers = 1
        gauges.update(workers=workers, users=int(runner.user_count))
        engine = self.master
        plan = engine.plan if engine is not None else None
        if engine is None or plan is None:
            return
        stage = engine.shape.stage_at(time.time() - plan.start_epoch)
        if stage is None:
            gauges.update(target_qps=0)
        else:
            gauges.update(step=stage.index, target_qps=stage.rate)

    def _poll(self) -> None:
        while True:
            gevent.sleep(POLL_S)
            try:
                self.sync()
            except Exception:  # a metrics glitch must never stop the run
                log.exception("updating the exporter failed")

    def close(self) -> None:
        """Mark the run over and stop polling; then linger (``--metrics-linger``) for a last
        scrape, once: a second shutdown (SIGTERM) must not linger again."""
        if self._closed:
            return
        self._closed = True
        if self.gauges is not None:
            self.gauges.finish()
        if self._poller is not None:
            self._poller.kill(block=False)
        linger = self.settings.linger_s
        if linger > 0:
            # Locust is shutting down; its SIGTERM handler would start the shutdown again.
            released = Event()
            gevent.signal_handler(signal.SIGTERM, released.set)
            log.info("/metrics stays up for %.1f s (or until SIGTERM)", linger)
            released.wait(linger)
