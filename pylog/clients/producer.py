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
policy runs (``flush_messages``/``flush_ms``), as with Kafka, which does not fsync either.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time

from pylog.arguments import check_int
from pylog.clients.producer_ids import allocate_producer_id
from pylog.clients.writers import WriterPool
from pylog.errors import (
    ClientStateError, ClientTimeoutError, InvalidArgumentError, LogDirNotFoundError, ProducerFencedError,
    UnknownTopicError,
)
from pylog.layout import INT32_MAX
from pylog.partitioner import partition_for_key
from pylog.record.encode import check_record, now_ms
from pylog.record.record import Record

_RECORD_OVERHEAD_BYTES = 21  # a record's fixed fields, for the batch_size estimate
_PLAIN = (bytes, type(None))


class RecordMetadata:
    """Where a record went: ``topic``, ``partition``, ``offset``, ``timestamp``."""
    __slots__ = ("topic", "partition", "offset", "timestamp")

    def __init__(self, topic, partition, offset, timestamp):
        self.topic, self.partition, self.offset, self.timestamp = topic, partition, offset, timestamp

    def __repr__(self) -> str:
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp={self.timestamp})")


class FutureRecordMetadata:
    """The result of ``send``: ``get(timeout)`` waits for the append and returns the
    :class:`RecordMetadata`, or raises the append's error."""
    __slots__ = ("_batch", "_index")

    def __init__(self, batch, index: int):
        self._batch, self._index = batch, index

    def is_done(self) -> bool:
        return self._batch.done.is_set()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.done.wait(timeout):
            raise ClientTimeoutError(f"record not appended to {batch.topic}-{batch.partition} within {timeout} s")
        if batch.error is not None:
            raise batch.error
        r = batch.records[self._index]
        ts = batch.log_append_time if batch.log_append_time >= 0 else (
            batch.created_ms if r.timestamp is None else r.timestamp)
        return RecordMetadata(batch.topic, batch.partition, batch.base_offset + self._index, ts)


class _Batch:
    __slots__ = ("topic", "partition", "records", "size_bytes", "created", "created_ms", "done", "error",
                 "base_offset", "log_append_time")

    def __init__(self, topic, partition):
        self.topic, self.partition = topic, partition
        self.records: list[Record] = []
        self.size_bytes = 0
        self.created = time.monotonic()
        self.created_ms = now_ms()  # the create time of its records without one
        self.done = threading.Event()
        self.error = None
        self.base_offset = -1
        self.log_append_time = -1


class _Sealed:
    """A partition's full batches in the order they were filled, and the lock of the
    thread appending them."""
    __slots__ = ("batches", "appending")

    def __init__(self):
        self.batches: collections.deque[_Batch] = collections.deque()
        self.appending = threading.Lock()


class Producer:
    """Appends records to the topics of the log dir ``root``.

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
                 transaction_state_partitions: int | None = None):
        check_int(linger_ms, "linger_ms", (0, INT32_MAX))
        check_int(batch_size, "batch_size", (0, INT32_MAX))
        if transactional_id is not None and not enable_idempotence:
            raise InvalidArgumentError("a transactional producer must be idempotent (enable_idempotence=True)")
        if not os.path.isdir(root):
            raise LogDirNotFoundError(f"log dir {root} does not exist or is not a directory")
        self.root = os.path.abspath(root)
        self.client_id = client_id
        self.linger_ms, self.batch_size, self.max_block_ms = linger_ms, batch_size, max_block_ms
        self.compression_type = compression_type
        self.transactional_id = transactional_id
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
        ``headers``: ``[(str, bytes), ...]``. Cost: O(record) plus, when the batch is
        sent now, one ``Log.append``. Raises :class:`UnknownTopicError` for a topic or
        partition that does not exist, :class:`InvalidRecordError` for a bad record."""
        if self._closed or self._fenced is not None:
            self._check_usable()
        if headers or timestamp_ms is not None or type(value) not in _PLAIN or type(key) not in _PLAIN:
            record = check_record(Record(value, key, timestamp_ms, tuple(headers or ())))
        else:
            record = Record(value, key)  # bytes or None: nothing to check
        p = self._partition(topic, key, partition)
        tp = (topic, p)
        if self._txn is not None and tp not in self._txn_partitions:
            self._add_to_txn([tp])
        with self._lock:
            batch = self._batches.get(tp)
            if batch is None:
                batch = self._batches[tp] = _Batch(topic, p)
                if key is None and partition is None:
                    self._sticky.pop(topic, None)  # the next keyless batch picks another partition
                new_batch = True
            else:
                new_batch = False
            future = FutureRecordMetadata(batch, len(batch.records))
            batch.records.append(record)
            batch.size_bytes += _RECORD_OVERHEAD_BYTES + len(value or b"") + len(key or b"")
            ready = self.linger_ms == 0 or batch.size_bytes >= self.batch_size
            if ready:
                self._seal(tp)
            elif self._sender is None:
                self._start_sender()
            elif new_batch:
                self._wake.set()  # a new deadline for the linger thread
        if ready:
            self._drain(tp)
        return future

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
            from pylog.manager import LogManager
            count = len(LogManager(self.root, read_only=True).partitions(topic))
            self._partition_counts[topic] = count
        return count

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic``."""
        return set(range(self._partition_count(topic, fresh=True)))

    def _seal(self, tp) -> None:
        """Close ``tp``'s open batch to new records and queue it for appending (the
        caller holds ``_lock``, so batches are queued in the order they were filled)."""
        self._sealed.setdefault(tp, _Sealed()).batches.append(self._batches.pop(tp))

    def _drain(self, tp) -> None:
        """Append ``tp``'s queued batches, oldest first, whichever thread queued them:
        the partition takes its batches in the order they were filled."""
        sealed = self._sealed[tp]
        with sealed.appending:
            while sealed.batches:
                self._append(tp, sealed.batches.popleft())

    def _append(self, tp, batch: _Batch) -> None:
        """One ``Log.append`` of the batch, with the partition's next sequence."""
        try:
            with self._pool.writer(*tp, max_block_ms=self.max_block_ms) as log:
                seq = self._sequences.get(tp, 0) if self.producer_id >= 0 else -1
                info = log.append(batch.records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                  base_sequence=seq, is_transactional=self._txn is not None,
                                  compression=self.compression_type, timestamp=batch.created_ms)
                if seq >= 0:
                    self._sequences[tp] = (seq + len(batch.records)) % 2**31
            batch.base_offset, batch.log_append_time = info.first_offset, info.log_append_time
        except ProducerFencedError as e:
            self._fenced = e
            batch.error = e
        except Exception as e:  # the future carries it to whoever waits
            batch.error = e
        finally:
            batch.done.set()

    def _append_now(self, tp, records) -> None:
        """Append ``records`` to ``tp`` as one batch of this producer, now; raises its error."""
        batch = _Batch(*tp)
        batch.records = list(records)
        with self._lock:
            self._batches[tp] = batch
            self._seal(tp)
        self._drain(tp)
        if batch.error is not None:
            raise batch.error

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
        ``flush``; ``timeout`` is accepted for its signature: appends run in this thread)."""
        with self._lock:
            for tp in list(self._batches):
                self._seal(tp)
            queued = list(self._sealed)
        for tp in queued:
            self._drain(tp)  # returns once every batch queued before is appended, by any thread

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
        from pylog.coordinator.group_coordinator import GroupCoordinator
        self._require_txn()
        if self._groups is None:
            self._groups = GroupCoordinator.for_root(self.root)
        coordinator = self._groups
        group_id, generation, member_id = _group_identity(group)
        tp = coordinator.offsets_partition(group_id)
        if tp not in self._txn_partitions:
            self._add_to_txn([tp])
        coordinator.commit_offsets(group_id, offsets, generation=generation, member_id=member_id,
                                   producer=self)

    def commit_transaction(self) -> None:
        """Make the transaction's records and offsets visible, atomically. Raises
        :class:`ProducerFencedError` if a newer instance took the transactional id."""
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
        try:
            self._txn.end_transaction(self.transactional_id, self.producer_id, self.producer_epoch, commit)
        except ProducerFencedError as e:
            self._fenced = e
            raise
        self._in_txn = False

    def _require_txn(self) -> None:
        if self._txn is None:
            raise ClientStateError("this producer has no transactional_id")

    def _check_usable(self) -> None:
        if self._closed:
            raise ClientStateError("producer is closed")
        if self._fenced is not None:
            raise ProducerFencedError(str(self._fenced))

    # -- closing --------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Append what is pending, stop the linger thread, release the logs. An open
        transaction is left for the next instance to abort. Idempotent."""
        if self._closed:
            return
        try:
            if self._fenced is None:
                self.flush(timeout)
        finally:
            self._closed = True
            self._wake.set()
            if self._sender is not None:
                self._sender.join()
            if self._txn is not None:
                self._txn.close()
            if self._groups is not None:
                self._groups.release()
            self._pool.release()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _group_identity(group) -> tuple[str, int, str]:
    """(group id, generation, member id) from a group id or a consumer's group metadata."""
    if isinstance(group, str):
        return group, -1, ""
    return group.group_id, group.generation_id, group.member_id
