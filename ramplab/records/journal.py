"""The journal: a run's records while it runs, as an Arrow IPC stream appended batch by batch.

Why not Parquet from the start: a Parquet file is readable only once its footer is written, so
a killed master would leave nothing. An IPC stream is a schema message followed by one message
per batch; every whole message is readable however the file ends. The master appends a
worker's batch as the bytes the worker serialised (no record is parsed or re-encoded on the
master), and ``files.RecordFiles.finalize`` turns the journal into Parquet when the run ends.

A torn last message (a kill mid-write, a full disk) ends the readable part: what precedes it is
returned and counted, the torn bytes are not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
from pyarrow import ipc

from ramplab.records.schema import SCHEMA, check_schema

__all__ = ["HEADER", "JournalTail", "read_journal"]

HEADER: bytes = SCHEMA.serialize().to_pybytes()  # a journal's first bytes

# What reading a message past the end of a torn file raises: pyarrow says OSError or
# ArrowInvalid depending on where the message was cut.
_TORN = (OSError, pa.ArrowInvalid)


def read_journal(path: Path) -> Iterator[pa.RecordBatch]:
    """Every whole batch of a journal, in the order written; stops quietly at a torn end."""
    with Path(path).open("rb") as handle:
        yield from _batches(handle, path)


def _batches(handle: BinaryIO, source: object) -> Iterator[pa.RecordBatch]:
    try:
        reader = ipc.open_stream(handle)
    except _TORN:  # not even the schema yet: a journal just created
        return
    check_schema(reader.schema, source)
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return
        except _TORN:
            return


class JournalTail:
    """Reads a journal incrementally: each ``poll`` returns the batches appended since the last
    one. A message still being written waits for the next poll."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0  # bytes of whole messages read so far (after the header)

    def poll(self) -> list[pa.RecordBatch]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(len(HEADER) + self._offset)
                new = handle.read()
        except OSError:
            return []
        if not new:
            return []
        batches: list[pa.RecordBatch] = []
        stream = pa.BufferReader(new)
        reader = ipc.MessageReader.open_stream(stream)
        consumed = 0
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                break
            except _TORN:
                break
            with contextlib.suppress(*_TORN):
                batches.append(ipc.read_record_batch(message, SCHEMA))
            consumed = stream.tell()
        self._offset += consumed
        return batches
