"""``ProducerBatch``: the records a producer appends to one partition in one go, and the
futures its callers hold (as Kafka's ``ProducerBatch`` and ``FutureRecordMetadata``): a
batch is filled by ``send``/``send_batch`` (pylog/clients/accumulator.py), appended by
the :class:`~pylog.clients.sender.Sender`, then done, with each record's offset and
timestamp or the append's error. Memory only; nothing here touches a file.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Sequence

from pylog.errors import ClientTimeoutError, InvalidArgumentError
from pylog.layout import INT64_MAX
from pylog.record.encode import now_ms
from pylog.record.record import Record


class RecordMetadata:
    """Where a record went: ``topic``, ``partition``, ``offset``, ``timestamp``."""
    __slots__ = ("topic", "partition", "offset", "timestamp")

    def __init__(self, topic, partition, offset, timestamp):
        self.topic, self.partition, self.offset, self.timestamp = topic, partition, offset, timestamp

    def __repr__(self) -> str:
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp={self.timestamp})")


class FutureRecordMetadata:
    """The result of ``send`` (kafka-python's future): ``get(timeout)`` waits for the
    append and returns the :class:`RecordMetadata`, or raises the append's error.

    ``add_callback(fn, *args)`` calls ``fn(*args, metadata)`` once the record is appended,
    ``add_errback(fn, *args)`` calls ``fn(*args, error)`` if its append failed (at once when
    that is already known). They run in the thread that appends the batch (the caller's of
    ``send``, ``flush`` or ``close``, or the linger thread), as Kafka runs send callbacks in
    its I/O thread: keep them short. An exception a callback raises is logged, not raised."""
    __slots__ = ("_batch", "_index")

    def __init__(self, batch, index: int):
        self._batch, self._index = batch, index

    def is_done(self) -> bool:
        return self._batch.done.is_set()

    def succeeded(self) -> bool:
        return self.is_done() and self._batch.error_at(self._index) is None

    def failed(self) -> bool:
        return self.is_done() and self._batch.error_at(self._index) is not None

    @property
    def exception(self) -> BaseException | None:
        """The append's error once done (None if it succeeded or is not done)."""
        return self._batch.error_at(self._index) if self.is_done() else None

    def get(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        batch.wait(timeout)
        return batch.metadata(self._index)

    def add_callback(self, fn, *args) -> "FutureRecordMetadata":
        self._batch.on_done(lambda: None if self.exception is not None else fn(*args, self.get()))
        return self

    def add_errback(self, fn, *args) -> "FutureRecordMetadata":
        self._batch.on_done(lambda: None if self.exception is None else fn(*args, self.exception))
        return self


class FutureBatchMetadata:
    """The result of ``send_batch``: ``get(timeout)`` waits for every append of the records
    and returns their :class:`BatchMetadata`, or raises the first append's error."""
    __slots__ = ("_parts", "_count")

    def __init__(self, parts: list, count: int):
        self._parts, self._count = parts, count  # parts: (batch, index in it, positions in the call)

    def is_done(self) -> bool:
        return all(batch.done.is_set() for batch, _, _ in self._parts)

    def get(self, timeout: float | None = None) -> "BatchMetadata":
        deadline = None if timeout is None else time.monotonic() + check_timeout_s(timeout)
        for batch, _, _ in self._parts:
            batch.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for batch, first, positions in self._parts:
            error = batch.error_in(first, first + len(positions))
            if error is not None:
                raise error
        return BatchMetadata(self._parts, self._count)


class BatchMetadata(Sequence):
    """Where the records of a ``send_batch`` went: ``meta[i]`` is the
    :class:`RecordMetadata` of the call's i-th record (built when asked for; O(1) each
    after an O(records) index built on first use)."""

    def __init__(self, parts: list, count: int):
        self._parts, self._count, self._where = parts, count, None

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if self._where is None:
            self._where = where = [None] * self._count
            for batch, first, positions in self._parts:
                for k, position in enumerate(positions, first):
                    where[position] = (batch, k)
        batch, k = self._where[i]
        return batch.metadata(k)


class ProducerBatch:
    __slots__ = ("topic", "partition", "records", "size_bytes", "created", "created_ms", "last_ms", "_runs", "done",
                 "error", "base_offset", "log_append_time", "_callbacks", "_placed", "_record_errors", "atomic")

    def __init__(self, topic, partition):
        self.topic, self.partition = topic, partition
        self.records: list = []  # Log.append's items: value bytes, (key, value) tuples, Records
        self.size_bytes = 0
        self.created = time.monotonic()
        self.created_ms = self.last_ms = now_ms()  # the create time of its first records without one
        self._runs: list | None = None  # [index, ms]: from records[index] on, sent at ms (lingering)
        self.done = threading.Event()
        self.error = None
        self.base_offset = -1
        self.log_append_time = -1
        self._callbacks: list | None = None
        self._placed: list | None = None  # [(lo, hi, first offset)] when it went in as several appends
        self._record_errors: dict | None = None  # index -> error of a record refused alone (too large)
        self.atomic = False  # all its records or none (a coordinator's), never split

    def on_done(self, callback) -> None:
        """Call ``callback()`` when the batch is done (now, if it is)."""
        with _CALLBACKS_LOCK:
            if not self.done.is_set():
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        _run_callback(callback)

    def sent_at(self, sent_ms: int) -> None:
        """The records added next were sent at ``sent_ms``, a later millisecond than those
        before (the batch lingers): each record's create time is its send's, as Kafka
        stamps it, kept as runs (O(1) a change of millisecond)."""
        if self._runs is None:
            self._runs = []
        self._runs.append([len(self.records), sent_ms])
        self.last_ms = sent_ms

    def create_times(self):
        """``Log.append``'s ``timestamp``: the create time of all the records, or a list of
        each one's (O(records), at C speed) when they were sent in different milliseconds."""
        runs = self._runs
        if runs is None:
            return self.created_ms
        out = [self.created_ms] * runs[0][0]
        for (start, ms), (end, _) in zip(runs, runs[1:] + [[len(self.records), 0]]):
            out += [ms] * (end - start)
        return out

    def finish(self, error: BaseException | None = None) -> None:
        """Mark the batch done (with ``error``, if its append failed) and run its callbacks."""
        if error is not None:
            self.error = error
        with _CALLBACKS_LOCK:
            self.done.set()
            callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            _run_callback(callback)

    def wait(self, timeout: float | None) -> None:
        if not self.done.wait(timeout if timeout is None else check_timeout_s(timeout)):
            raise ClientTimeoutError(f"records not appended to {self.topic}-{self.partition} within {timeout} s")

    def error_at(self, index: int) -> BaseException | None:
        """The error of record ``index`` (the whole append's, or its own), None if appended."""
        if self.error is not None or self._record_errors is None:
            return self.error
        return self._record_errors.get(index)

    def error_in(self, lo: int, hi: int) -> BaseException | None:
        """The first error among the records ``lo:hi``."""
        if self.error is not None or self._record_errors is None:
            return self.error
        return next((e for i, e in sorted(self._record_errors.items()) if lo <= i < hi), None)

    def placed(self, lo: int, hi: int, first_offset: int, log_append_time: int) -> None:
        """Records ``lo:hi`` were appended from ``first_offset`` on."""
        if lo == 0 and hi == len(self.records):
            self.base_offset = first_offset
        else:
            self._placed = [*(self._placed or ()), (lo, hi, first_offset)]  # a few: split appends only
        self.log_append_time = log_append_time

    def refused(self, index: int, error: BaseException) -> None:
        """Record ``index`` was refused alone (its batch was appended without it)."""
        self._record_errors = {**(self._record_errors or {}), index: error}

    def _offset(self, index: int) -> int:
        if self._placed is None:
            return self.base_offset + index
        lo, _, first = next(p for p in self._placed if p[0] <= index < p[1])
        return first + index - lo

    def metadata(self, index: int) -> RecordMetadata:
        """The appended record ``index``'s metadata, or the append's error."""
        error = self.error_at(index)
        if error is not None:
            raise error
        ts = self.log_append_time
        if ts < 0:
            item = self.records[index]
            if isinstance(item, Record) and item.timestamp is not None:
                ts = item.timestamp
            elif self._runs is None or index < self._runs[0][0]:
                ts = self.created_ms
            else:
                ts = self._runs[bisect.bisect_right(self._runs, [index, INT64_MAX]) - 1][1]
        return RecordMetadata(self.topic, self.partition, self._offset(index), ts)


_CALLBACKS_LOCK = threading.Lock()  # a callback is added before its batch is done, or run at once
_log = logging.getLogger("pylog.producer")


def _run_callback(callback) -> None:
    try:
        callback()
    except Exception:  # a user's callback: its failure is theirs, not the append's
        _log.exception("a send callback raised")


def check_timeout_s(timeout) -> float:
    """``timeout`` if it is a number of seconds >= 0 (a wait of ``get``, ``flush``, ``close``)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise InvalidArgumentError(f"timeout must be a number of seconds >= 0 or None, not {timeout!r}")
    return timeout
