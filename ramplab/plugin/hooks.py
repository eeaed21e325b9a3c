"""Locust event hooks: options, the per-process context, results, and gathering on the master.

Importing this module registers the hooks (a locustfile imports ``ramplab.plugin.users``, which
pulls it in). In a distributed run each worker buffers its finished records and sends them to the
master every half second and once more when it stops (Locust message ``ramplab_records``; the
``worker_report`` keys ``stats``/``errors`` are Locust's own, so a message of ours is used); the
master appends them to its ``requests.jsonl`` as they arrive and writes ``summary.json`` when it
quits, after the workers' last batches. Workers ignore ``--results-dir``: one set per run.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from ramplab.measure.context import Sink, UserContext
from ramplab.measure.record import RequestRecord
from ramplab.options import settings as options
from ramplab.options.settings import OptionError
from ramplab.results.producer import RunFacts, summarize
from ramplab.results.summary import RunSummary
from ramplab.results.writer import ResultsWriter, load_records

MESSAGE = "ramplab_records"
FLUSH_S = 0.5
log = logging.getLogger("ramplab")

_contexts: dict[int, UserContext] = {}
_writers: dict[int, ResultsWriter] = {}
_extra_sinks: dict[int, list[Sink]] = {}
# Extra summary fields by environment (the ramp engine's per-step figures), computed from the
# records file when the summary is written; and the last summary written, for the SLO gates.
summary_providers: dict[int, Callable[[Path], RunSummary | None]] = {}
last_summary: dict[int, RunSummary] = {}


def fail(message: str) -> None:
    sys.stderr.write(f"ramplab: {message}\n")
    sys.stderr.flush()
    os._exit(2)  # Locust catches SystemExit in greenlets; an option error must stop the process


def context_for(environment: Any) -> UserContext:
    """The process's shared context, built on first use from the parsed options."""
    context = _contexts.get(id(environment))
    if context is None:
        try:
            settings = options.from_options(environment.parsed_options)
            host = environment.host or getattr(environment.parsed_options, "host", "") or ""
            context = UserContext.create(settings, host, _worker_name(environment))
            context.model()  # asks GET /v1/models now when --model is not given
        except OptionError as exc:
            fail(str(exc))
            raise
        _contexts[id(environment)] = context
        writer = _writers.get(id(environment))
        if writer is not None:
            context.sinks.append(writer.write)
        forwarder = getattr(environment, "_ramplab_forwarder", None)
        if forwarder is not None:
            context.sinks.append(forwarder.add)
        context.sinks.extend(_extra_sinks.pop(id(environment), []))
    return context


def add_sink(environment: Any, sink: Sink) -> None:
    """Feed ``sink`` every finished record of this process (e.g. the Prometheus exporter)."""
    context = _contexts.get(id(environment))
    if context is not None:
        context.sinks.append(sink)
    else:  # the context is built with the first user; it picks the sink up then
        _extra_sinks.setdefault(id(environment), []).append(sink)


def _worker_name(environment: Any) -> str:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        return str(runner.client_id)
    return f"{socket.gethostname()}_{os.getpid()}"


class Forwarder:
    """On a worker: batches finished records and sends them to the master."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.buffer: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.greenlet = gevent.spawn(self._loop)

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self.buffer.append(record.to_dict())

    def flush(self) -> None:
        with self._lock:
            batch, self.buffer = self.buffer, []
        if batch:
            self.runner.send_message(MESSAGE, batch)

    def _loop(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            try:
                self.flush()
            except Exception:  # a broken connection to the master must not end the loop
                log.exception("sending records to the master failed")


def _add_options(parser: Any, **_: Any) -> None:
    options.register(parser)


def _on_init(environment: Any, **_: Any) -> None:
    parsed = environment.parsed_options
    if parsed is None:
        return
    try:
        settings = options.from_options(parsed)
    except OptionError as exc:
        fail(str(exc))
        return
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        environment._ramplab_forwarder = Forwarder(runner)
        return
    if settings.results_dir is None:
        return
    try:
        writer = ResultsWriter(settings.results_dir)
    except OSError as exc:
        fail(f"--results-dir {str(settings.results_dir)!r}: {exc.strerror}")
        return
    _writers[id(environment)] = writer
    if isinstance(runner, MasterRunner):

        def receive(environment: Any, msg: Any, **_: Any) -> None:
            for record in msg.data:
                writer.write(record)

        runner.register_message(MESSAGE, receive)


def _write_summary(environment: Any, writer: ResultsWriter) -> None:
    provider = summary_providers.get(id(environment))
    summary = None
    if provider is not None:
        try:
            summary = provider(writer.requests_path)
        except Exception:  # the records are safe on disk; a summary bug must not lose them
            log.exception("computing the ramp summary failed")
    if summary is None:  # a plain run (or no plan yet): one step covering every record
        summary = summarize(load_records(writer.requests_path), RunFacts())
    writer.write_summary(summary)
    last_summary[id(environment)] = summary


def _on_test_stop(environment: Any, **_: Any) -> None:
    forwarder = getattr(environment, "_ramplab_forwarder", None)
    if forwarder is not None:
        forwarder.flush()
    writer = _writers.get(id(environment))
    if writer is not None:
        _write_summary(environment, writer)


def _on_quitting(environment: Any, **_: Any) -> None:
    forwarder = getattr(environment, "_ramplab_forwarder", None)
    if forwarder is not None:
        forwarder.flush()
    writer = _writers.get(id(environment))
    if writer is not None:
        _write_summary(environment, writer)
        writer.close()


_events: Any = events  # Locust's hooks are untyped
_events.init_command_line_parser.add_listener(_add_options)
_events.init.add_listener(_on_init)
_events.test_stop.add_listener(_on_test_stop)
_events.quitting.add_listener(_on_quitting)

# Last, so that the results hooks above run first; the exporter feeds on add_sink().
from ramplab.plugin import exporter_hooks  # noqa: E402, F401
