"""``Producer``: Kafka's producer (kafka-python / confluent-kafka idioms) writing to a
pylog log dir, from any number of processes.

``send`` picks the partition as Kafka's default partitioner does (murmur2 of the key;
records without a key stick to one partition per batch) and adds the record to that
partition's open batch. A batch is appended (one ``Log.append``) when it holds
``batch_size`` bytes, when ``linger_ms`` has passed since its first record (a background
thread waits for that moment; it does not spin), on ``flush()`` and on ``close()``; with
``linger_ms=0`` (the default) ``send`` appends at once, in the caller's thread.

Idempotence (on by default): the producer has a producer id allocated uniquely for the
log dir (pylog/logdir/producer_ids.py) and numbers each partition's batches, so a log
refuses a gap and ignores a repeat. With ``transactional_id`` the producer id is the
id's, its epoch bumped by each new instance (the older instance is fenced:
:class:`ProducerFencedError`), and records are written in transactions
(pylog/coordinator/txn_coordinator.py): invisible to ``read_committed`` readers until
``commit_transaction``, forever if aborted.

The producer composes Kafka's parts: a :class:`~pylog.partitioner.StickyPartitioner`, a
:class:`~pylog.clients.accumulator.RecordAccumulator` (the batches), a
:class:`~pylog.clients.sender.Sender` (the appends, and the linger thread) and a
:class:`~pylog.clients.transaction_manager.TransactionManager` (producer id, sequences,
transactions).

Durability: a record is in the operating system's page cache once its future is done
(survives the process's death, SIGKILL included) and on disk after the log's flush
policy runs (``flush_messages``/``flush_ms``), as with Kafka, which does not fsync either;
with ``acks="all"`` the batch is flushed (fsynced) before its futures are done.
"""

from __future__ import annotations

import time

from pylog.arguments import check_int, check_name
from pylog.clients.accumulator import RecordAccumulator
from pylog.clients.bulk import RECORD_OVERHEAD_BYTES, bulk_items, item_bytes, record_item
from pylog.clients.producer_batch import (  # noqa: F401 - public here
    BatchMetadata, FutureBatchMetadata, FutureRecordMetadata, RecordMetadata, check_timeout_s,
)
from pylog.clients.producer_metadata import ProducerMetadata, topic_creation_lock  # noqa: F401 - public here
from pylog.clients.sender import Sender
from pylog.clients.settings import check_producer_settings, refuse_unknown_settings
from pylog.clients.transaction_manager import State, TransactionManager
from pylog.logdir.writers import WriterPool
from pylog.closing import close_all
from pylog.coordinator.group_coordinator import checked_offsets
from pylog.errors import ClientStateError, InvalidArgumentError, SerializationError
from pylog.layout import INT32_MAX
from pylog.partition_dir import directory_path, ensure_directory, validate_topic
from pylog.partitioner import StickyPartitioner
from pylog.record.encode import now_ms
from pylog.replication.client_requests import check_acks


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
        check_producer_settings(
            transactional_id=transactional_id, enable_idempotence=enable_idempotence, linger_ms=linger_ms,
            batch_size=batch_size, compression_type=compression_type, max_block_ms=max_block_ms,
            transaction_timeout_ms=transaction_timeout_ms, client_id=client_id,
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
        self._metadata = ProducerMetadata(self.root, auto_create_topics_enable=auto_create_topics_enable,
                                          num_partitions=num_partitions)
        self._partition_counts = self._metadata.counts  # the same dict, read by send's fast path
        self._partitioner = StickyPartitioner()
        self._transactions = TransactionManager(self.root, self._pool, transactional_id=transactional_id,
                                                enable_idempotence=enable_idempotence,
                                                transaction_timeout_ms=transaction_timeout_ms,
                                                transaction_state_partitions=transaction_state_partitions)
        self._accumulator = RecordAccumulator(batch_size, linger_ms, self._on_new_batch)
        self._sender = Sender(self._accumulator, self._pool, self._transactions, acks=self.acks,
                              compression_type=compression_type, max_block_ms=max_block_ms)

    @property
    def producer_id(self) -> int:
        return self._transactions.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._transactions.producer_epoch

    def _on_new_batch(self, tp, sticky: bool) -> None:
        """A batch was opened for ``tp`` (``sticky``: for keyless records)."""
        if sticky:
            self._partitioner.on_new_batch(tp[0])  # the next keyless batch picks another partition
        if self.linger_ms:
            self._sender.wake()  # a new deadline for the linger thread

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
        transactions = self._transactions
        if not transactions.usable:
            transactions.check_usable()
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
        if transactions.transactional and tp not in transactions.partitions:
            transactions.maybe_add_partitions([tp])
        future, sealed = self._accumulator.append(tp, item, size, key is None and partition is None,
                                                  now_ms() if self.linger_ms else None)
        if sealed:
            self._sender.drain(tp)
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
        self._transactions.check_usable()
        validate_topic(topic)
        if self.value_serializer is not None:
            values = [self._serialized(topic, v, self.value_serializer, "value") for v in values]
        if self.key_serializer is not None and keys is not None:
            keys = [self._serialized(topic, k, self.key_serializer, "key") for k in keys]
        items, keys, sizes = bulk_items(values, keys, headers, timestamps_ms)
        sent_ms = now_ms() if self.linger_ms else None
        count = self._metadata.counts.get(topic) or self._metadata.partition_count(topic)
        if partition is not None:
            runs = [(self._partition(topic, None, partition), range(len(items)), sizes)]
        elif keys is not None:
            runs = self._partitioner.runs_by_key(keys, count, sizes)
        else:
            runs = [(None, range(len(items)), sizes)]  # None: the sticky partition
        if self._transactions.transactional:  # every partition known now joins before any record is added
            self._transactions.maybe_add_partitions([(topic, p) for p, _, _ in runs if p is not None])
        parts, touched = self._add_runs(topic, runs, sent_ms)
        if not self.linger_ms:
            self._accumulator.seal(touched)
        for tp in touched:
            self._sender.drain(tp)
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
        transactions = self._transactions
        for p, positions, sizes in runs:
            lo = 0
            while lo < len(positions):
                tp = (topic, self._partition(topic, None, None) if p is None else p)
                if transactions.transactional and tp not in transactions.partitions:
                    transactions.maybe_add_partitions([tp])
                lo = self._accumulator.append_run(tp, positions, sizes, lo, parts, sticky=p is None, sent_ms=sent_ms)
                touched.add(tp)
        return parts, touched

    def _partition(self, topic: str, key: bytes | None, partition: int | None) -> int:
        """``partition`` once checked, else the partitioner's choice for ``key``."""
        count = self._metadata.counts.get(topic) or self._metadata.partition_count(topic)
        if partition is not None:
            return self._metadata.check_partition(topic, partition)
        return self._partitioner.partition(topic, key, count)

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic``."""
        return set(range(self._metadata.partition_count(topic, fresh=True)))

    def flush(self, timeout: float | None = None) -> None:
        """Append every batch now and return once they are appended (kafka-python's
        ``flush``). The appends run in this thread; a partition whose log another process
        holds is waited for up to ``max_block_ms``, or ``timeout`` seconds in all: a batch
        still waiting then fails (its futures raise :class:`LogLockedError`)."""
        self._sender.flush(None if timeout is None else time.monotonic() + check_timeout_s(timeout))

    # -- transactions ---------------------------------------------------------------------------
    def init_transactions(self) -> None:
        """Kept for confluent-kafka's idiom: the constructor already did it."""
        self._transactions.require_transactional()

    def begin_transaction(self) -> None:
        self._transactions.begin()

    def send_offsets_to_transaction(self, offsets: dict, group) -> None:
        """Commit ``offsets`` (``{TopicPartition: OffsetAndMetadata | int}``) for the
        consumer group ``group`` (its id, or ``consumer.group_metadata()``) in this
        transaction: they take effect if and only if it commits."""
        self._transactions.require_transactional()
        group_id, generation, member_id = _group_identity(group)
        checked_offsets(offsets)  # before the transaction takes in the offsets partition
        self._transactions.send_offsets(offsets, group_id, generation, member_id, self._sender)

    def commit_transaction(self) -> None:
        """Make the transaction's records and offsets visible, atomically. Raises
        :class:`ProducerFencedError` if a newer instance took the transactional id, and
        :class:`TransactionAbortableError` (nothing committed) if a send or
        ``send_offsets_to_transaction`` of the transaction failed: all must succeed for
        it to commit (Kafka's rule); then only ``abort_transaction`` is possible."""
        self._transactions.require_open()
        self.flush()
        self._transactions.end(commit=True)

    def abort_transaction(self) -> None:
        """Discard the transaction's records and offsets."""
        self._transactions.require_open()
        self.flush()
        self._transactions.end(commit=False)

    # -- closing --------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Append what is pending (waiting for logs held by other processes up to
        ``timeout`` seconds in all, as ``flush``), stop the linger thread, release the
        logs. A batch not appended by then (the producer was fenced, or the wait ran out)
        fails: its futures raise the reason. An open transaction is left for the next
        instance to abort. Idempotent."""
        if timeout is not None:
            check_timeout_s(timeout)
        transactions = self._transactions
        if transactions.state is State.CLOSED:
            return
        try:
            if transactions.state is not State.FATAL_ERROR:
                self.flush(timeout)
        finally:
            fenced = transactions.last_error if transactions.state is State.FATAL_ERROR else None
            reason = fenced or ClientStateError("the producer was closed before these records were appended")
            close_all([self._sender.close, lambda: self._accumulator.abort_incomplete(reason), transactions.close,
                       self._pool.release])

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
