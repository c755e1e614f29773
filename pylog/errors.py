"""The errors pylog raises: one hierarchy under :class:`PylogError`.

Each class says when it is raised. Every error about bytes on disk carries
``path`` and ``position`` (byte offset in the file or buffer) when known, so a
message always says *what* is wrong and *where*.
"""

from __future__ import annotations


class PylogError(Exception):
    """Base of every error pylog raises on purpose."""


def _located(message: str, path, position) -> str:
    """``message`` with where it happened: ``"... (at <path>, position <n>)"``."""
    where = [str(path)] if path is not None else []
    if position is not None:
        where.append(f"position {position}")
    return f"{message} (at {', '.join(where)})" if where else message


class _LocatedError(PylogError):
    """An error about bytes, saying where they are: ``path`` (the file; None for bytes
    in memory, such as an append's input), ``position`` (byte offset in the file or
    buffer; None when it is the whole file) and ``reason`` (the message without them)."""

    def __init__(self, message: str, *, position: int | None = None, path: str | None = None):
        super().__init__(_located(message, path, position))
        self.reason = message
        self.position = position
        self.path = None if path is None else str(path)


class CorruptFileError(_LocatedError):
    """Base of the errors for a file whose bytes break its format: a segment's batches
    (:class:`CorruptRecordError`), an index (:class:`CorruptIndexError`), a producer
    snapshot (:class:`CorruptSnapshotError`), a checkpoint (:class:`CorruptCheckpointError`).
    ``path`` names the file, ``position`` the byte offset when known."""


class RecordFormatError(_LocatedError, ValueError):
    """Bytes that do not form valid Kafka records, in a file or in memory. Base of the
    record errors below; ``position`` is the offset of the batch in the buffer or file."""


class CorruptRecordError(RecordFormatError, CorruptFileError):
    """Raised when a batch fails its checksum or its size fields are impossible:
    CRC mismatch, a declared size below the minimum, a size past a hard limit, offsets
    that do not follow. ``path`` is None when the bytes were an append's input."""


class InvalidRecordError(RecordFormatError):
    """Raised when bytes break the format although their checksum holds: record count
    mismatch, varint overflow, negative or oversized lengths, bytes left over, an unknown
    codec; and for a batch or record a log refuses (a client writing control batches or
    an old magic, a record without a key on a compacted topic), as Kafka's
    ``InvalidRecordException``. A Python value that cannot be encoded is an
    :class:`InvalidArgumentError` instead."""


class IncompleteBatchError(RecordFormatError):
    """Raised when a buffer ends inside its last batch (a torn tail).

    Distinct from corruption: a log treats it as the end of the data.
    ``valid_bytes`` is the length of the complete batches before it.
    """

    def __init__(self, message: str, *, position: int | None = None, path: str | None = None,
                 valid_bytes: int = 0):
        super().__init__(message, position=position, path=path)
        self.valid_bytes = valid_bytes


class UnsupportedCompressionError(InvalidRecordError):
    """Raised for a codec id Kafka does not define, or a codec with a magic that forbids it."""


class MissingKeyError(PylogError, ValueError):
    """Raised when a record that must have a key has none: a record of a coordinator topic
    (``__consumer_offsets``, ``__transaction_state``) decoded as one. Unlike the format
    errors above, the batch itself is sound."""


class RecordTooLargeError(PylogError, ValueError):
    """Raised when a batch exceeds ``max_message_bytes`` or a segment's capacity."""


class OffsetOutOfRangeError(PylogError, IndexError):
    """Raised when a read starts below the log start offset or past the log end offset."""


class DataLossError(OffsetOutOfRangeError):
    """Raised by a Spark read with ``failOnDataLoss=true`` (the default) when offsets it was
    to read are gone from the log: ``offset`` is the first missing offset of partition
    ``partition`` of ``topic``, ``reason`` why it is missing (removed by retention or
    ``delete_records``; past the end of a truncated or recreated partition)."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str):
        self.topic, self.partition, self.offset, self.reason = topic, partition, offset, reason
        super().__init__(f"{topic}-{partition}: offset {offset} is missing: {reason}; set failOnDataLoss=false "
                         f"to skip missing offsets (each skipped range is logged)")

    def __reduce__(self):  # raised in Spark's Python workers: pickled with its fields
        return type(self), (self.topic, self.partition, self.offset, self.reason)


class InvalidTimestampError(PylogError, ValueError):
    """Raised when a record of a CreateTime topic carries a timestamp further from the log's
    clock than ``message_timestamp_before_max_ms`` (in the past) or
    ``message_timestamp_after_max_ms`` (in the future) allow, as Kafka's
    ``InvalidTimestampException``. Nothing of the refused append is written."""


class InvalidOffsetError(PylogError, ValueError):
    """Raised when offsets go backwards: a follower append below the log end, an index
    entry below the previous one, a negative or out-of-range offset argument."""


class CorruptIndexError(CorruptFileError):
    """Raised when an index file (``.index``, ``.timeindex``, ``.txnindex``) fails its
    sanity check; logs rebuild such indexes."""


class CorruptSnapshotError(CorruptFileError):
    """Raised when a producer-state snapshot fails its CRC or layout check."""


class CorruptCheckpointError(CorruptFileError):
    """Raised when a checkpoint file is malformed (the message names the line)."""


class RemoteObjectNotFoundError(CorruptFileError):
    """Raised when an object is missing from object storage (``pylog.remote.store``): a
    segment or index that the remote log metadata lists, a key read through an
    ``ObjectStore``. ``key`` is the object's key below the store's root, ``path`` its URL
    (never with credentials)."""

    def __init__(self, message: str, *, key: str, path: str | None = None):
        super().__init__(message, path=path)
        self.key = key


class LogLockedError(PylogError):
    """Raised when a second writer opens a partition another writer holds."""


class LogClosedError(PylogError):
    """Raised when a closed log, segment or index is used."""


class ReadOnlyError(PylogError):
    """Raised when a log opened with ``read_only=True`` is asked to change."""


class StorageError(PylogError, OSError):
    """Raised when the file system fails a write (disk full, I/O error). Nothing of the
    failed append is visible; the log stays readable."""


class InvalidArgumentError(PylogError, ValueError):
    """Raised when a call's argument is outside what it accepts: an epoch, sequence or
    timestamp wider than its field, a producer id with no meaning, an unknown isolation
    level, a path with a NUL byte or a name too long, a file where a directory belongs.
    Raised before anything is written, so the refused call changed nothing."""


class LogDirNotFoundError(PylogError, FileNotFoundError):
    """Raised when a read-only log or log dir is opened on a directory that does not exist."""


class InvalidConfigError(PylogError, ValueError):
    """Raised for an unknown setting or a value outside its allowed range."""


class InvalidPartitionsError(InvalidConfigError):
    """Raised for a partition count a topic cannot have: below 1, above pylog's limit, or,
    when a topic grows, not above the count it has."""


class InvalidTopicError(PylogError, ValueError):
    """Raised for a topic name Kafka would refuse (characters, length, ``.``/``..``)."""


class UnknownTopicError(PylogError, KeyError):
    """Raised when a topic or partition does not exist in a log dir."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ProducerStateError(PylogError):
    """Base of the idempotence and transaction errors."""


class DuplicateSequenceError(ProducerStateError):
    """Never raised: kept for the name Kafka's clients know (``DuplicateSequenceException``).
    Like Kafka's broker, pylog answers a retry of one of a producer's last five batches
    with the original offsets (``AppendInfo.duplicate``) and any other repeated or
    skipped sequence with :class:`OutOfOrderSequenceError`."""


class OutOfOrderSequenceError(ProducerStateError):
    """Raised when a producer's sequence number skips ahead of the expected one."""


class ProducerFencedError(ProducerStateError):
    """Raised when a producer appends with an epoch older than the one the log knows."""


class InvalidProducerIdMappingError(ProducerFencedError):
    """Raised when a transactional id is unknown to the transaction coordinator, or names
    another producer id than the one given (Kafka's ``INVALID_PRODUCER_ID_MAPPING``)."""


class InvalidTxnStateError(ProducerStateError):
    """Raised for a transaction marker or transactional batch that does not fit the producer's state."""


class UnsupportedPlatformError(PylogError, OSError):
    """Raised where pylog needs a POSIX feature (``flock`` writer locks, ``os.sendfile``)
    on a platform other than Linux or macOS (:mod:`pylog.platform`)."""


class InputFormatError(PylogError, ValueError):
    """Raised by the console tools for input they cannot parse: a line of
    ``pylog console-producer`` without its key or headers separator, a malformed
    ``--offset-json-file`` of ``pylog delete-records``, a ``--property`` that is not
    ``name=value``. The message names the line or the file."""


class MissingDependencyError(PylogError, ImportError):
    """Raised when a call needs an optional package that is not installed: ``Log.read_arrow``
    needs ``pyarrow``, ``Log.to_pandas`` also ``pandas`` (``pip install 'pylog-kafka[arrow]'``).
    The message names the package and the extra that brings it."""


class PylogWarning(UserWarning):
    """Base of the warnings pylog raises; filter them with ``-W ignore::pylog.PylogWarning``."""


class SpeedupsMissingWarning(PylogWarning):
    """Warned once on ``import pylog`` when the optional C extension ``pylog._speedups``
    is not built: everything works, the record-format hot loops run in numpy and pure Python
    (slower). Not warned when ``PYLOG_NO_SPEEDUPS`` turns it off (``pylog.record.backend``)."""


class ClientTimeoutError(PylogError, TimeoutError):
    """Raised when a producer or consumer call waited its whole timeout: a record not
    appended in time, a log another process did not hand over, a group that did not settle."""


class GroupCoordinatorError(PylogError):
    """Base of the consumer-group errors: a commit or heartbeat the group refuses."""


class IllegalGenerationError(GroupCoordinatorError):
    """Raised (Kafka's ILLEGAL_GENERATION) when a member commits or heartbeats with a
    generation the group has left behind: a rebalance happened since it joined. Nothing is
    written."""


class RebalanceInProgressError(GroupCoordinatorError):
    """Raised (Kafka's REBALANCE_IN_PROGRESS) when a member commits after giving up its
    partitions for a rebalance still under way. Nothing is written."""


class UnknownMemberIdError(GroupCoordinatorError):
    """Raised (Kafka's UNKNOWN_MEMBER_ID) when a member the group removed (it left, or its
    session timed out) commits or heartbeats. Nothing is written."""


class GroupNotEmptyError(GroupCoordinatorError):
    """Raised when a group with live members is deleted or has its offsets reset."""


class GroupSubscribedToTopicError(GroupCoordinatorError):
    """Kafka's GROUP_SUBSCRIBED_TO_TOPIC: the offsets of a topic that a live member of the
    group subscribes to cannot be deleted. Nothing is written for it."""


class SerializationError(PylogError):
    """Raised when a producer's ``key_serializer``/``value_serializer`` raises (Kafka's
    SerializationException), naming the topic and which of key or value; the function's
    own error is chained. Nothing of that ``send`` is sent."""


class RecordDeserializationError(SerializationError):
    """Raised by ``Consumer.poll`` when its ``key_deserializer``/``value_deserializer``
    raises on the record at ``topic``-``partition`` ``offset`` (Kafka's
    RecordDeserializationException). The records before it were returned by the poll
    before; the position stays at it, so each poll raises again until
    ``seek(tp, offset + 1)`` passes it."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int):
        super().__init__(message)
        self.topic, self.partition, self.offset = topic, partition, offset


class ClientStateError(PylogError):
    """Raised when a producer or consumer is used in a state that forbids the call: after
    ``close()``, ``assign()`` after ``subscribe()`` or the other way round, a transaction
    call out of order (``commit_transaction`` without ``begin_transaction``, a send outside
    a transaction of a transactional producer). Nothing is written."""


class TransactionAbortableError(ClientStateError):
    """Raised by ``commit_transaction`` (nothing is committed), and by sends and offset
    commits, once a send or ``send_offsets_to_transaction`` of the open transaction
    failed: a transaction commits whole or not at all, so it can only be aborted
    (``abort_transaction``), as with Kafka's TransactionAbortableException."""


class ReplicationError(PylogError):
    """Base of the errors of a replicated partition (pylog/replication/, docs/replication.md)."""


class NotEnoughReplicasError(ReplicationError):
    """Raised by an ``acks="all"`` append, before anything is appended, when the ISR holds
    fewer replicas than ``min_insync_replicas`` (Kafka's NOT_ENOUGH_REPLICAS)."""


class NotEnoughReplicasAfterAppendError(ReplicationError):
    """Raised by an ``acks="all"`` append that was written and reached the high watermark
    while the ISR had shrunk below ``min_insync_replicas``: the records are in the log but
    not acknowledged (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""


class ReplicationTimeoutError(ReplicationError, TimeoutError):
    """Raised by an ``acks="all"`` append whose records were written by the leader but not
    copied by every ISR replica within ``timeout_ms`` (Kafka's REQUEST_TIMED_OUT): not
    acknowledged, and may or may not survive a failover."""


class NotLeaderOrFollowerError(ReplicationError):
    """Raised when a request reaches a replica that is not the partition's leader (or no
    longer is: its leadership moved while the request waited)."""


class LeaderNotAvailableError(ReplicationError):
    """Raised when the partition has no leader: no live replica may be elected (every ISR
    replica is down, and unclean election is not enabled)."""


class FencedLeaderEpochError(ReplicationError):
    """Raised when a request carries a leader epoch older than the replica's: its sender
    is stale (a deposed leader or a follower of one)."""


class ReplicaTransportError(ReplicationError, ConnectionError):
    """Raised when a replication connection breaks or sends bytes outside the fetch
    exchange (docs/format/replication.md); nothing of the broken response was appended."""
