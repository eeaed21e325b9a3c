"""Locust wiring of the exporter: workers serve :class:`LoadMetrics`, the master its gauges.

A worker started with ``--metrics-port P`` feeds every finished record to a ``LoadMetrics``
(through ``hooks.add_sink``) and serves it on ``http://HOST:P/metrics``; a master with
``--master-metrics-port P`` serves :class:`MasterGauges`. A local (single-process) run may use
both. ``process_*`` series come along, for the generator-CPU alert.

The ramp engine is read, not changed: one greenlet per process polls its public state every
``POLL_S`` (the pacer's counts on a worker; plan, shape, users and live workers on the master) and
once more when the test stops. The engine's module is looked up in ``sys.modules`` rather than
imported: importing it registers its hooks, which refuse a run without ``--ramplab-shape`` — and
a plain ``llm_stream.py`` run has none.

``--metrics-linger S`` keeps the process (and its ``/metrics``) up for ``S`` seconds after the
run, or until SIGTERM, so that a last scrape sees every request of the run.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event
from locust import events
from locust.runners import STATE_MISSING, LocalRunner, MasterRunner, WorkerRunner
from prometheus_client import CollectorRegistry, ProcessCollector

from ramplab.metrics.exporter import LoadMetrics, MasterGauges, serve
from ramplab.options import settings
from ramplab.options.settings import MetricsSettings, OptionError
from ramplab.plugin import hooks

POLL_S = 0.5
_OPENLOOP = "ramplab.plugin.ramp_hooks"
log = logging.getLogger("ramplab.metrics.exporter")


@dataclass(slots=True)
class _Exporters:
    """What one process serves, and its pollers."""

    settings: MetricsSettings
    load: LoadMetrics | None = None
    gauges: MasterGauges | None = None
    ports: list[int] = field(default_factory=list)
    greenlets: list[gevent.Greenlet] = field(default_factory=list)
    scheduled_seen: int = 0
    dropped_seen: int = 0


_exporters: dict[int, _Exporters] = {}


def exporters_for(environment: Any) -> _Exporters | None:
    return _exporters.get(id(environment))


def _scenario(parsed: Any, chosen: str | None) -> str:
    if chosen:
        return chosen
    locustfile = str(getattr(parsed, "locustfile", "") or "locustfile").split(",")[0]
    return Path(locustfile).stem or "locustfile"


def _engine(kind: str, environment: Any) -> Any:
    module = sys.modules.get(_OPENLOOP)
    if module is None:
        return None
    return getattr(module, f"{kind}_for")(environment)


def sync_arrivals(environment: Any, exporters: _Exporters) -> None:
    """Add what the worker's pacer reached and dropped since the last call."""
    engine = _engine("worker", environment)
    pacer = getattr(engine, "pacer", None)
    if pacer is None or exporters.load is None:
        return
    stats = pacer.stats
    reached = stats.dispatched + stats.dropped + pacer.queued
    if reached > exporters.scheduled_seen:
        exporters.load.arrival_scheduled(reached - exporters.scheduled_seen)
        exporters.scheduled_seen = reached
    if stats.dropped > exporters.dropped_seen:
        exporters.load.arrival_dropped(stats.dropped - exporters.dropped_seen)
        exporters.dropped_seen = stats.dropped


def sync_gauges(environment: Any, gauges: MasterGauges) -> None:
    """Copy the master's state into its gauges."""
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        workers = sum(1 for node in runner.clients.values() if node.state != STATE_MISSING)
    else:
        workers = 1
    gauges.update(workers=workers, users=int(runner.user_count))
    engine = _engine("master", environment)
    plan = getattr(engine, "plan", None)
    if engine is None or plan is None:
        return
    stage = engine.shape.stage_at(time.time() - plan.start_epoch)
    if stage is None:
        gauges.update(target_qps=0)
    else:
        gauges.update(step=stage.index, target_qps=stage.rate)


def _poll(environment: Any, exporters: _Exporters) -> None:
    while True:
        gevent.sleep(POLL_S)
        try:
            if exporters.load is not None:
                sync_arrivals(environment, exporters)
            if exporters.gauges is not None:
                sync_gauges(environment, exporters.gauges)
        except Exception:  # a metrics glitch must never stop the run
            log.exception("updating the exporter failed")


def _on_init(environment: Any, **_: Any) -> None:
    parsed = environment.parsed_options
    if parsed is None:
        return
    try:
        chosen = settings.metrics_from_options(parsed)
    except OptionError as exc:
        hooks.fail(str(exc))
        return
    runner = environment.runner
    serves_load = chosen.port > 0 and isinstance(runner, (WorkerRunner, LocalRunner))
    serves_run = chosen.master_port > 0 and isinstance(runner, (MasterRunner, LocalRunner))
    if not (serves_load or serves_run):
        return
    scenario = _scenario(parsed, chosen.scenario)
    exporters = _Exporters(chosen)
    option = "--metrics-port"
    try:
        if serves_load:
            registry = CollectorRegistry()
            ProcessCollector(registry=registry)
            exporters.load = LoadMetrics(registry, chosen.run_id, scenario)
            hooks.add_sink(environment, exporters.load.observe)
            exporters.ports.append(serve(registry, chosen.port, chosen.host))
        if serves_run:
            option = "--master-metrics-port"
            registry = CollectorRegistry()
            ProcessCollector(registry=registry)
            exporters.gauges = MasterGauges(registry, chosen.run_id, scenario)
            exporters.ports.append(serve(registry, chosen.master_port, chosen.host))
    except OSError as exc:  # the port is taken, or the host is not an address of this machine
        hooks.fail(f"{option}: cannot serve /metrics on {chosen.host}: {exc}")
        return
    log.info("serving /metrics on %s ports %s", chosen.host, exporters.ports)
    exporters.greenlets.append(gevent.spawn(_poll, environment, exporters))
    _exporters[id(environment)] = exporters


def _on_test_stop(environment: Any, **_: Any) -> None:
    exporters = exporters_for(environment)
    if exporters is None:
        return
    if exporters.load is not None:
        sync_arrivals(environment, exporters)
    if exporters.gauges is not None:
        sync_gauges(environment, exporters.gauges)


def _on_quit(exit_code: int = 0, **_: Any) -> None:
    if not _exporters:
        return
    for exporters in list(_exporters.values()):
        if exporters.gauges is not None:
            exporters.gauges.finish()
        for greenlet in exporters.greenlets:
            greenlet.kill(block=False)
    linger = max((e.settings.linger_s for e in _exporters.values()), default=0.0)
    if linger > 0:
        # Locust is shutting down; its SIGTERM handler would start the shutdown again.
        released = Event()
        gevent.signal_handler(signal.SIGTERM, released.set)
        log.info("/metrics stays up for %.1f s (or until SIGTERM)", linger)
        released.wait(linger)
    _exporters.clear()  # a second shutdown (SIGTERM) must not linger again


_events: Any = events  # Locust's hooks are untyped
_events.init.add_listener(_on_init)
_events.test_stop.add_listener(_on_test_stop)
_events.quit.add_listener(_on_quit)
