"""Records from the workers to the master: batched on each worker, appended on the master.

Each worker buffers its finished records and sends them every ``FLUSH_S`` (and whenever the
plugin flushes: at the end of a run) as Locust message ``ramplab_records``; on a ramp worker the
engine sends them instead, each batch just before the progress report taken with it
(``WorkerEngine.report``), so a master that outlives the worker knows which requests in flight
never got a record; the ``worker_report``
keys ``stats``/``errors`` are Locust's own, so a message of ours is used. A batch travels as one
Arrow IPC message (``ramplab.records.schema``), serialised on the worker, and the master appends
its bytes to the run's journal as they arrive, without reading a record: the master's cost per
record is a share of one write. Workers ignore ``--results-dir``: one set per run.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import gevent
from locust.runners import MasterRunner, WorkerRunner

from ramplab.measure.record import RequestRecord
from ramplab.records.schema import batch_of
from ramplab.results.writer import ResultsWriter

MESSAGE = "ramplab_records"
FLUSH_S = 0.5
log = logging.getLogger("ramplab")


class Forwarder:
    """On a worker: batches finished records and sends them to the master."""

    def __init__(self, runner: WorkerRunner, *, autoflush: bool = True) -> None:
        # Any: Locust types a message's data as a dict, but msgpack carries our list as well.
        self.runner: Any = runner
        self.buffer: list[RequestRecord] = []
        self._lock = threading.Lock()
        self.greenlet = gevent.spawn(self._loop) if autoflush else None

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self.buffer.append(record)

    def take(self) -> list[RequestRecord]:
        """The records buffered so far, removed from the buffer (to be ``send``-ed)."""
        with self._lock:
            batch, self.buffer = self.buffer, []
        return batch

    def send(self, batch: list[RequestRecord]) -> None:
        if batch:
            message = batch_of(batch).serialize().to_pybytes()
            self.runner.send_message(MESSAGE, {"records": len(batch), "batch": message})

    def flush(self) -> None:
        self.send(self.take())

    def _loop(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            try:
                self.flush()
            except Exception:  # a broken connection to the master must not end the loop
                log.exception("sending records to the master failed")


def receive_into(runner: MasterRunner, writer: ResultsWriter) -> None:
    """On the master: append every batch the workers send to ``writer``."""

    def receive(environment: Any, msg: Any, **_: Any) -> None:
        writer.write_batch(msg.data["batch"], int(msg.data["records"]))

    runner.register_message(MESSAGE, receive)
