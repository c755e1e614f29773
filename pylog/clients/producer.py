"""``Producer``: Kafka's producer (kafka-python / confluent-kafka idioms) writing to a
pylog log dir, from any number of processes.

``send`` picks the partition as Kafka's default partitioner does (murmur2 of the key;
records without a key stick to one partition per batch) and adds the record to that
partition's open batch. A batch is appended (one ``Log.append``) when it holds
``batch_size`` bytes, when ``linger_ms`` has passed since its first record (a background
thread waits for that moment; it does not spin), on ``flush()`` and on ``close()``; with
``linger_ms=0`` (the default) ``send`` appends at once, in the caller's thread.

Idempotence (on by default): the producer has a producer id allocated uniquely for the
log dir (pylog/clients/producer_ids.py) and numbers each partition's batches, so a log
refuses a gap and ignores a repeat. With ``transactional_id`` the producer id is the
id's, its epoch bumped by each new instance (the older instance is fenced:
:class:`ProducerFencedError`), and records are written in transactions
(pylog/coordinator/txn_coordinator.py): invisible to ``read_committed`` readers until
``commit_transaction``, forever if aborted.

Durability: a record is in the operating system's page cache once its future is done
(survives the process's death, SIGKILL included) and on disk after the log's flush
policy runs (``flush_messages``/``flush_ms``), as with Kafka, which does not fsync either;
with ``acks="all"`` the batch is flushed (fsynced) before its futures are done.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Sequence

from pylog.arguments import check_bool, check_choice, check_function, check_int, check_name
from pylog.clients.bulk import RECORD_OVERHEAD_BYTES, bulk_items, item_bytes, record_item
from pylog.clients.producer_ids import allocate_producer_id
from pylog.clients.settings import refuse_unknown_settings
from pylog.clients.locks import LockFile, Mutex, name_byte
from pylog.clients.writers import CLIENTS_LOCK_FILE, WriterPool
from pylog.closing import close_all
from pylog.errors import (
    ClientStateError, ClientTimeoutError, InvalidArgumentError, InvalidConfigError, ProducerFencedError,
    RecordTooLargeError, SerializationError, TransactionAbortableError, UnknownTopicError,
)
from pylog.layout import COMPRESSION_NAMES, INT32_MAX, INT64_MAX
from pylog.manager import MAX_PARTITIONS, LogManager
from pylog.partition_dir import directory_path, ensure_directory, validate_topic
from pylog.partitioner import partition_for_key, partitions_for_keys
from pylog.record.encode import now_ms
from pylog.record.record import Record
from pylog.replication.client_requests import check_acks


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


class _Batch:
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


class _Sealed:
    """A partition's full batches in the order they were filled, and the lock of the
    thread appending them."""
    __slots__ = ("batches", "appending")

    def __init__(self):
        self.batches: collections.deque[_Batch] = collections.deque()
        self.appending = threading.Lock()


class Producer:
    """Appends records to the topics of the log dir ``root``.

    ``key_serializer``/``value_serializer``: functions that turn a key or value given to
    ``send``/``send_batch`` into bytes (``json.dumps(v).encode()``), as kafka-python's and
    Kafka's serializers; a None key or value stays None.

    As Kafka's broker does, the log dir is made if missing and a topic on its first send
    (``auto_create_topics_enable``, with ``num_partitions`` partitions).
    ``acks``: 0 or 1, a record is acknowledged once in the operating system's page cache;
    ``"all"`` (or -1), once flushed to disk (one fsync a batch). kafka-python settings that
    mean nothing here (``bootstrap_servers``, ``retries``, ...) raise
    :class:`InvalidConfigError` (pylog/clients/settings.py).

    >>> import tempfile
    >>> from pylog import LogManager
    >>> root = tempfile.mkdtemp()
    >>> with LogManager(root) as m: _ = m.create_topic("events", 3)
    >>> with Producer(root) as producer:
    ...     meta = producer.send("events", b"hello", key=b"user-1").get()
    >>> meta.partition, meta.offset
    (2, 0)
    """

    def __init__(self, root, *, transactional_id: str | None = None, enable_idempotence: bool = True,
                 linger_ms: int = 0, batch_size: int = 16384, compression_type: str | None = None,
                 max_block_ms: int = 60_000, transaction_timeout_ms: int = 60_000, client_id: str = "pylog",
                 transaction_state_partitions: int | None = None, key_serializer=None, value_serializer=None,
                 acks=1, auto_create_topics_enable: bool = True, num_partitions: int = 1, **settings):
        refuse_unknown_settings(Producer, settings)
        _check_settings(transactional_id=transactional_id, enable_idempotence=enable_idempotence,
                        linger_ms=linger_ms, batch_size=batch_size, compression_type=compression_type,
                        max_block_ms=max_block_ms, transaction_timeout_ms=transaction_timeout_ms, client_id=client_id,
                        transaction_state_partitions=transaction_state_partitions, key_serializer=key_serializer,
                        value_serializer=value_serializer, auto_create_topics_enable=auto_create_topics_enable,
                        num_partitions=num_partitions)
        self.acks = check_acks(acks)
        self.root = directory_path(root)
        ensure_directory(self.root, create=True, what="log dir")  # as a broker makes its log dirs
        self.auto_create_topics_enable, self.num_partitions = auto_create_topics_enable, num_partitions
        self.client_id = client_id
        self.linger_ms, self.batch_size, self.max_block_ms = linger_ms, batch_size, max_block_ms
        self.compression_type = compression_type
        self.transactional_id = transactional_id
        self.key_serializer, self.value_serializer = key_serializer, value_serializer
        self._pool = WriterPool.for_root(self.root)
        self._lock = threading.Lock()  # the open batches
        self._wake = threading.Event()  # set when the linger thread has a new deadline to wait for
        self._batches: dict[tuple[str, int], _Batch] = {}  # the open batch of each partition
        self._sealed: dict[tuple[str, int], _Sealed] = {}  # full batches, waiting for their append
        self._sequences: dict[tuple[str, int], int] = {}
        self._partition_counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self._round_robin = itertools.count()
        self._sender: threading.Thread | None = None
        self._closed = False
        self._txn = None
        self._in_txn = False
        self._txn_partitions: set = set()
        self._fenced: ProducerFencedError | None = None
        self._txn_error: Exception | None = None  # a failure in the open transaction: it can only abort
        self._groups = None  # the group coordinator, once offsets were sent in a transaction
        self.producer_id, self.producer_epoch = -1, -1
        if transactional_id is not None:
            from pylog.coordinator.partitioning import DEFAULT_PARTITIONS
            from pylog.coordinator.txn_coordinator import TransactionCoordinator
            self._txn = TransactionCoordinator(self.root, self._pool,
                                               partitions=transaction_state_partitions or DEFAULT_PARTITIONS)
            self.producer_id, self.producer_epoch = self._txn.init_producer_id(transactional_id,
                                                                               transaction_timeout_ms)
        elif enable_idempotence:
            self.producer_id, self.producer_epoch = allocate_producer_id(self.root), 0

    # -- sending ------------------------------------------------------------------------------
    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, headers=None,
             partition: int | None = None, timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """Add a record to ``topic``'s batch for its partition; returns a future.
        ``headers``: ``[(str, bytes), ...]``. Cost: a microsecond or two of Python for a
        record of bytes (a key or a partition, no headers), plus, when the batch is sent
        now, one ``Log.append``; the first send to a topic that does not exist creates
        it (``auto_create_topics_enable``). Raises :class:`UnknownTopicError` for a
        partition that does not exist (or a topic, without auto-creation),
        :class:`InvalidTopicError` for a name Kafka refuses, :class:`InvalidArgumentError`
        for a bad record, before anything is appended."""
        if self._closed or self._fenced is not None or self._txn_error is not None:
            self._check_usable()
        if type(topic) is not str:
            validate_topic(topic)  # InvalidTopicError
        if self.key_serializer is not None or self.value_serializer is not None:
            key, value = self._serialized(topic, key, self.key_serializer, "key"), \
                self._serialized(topic, value, self.value_serializer, "value")
        plain = type(value) is bytes and not headers and timestamp_ms is None  # the common call, checked here
        if plain and key is None:
            item, size = value, RECORD_OVERHEAD_BYTES + len(value)
        elif plain and type(key) is bytes:
            item, size = (key, value), RECORD_OVERHEAD_BYTES + len(key) + len(value)
        else:
            item = record_item(value, key, headers, timestamp_ms)
            size = item_bytes(item)
        if type(partition) is int and 0 <= partition < self._partition_counts.get(topic, 0):
            tp = (topic, partition)
        else:
            tp = (topic, self._partition(topic, key, partition))
        if self._txn is not None and tp not in self._txn_partitions:
            self._add_to_txn([tp])
        sent_ms = now_ms() if self.linger_ms else None
        with self._lock:
            batch = self._batches.get(tp) or self._new_batch(tp, sticky=key is None and partition is None)
            if sent_ms != batch.last_ms and sent_ms is not None:
                batch.sent_at(sent_ms)
            records = batch.records
            future = FutureRecordMetadata(batch, len(records))
            records.append(item)
            batch.size_bytes += size
            if self.linger_ms and batch.size_bytes < self.batch_size:
                return future
            self._seal(tp)
        self._drain(tp)
        return future

    def send_batch(self, topic: str, values, keys=None, partition: int | None = None, headers=None,
                   timestamps_ms=None) -> FutureBatchMetadata:
        """Send many records at once: ``values`` (and ``keys``, ``headers`` (one list of
        pairs per record), ``timestamps_ms``, each None or as long as ``values``) are
        columns: lists, tuples, numpy arrays, pandas Series or Arrow arrays of ``bytes``.

        The records are what as many ``send`` calls would send, in order: the same
        partitions (``partition``, else Kafka's partitioner for each keyed record, else the
        sticky partition), the same batches (``batch_size``, ``linger_ms``; with
        ``linger_ms=0`` they are appended before this returns), the same create time
        (the call's), the same sequences and transaction. Every record is checked first: a bad one raises
        :class:`InvalidArgumentError` naming it, and nothing is sent. Returns one future
        whose ``get`` gives a :class:`BatchMetadata`. Cost: for bytes columns without
        headers or timestamps, a few tens of nanoseconds a record besides ``Log.append``;
        a key costs a murmur2 in Python when the partitioner picks the partition."""
        self._check_usable()
        validate_topic(topic)
        if self.value_serializer is not None:
            values = [self._serialized(topic, v, self.value_serializer, "value") for v in values]
        if self.key_serializer is not None and keys is not None:
            keys = [self._serialized(topic, k, self.key_serializer, "key") for k in keys]
        items, keys, sizes = bulk_items(values, keys, headers, timestamps_ms)
        sent_ms = now_ms() if self.linger_ms else None
        count = self._partition_counts.get(topic) or self._partition_count(topic)
        if partition is not None:
            runs = [(self._partition(topic, None, partition), range(len(items)), sizes)]
        elif keys is not None:
            runs = self._runs_by_key(keys, count, sizes)
        else:
            runs = [(None, range(len(items)), sizes)]  # None: the sticky partition
        if self._txn is not None:  # every partition known now joins before any record is added
            joining = [(topic, p) for p, _, _ in runs if p is not None and (topic, p) not in self._txn_partitions]
            if joining or not self._in_txn:
                self._add_to_txn(joining)
        parts, touched = self._add_runs(topic, runs, sent_ms)
        if not self.linger_ms:
            with self._lock:
                for tp in touched & self._batches.keys():
                    self._seal(tp)
        for tp in touched & self._sealed.keys():
            self._drain(tp)
        return FutureBatchMetadata(parts, len(items))

    @staticmethod
    def _serialized(topic: str, data, serializer, what: str):
        """``serializer(data)``; None stays None (a null key, a tombstone)."""
        if serializer is None or data is None:
            return data
        try:
            return serializer(data)
        except Exception as e:
            raise SerializationError(f"the {what}_serializer failed on a {what} for topic {topic!r}: "
                                     f"{type(e).__name__}: {e}") from e

    def _add_runs(self, topic: str, runs: list, sent_ms: int | None) -> tuple[list, set]:
        """Add each run to its partition's batches (a sticky run to one partition a batch);
        returns the parts of the future and the partitions touched."""
        parts, touched = [], set()
        for p, positions, sizes in runs:
            lo = 0
            while lo < len(positions):
                tp = (topic, self._partition(topic, None, None) if p is None else p)
                if self._txn is not None and tp not in self._txn_partitions:
                    self._add_to_txn([tp])
                with self._lock:
                    lo = self._fill(tp, positions, sizes, lo, parts, sticky=p is None, sent_ms=sent_ms)
                touched.add(tp)
        return parts, touched

    @staticmethod
    def _runs_by_key(keys: list, count: int, sizes) -> list:
        """``(partition, positions, sizes)`` for the records of each partition Kafka's
        partitioner picks (partition None: the keyless records, to the sticky partition)."""
        keyless = [i for i, key in enumerate(keys) if key is None] if None in keys else []
        keyed = [i for i, key in enumerate(keys) if key is not None] if keyless else range(len(keys))
        by_partition: dict = {}
        for position, p in zip(keyed, partitions_for_keys([keys[i] for i in keyed] if keyless else keys, count)):
            by_partition.setdefault(p, []).append(position)
        if keyless:
            by_partition[None] = keyless
        return [(p, positions, sizes.of(positions)) for p, positions in by_partition.items()]

    def _fill(self, tp, positions, sizes, lo: int, parts: list, *, sticky: bool, sent_ms: int | None) -> int:
        """Add the items ``lo:`` of a run to ``tp``'s open batches, sealing each that
        reaches ``batch_size``, as ``send`` would one by one (the caller holds ``_lock``).
        A sticky run stops after the first batch it seals (the next one goes to another
        partition). Items joining a batch opened before ``sent_ms`` (lingering) take it
        as create time. Returns where it stopped."""
        n = len(positions)
        while lo < n:
            batch = self._batches.get(tp) or self._new_batch(tp, sticky=sticky)
            hi, size = sizes.fill(lo, self.batch_size - batch.size_bytes)
            parts.append((batch, len(batch.records), positions[lo:hi]))
            if sent_ms != batch.last_ms and sent_ms is not None:
                batch.sent_at(sent_ms)
            if batch.records:
                batch.records += sizes.items[lo:hi]
            else:
                batch.records = sizes.items[lo:hi]  # a copy: the caller's list is not kept
            batch.size_bytes += size
            lo = hi
            if batch.size_bytes >= self.batch_size:
                self._seal(tp)
                if sticky:
                    break
        return lo

    def _partition(self, topic: str, key: bytes | None, partition: int | None) -> int:
        count = self._partition_counts.get(topic) or self._partition_count(topic)
        if type(partition) is int and 0 <= partition < count:
            return partition
        if partition is not None:
            check_int(partition, "partition", (0, INT32_MAX))
            if partition >= count:
                count = self._partition_count(topic, fresh=True)
                if partition >= count:
                    raise UnknownTopicError(f"topic {topic!r} has no partition {partition} in {self.root}")
            return partition
        if key is not None:
            return partition_for_key(key, count)
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= count:
            sticky = self._sticky[topic] = next(self._round_robin) % count
        return sticky

    def _partition_count(self, topic: str, *, fresh: bool = False) -> int:
        count = None if fresh else self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = len(self._topic_partitions(topic))
        return count

    def _topic_partitions(self, topic: str) -> list[int]:
        """``topic``'s partitions; a topic that does not exist is first created with
        ``num_partitions`` partitions when ``auto_create_topics_enable``, as Kafka's broker
        does on a producer's first request. Counted under :func:`topic_creation_lock`, so
        a topic another producer is creating is counted once made whole. Cost: a listing
        of the log dir, plus the creation (a directory and empty files per partition,
        fsynced)."""
        validate_topic(topic)
        with topic_creation_lock(self.root, topic):
            try:
                return LogManager(self.root, read_only=True).partitions(topic)
            except UnknownTopicError:
                if not self.auto_create_topics_enable:
                    raise UnknownTopicError(
                        f"unknown topic {topic!r} in {self.root}: create it with `pylog topics {self.root} --create "
                        f"--topic {topic} --partitions N`, or make the Producer with "
                        f"auto_create_topics_enable=True") from None
            with LogManager(self.root) as manager:
                try:
                    return manager.create_topic(topic, self.num_partitions).partitions
                except InvalidConfigError:  # made meanwhile by other means (pylog topics), of another size
                    return manager.partitions(topic)

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic``."""
        return set(range(self._partition_count(topic, fresh=True)))

    def _new_batch(self, tp, *, sticky: bool) -> _Batch:
        """Open a batch for ``tp`` (the caller holds ``_lock``); the linger thread learns
        its deadline. A batch opened for a keyless record moves the sticky partition on."""
        batch = self._batches[tp] = _Batch(*tp)
        if sticky:
            self._sticky.pop(tp[0], None)  # the next keyless batch picks another partition
        if self.linger_ms:
            if self._sender is None:
                self._start_sender()
            else:
                self._wake.set()  # a new deadline for the linger thread
        return batch

    def _seal(self, tp) -> None:
        """Close ``tp``'s open batch to new records and queue it for appending (the
        caller holds ``_lock``, so batches are queued in the order they were filled)."""
        self._sealed.setdefault(tp, _Sealed()).batches.append(self._batches.pop(tp))

    def _drain(self, tp, deadline: float | None = None) -> None:
        """Append ``tp``'s queued batches, oldest first, whichever thread queued them:
        the partition takes its batches in the order they were filled."""
        sealed = self._sealed[tp]
        with sealed.appending:
            while sealed.batches:
                self._append(tp, sealed.batches.popleft(), deadline)

    def _append(self, tp, batch: _Batch, deadline: float | None = None) -> None:
        """One ``Log.append`` of the batch, with the partition's next sequence, waiting for
        the partition's log up to ``max_block_ms`` or until ``deadline`` (monotonic s). A
        failure inside a transaction leaves it abortable only, as Kafka's producer does."""
        error = None
        try:
            max_block_ms = self.max_block_ms
            if deadline is not None:
                max_block_ms = min(max_block_ms, max(0, int((deadline - time.monotonic()) * 1000)))
            with self._pool.writer(*tp, max_block_ms=max_block_ms) as log:
                self._append_records(log, tp, batch, 0, len(batch.records), batch.create_times())
                if self.acks == ACKS_ALL:
                    log.flush()  # acknowledged once on disk: what "all" can mean with one copy
            if batch.error_in(0, len(batch.records)) is not None and self._in_txn:
                self._txn_error = self._txn_error or batch.error_in(0, len(batch.records))
        except ProducerFencedError as e:
            self._fenced = error = e
        except Exception as e:  # the future carries it to whoever waits
            error = e
            if self._in_txn:
                self._txn_error = e
        finally:
            batch.finish(error)

    def _append_records(self, log, tp, batch: _Batch, lo: int, hi: int, create_times) -> None:
        """Append ``batch.records[lo:hi]`` with the partition's next sequence. When the
        log refuses them as too large (a record that does not fit ``max_message_bytes``
        alone), append each half on its own, as Kafka's producer splits a batch the broker
        refuses as too large: only such a record fails, the others go in, in order."""
        records = batch.records if hi - lo == len(batch.records) else batch.records[lo:hi]
        seq = self._sequences.get(tp, 0) if self.producer_id >= 0 else -1
        try:
            info = log.append(records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                              base_sequence=seq, is_transactional=self._txn is not None,
                              compression=self.compression_type,
                              timestamp=create_times if type(create_times) is int else create_times[lo:hi])
        except RecordTooLargeError as e:
            if batch.atomic:
                raise
            if hi - lo == 1:
                batch.refused(lo, e)
                return
            mid = (lo + hi) // 2
            self._append_records(log, tp, batch, lo, mid, create_times)
            self._append_records(log, tp, batch, mid, hi, create_times)
            return
        if seq >= 0:
            self._sequences[tp] = (seq + len(records)) % 2**31
        batch.placed(lo, hi, info.first_offset, info.log_append_time)

    def _append_now(self, tp, records) -> None:
        """Append ``records`` to ``tp`` as one batch of this producer, now; raises its error."""
        batch = _Batch(*tp)
        batch.records, batch.atomic = list(records), True
        with self._lock:
            self._batches[tp] = batch
            self._seal(tp)
        self._drain(tp)
        error = batch.error_in(0, len(batch.records))
        if error is not None:
            raise error

    # -- the linger thread ----------------------------------------------------------------------
    def _start_sender(self) -> None:
        self._sender = threading.Thread(target=self._send_loop, name="pylog-producer", daemon=True)
        self._sender.start()

    def _send_loop(self) -> None:
        linger = self.linger_ms / 1000
        while not self._closed:
            self._wake.clear()
            with self._lock:
                now = time.monotonic()
                ready = [tp for tp, b in self._batches.items() if now - b.created >= linger]
                for tp in ready:
                    self._seal(tp)
                oldest = min((b.created for b in self._batches.values()), default=None)
            for tp in ready:
                self._drain(tp)
            if not ready:
                self._wake.wait(None if oldest is None else oldest + linger - now)

    def flush(self, timeout: float | None = None) -> None:
        """Append every batch now and return once they are appended (kafka-python's
        ``flush``). The appends run in this thread; a partition whose log another process
        holds is waited for up to ``max_block_ms``, or ``timeout`` seconds in all: a batch
        still waiting then fails (its futures raise :class:`LogLockedError`)."""
        deadline = None if timeout is None else time.monotonic() + check_timeout_s(timeout)
        with self._lock:
            for tp in list(self._batches):
                self._seal(tp)
            queued = list(self._sealed)
        for tp in queued:
            self._drain(tp, deadline)  # returns once every batch queued before is appended, by any thread

    # -- transactions ---------------------------------------------------------------------------
    def init_transactions(self) -> None:
        """Kept for confluent-kafka's idiom: the constructor already did it."""
        self._require_txn()

    def begin_transaction(self) -> None:
        self._require_txn()
        if self._in_txn:
            raise ClientStateError("a transaction is already in progress")
        self._in_txn, self._txn_partitions = True, set()

    def _add_to_txn(self, partitions) -> None:
        if not self._in_txn:
            raise ClientStateError("send outside a transaction: call begin_transaction() first")
        self._check_usable()
        try:
            self._txn.add_partitions(self.transactional_id, self.producer_id, self.producer_epoch, partitions)
        except ProducerFencedError as e:
            self._fenced = e
            raise
        self._txn_partitions.update(partitions)

    def send_offsets_to_transaction(self, offsets: dict, group) -> None:
        """Commit ``offsets`` (``{TopicPartition: OffsetAndMetadata | int}``) for the
        consumer group ``group`` (its id, or ``consumer.group_metadata()``) in this
        transaction: they take effect if and only if it commits."""
        from pylog.coordinator.group_coordinator import GroupCoordinator, checked_offsets
        self._require_txn()
        group_id, generation, member_id = _group_identity(group)
        checked_offsets(offsets)  # before the transaction takes in the offsets partition
        if self._groups is None:
            self._groups = GroupCoordinator.for_root(self.root)
        coordinator = self._groups
        tp = coordinator.offsets_partition(group_id)
        if tp not in self._txn_partitions:
            self._add_to_txn([tp])
        try:
            coordinator.commit_offsets(group_id, offsets, generation=generation, member_id=member_id,
                                       producer=self)
        except InvalidArgumentError:
            raise  # refused before anything was tried: the transaction can go on
        except Exception as e:
            self._txn_error = self._txn_error or e
            raise

    def commit_transaction(self) -> None:
        """Make the transaction's records and offsets visible, atomically. Raises
        :class:`ProducerFencedError` if a newer instance took the transactional id, and
        :class:`TransactionAbortableError` (nothing committed) if a send or
        ``send_offsets_to_transaction`` of the transaction failed: all must succeed for
        it to commit (Kafka's rule); then only ``abort_transaction`` is possible."""
        self._end(commit=True)

    def abort_transaction(self) -> None:
        """Discard the transaction's records and offsets."""
        self._end(commit=False)

    def _end(self, *, commit: bool) -> None:
        self._require_txn()
        if not self._in_txn:
            raise ClientStateError("no transaction in progress")
        self.flush()
        if self._fenced is not None:
            raise ProducerFencedError(str(self._fenced))
        if commit and self._txn_error is not None:
            raise TransactionAbortableError(
                f"transaction of {self.transactional_id!r} not committed: a send or offset commit in it failed "
                f"({type(self._txn_error).__name__}: {self._txn_error}); call abort_transaction()") \
                from self._txn_error
        try:
            self._txn.end_transaction(self.transactional_id, self.producer_id, self.producer_epoch, commit)
        except ProducerFencedError as e:
            self._fenced = e
            raise
        self._in_txn, self._txn_error = False, None

    def _require_txn(self) -> None:
        if self._txn is None:
            raise ClientStateError("this producer has no transactional_id")

    def _check_usable(self) -> None:
        if self._closed:
            raise ClientStateError("producer is closed")
        if self._fenced is not None:
            raise ProducerFencedError(str(self._fenced))
        if self._txn_error is not None:
            raise TransactionAbortableError(f"a send or offset commit of the open transaction failed "
                                            f"({type(self._txn_error).__name__}: {self._txn_error}); "
                                            f"call abort_transaction()")

    # -- closing --------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Append what is pending (waiting for logs held by other processes up to
        ``timeout`` seconds in all, as ``flush``), stop the linger thread, release the
        logs. A batch not appended by then (the producer was fenced, or the wait ran out)
        fails: its futures raise the reason. An open transaction is left for the next
        instance to abort. Idempotent."""
        if timeout is not None:
            check_timeout_s(timeout)
        if self._closed:
            return
        try:
            if self._fenced is None:
                self.flush(timeout)
        finally:
            self._closed = True
            self._wake.set()
            steps = [] if self._sender is None else [self._sender.join]
            steps += [self._fail_pending]
            steps += [] if self._txn is None else [self._txn.close]
            steps += [] if self._groups is None else [self._groups.release]
            close_all(steps + [self._pool.release])

    def _fail_pending(self) -> None:
        """Fail the batches a closed producer did not append, so no future waits for ever."""
        with self._lock:
            pending = list(self._batches.values()) + [b for sealed in self._sealed.values() for b in sealed.batches]
            self._batches.clear()
            for sealed in self._sealed.values():
                sealed.batches.clear()
        reason = self._fenced or ClientStateError("the producer was closed before these records were appended")
        for batch in pending:
            batch.finish(reason)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: Kafka's broker default ``transaction.max.timeout.ms``: the longest transaction timeout it takes.
TRANSACTION_MAX_TIMEOUT_MS = 900_000
#: ``acks="all"`` (or -1): a batch's futures are done once it is flushed to disk.
ACKS_ALL = -1
#: The most ``__transaction_state`` partitions a producer may ask for.
MAX_TRANSACTION_STATE_PARTITIONS = 1000


def _check_settings(*, transactional_id, enable_idempotence, linger_ms, batch_size, compression_type, max_block_ms,
                    transaction_timeout_ms, client_id, transaction_state_partitions, key_serializer,
                    value_serializer, auto_create_topics_enable, num_partitions) -> None:
    """The ``Producer``'s settings, checked before it touches the log dir:
    :class:`InvalidArgumentError` naming the first that is out of range. O(1)."""
    check_bool(auto_create_topics_enable, "auto_create_topics_enable")
    check_int(num_partitions, "num_partitions", (1, MAX_PARTITIONS))
    check_int(linger_ms, "linger_ms", (0, INT32_MAX))
    check_int(batch_size, "batch_size", (0, INT32_MAX))
    check_int(max_block_ms, "max_block_ms", (0, INT32_MAX))
    check_int(transaction_timeout_ms, "transaction_timeout_ms", (1, TRANSACTION_MAX_TIMEOUT_MS))
    check_bool(enable_idempotence, "enable_idempotence")
    check_name(client_id, "client_id")
    if compression_type is not None:
        check_choice(compression_type, "compression_type", COMPRESSION_NAMES)
    check_function(key_serializer, "key_serializer")
    check_function(value_serializer, "value_serializer")
    if transaction_state_partitions is not None:
        check_int(transaction_state_partitions, "transaction_state_partitions", (1, MAX_TRANSACTION_STATE_PARTITIONS))
    if transactional_id is not None:
        check_name(transactional_id, "transactional_id")
        if not enable_idempotence:
            raise InvalidArgumentError("a transactional producer must be idempotent (enable_idempotence=True)")


@contextlib.contextmanager
def topic_creation_lock(root: str, topic: str):
    """Held while a producer creates ``topic`` in the log dir ``root`` (one byte of the
    clients' lock file, exclusive across threads and processes)."""
    with LockFile(os.path.join(root, CLIENTS_LOCK_FILE)) as lock_file, \
            Mutex(lock_file, name_byte("create-topic:" + topic)):
        yield


def check_timeout_s(timeout) -> float:
    """``timeout`` if it is a number of seconds >= 0 (a wait of ``get``, ``flush``, ``close``)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise InvalidArgumentError(f"timeout must be a number of seconds >= 0 or None, not {timeout!r}")
    return timeout


def _group_identity(group) -> tuple[str, int, str]:
    """(group id, generation, member id) from a group id or a consumer's
    ``group_metadata()``; :class:`InvalidArgumentError` for anything else."""
    if isinstance(group, str):
        return check_name(group, "group id"), -1, ""
    if not all(hasattr(group, field) for field in ("group_id", "generation_id", "member_id")):
        raise InvalidArgumentError(f"group must be a group id (str) or a consumer's group_metadata(), not {group!r}")
    check_int(group.generation_id, "generation_id", (-1, INT32_MAX))
    if not isinstance(group.member_id, str):
        raise InvalidArgumentError(f"member_id must be a str, not {group.member_id!r}")
    return check_name(group.group_id, "group id"), group.generation_id, group.member_id
