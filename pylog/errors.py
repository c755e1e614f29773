"""The errors pylog raises: one hierarchy under :class:`PylogError`.

Each class says when it is raised. Every error about bytes on disk carries
``path`` and ``position`` (byte offset in the file or buffer) when known, so a
message always says *what* is wrong and *where*.
"""

from __future__ import annotations


class PylogError(Exception):
    """Base of every error pylog raises on purpose."""


class RecordFormatError(PylogError, ValueError):
    """Bytes that do not form valid Kafka records. Base of the two below.

    Attributes ``position`` (offset of the batch in the buffer or file) and
    ``path`` (file, if any) say where the problem is.
    """

    def __init__(self, message: str, *, position: int | None = None, path: str | None = None):
        where = []
        if path is not None:
            where.append(str(path))
        if position is not None:
            where.append(f"position {position}")
        super().__init__(f"{message} (at {', '.join(where)})" if where else message)
        self.reason = message
        self.position = position
        self.path = path


class CorruptRecordError(RecordFormatError):
    """Raised when a batch fails its checksum or its size fields are impossible:
    CRC mismatch, a declared size below the minimum, a size past a hard limit."""


class InvalidRecordError(RecordFormatError):
    """Raised when a batch's checksum holds but its content breaks the format:
    record count mismatch, varint overflow, negative or oversized lengths,
    bytes left over, an unknown codec, or a client writing control batches; and when
    a record given to an append cannot be encoded (a key or value that is not bytes,
    a timestamp outside [-1, 2**63 - 1], malformed headers)."""


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


class InvalidOffsetError(PylogError, ValueError):
    """Raised when offsets go backwards: a follower append below the log end, an index
    entry below the previous one, a negative or out-of-range offset argument."""


class CorruptIndexError(PylogError):
    """Raised when an index file fails its sanity check; logs rebuild such indexes."""

    def __init__(self, message: str, *, path: str | None = None):
        super().__init__(f"{message} ({path})" if path else message)
        self.path = path


class CorruptSnapshotError(CorruptIndexError):
    """Raised when a producer-state snapshot fails its CRC or layout check."""


class CorruptCheckpointError(CorruptIndexError):
    """Raised when a checkpoint file is malformed."""


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


class InvalidTopicError(PylogError, ValueError):
    """Raised for a topic name Kafka would refuse (characters, length, ``.``/``..``)."""


class UnknownTopicError(PylogError, KeyError):
    """Raised when a topic or partition does not exist in a log dir."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ProducerStateError(PylogError):
    """Base of the idempotence and transaction errors."""


class DuplicateSequenceError(ProducerStateError):
    """Raised when a batch repeats a sequence that is not one of the cached last batches."""


class OutOfOrderSequenceError(ProducerStateError):
    """Raised when a producer's sequence number skips ahead of the expected one."""


class ProducerFencedError(ProducerStateError):
    """Raised when a producer appends with an epoch older than the one the log knows."""


class InvalidTxnStateError(ProducerStateError):
    """Raised for a transaction marker or transactional batch that does not fit the producer's state."""


class UnsupportedPlatformError(PylogError, OSError):
    """Raised where pylog needs a POSIX feature (``flock`` writer locks, ``os.sendfile``)
    on a platform other than Linux or macOS (:mod:`pylog.platform`)."""


class PylogWarning(UserWarning):
    """Base of the warnings pylog raises; filter them with ``-W ignore::pylog.PylogWarning``."""


class SpeedupsMissingWarning(PylogWarning):
    """Warned once on ``import pylog`` when the optional C extension ``pylog._speedups``
    is not built: everything works, the record-format hot loops run in pure Python (slower)."""


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
