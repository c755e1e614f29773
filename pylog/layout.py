"""Every fixed byte layout pylog reads or writes, in one place.

Each block names the spec in ``docs/format/`` that explains it. All integers
are big-endian (Kafka's ``ByteBuffer`` default); varints are zigzag LEB128.
Nothing here does I/O.
"""

from __future__ import annotations

import struct

# --- Record batch v2 (docs/format/batch.md) --------------------------------
MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2

#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
#: lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
#: baseSequence, recordsCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_BYTES = 61
assert BATCH_HEADER.size == BATCH_HEADER_BYTES

#: The part every log entry shares (v0, v1, v2): offset, size (bytes after it), and at 16 the magic.
LOG_OVERHEAD = struct.Struct(">qi")
LOG_OVERHEAD_BYTES = 12
MAGIC_POSITION = 16
#: Bytes needed to know an entry's offset, size and magic.
ENTRY_PREFIX_BYTES = 17

LEADER_EPOCH_AT = 12
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
MAX_TIMESTAMP_AT = 35

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# --- Value ranges, inclusive (pylog/arguments.py checks arguments against them) ---
INT16_RANGE = (-(2**15), 2**15 - 1)
INT32_RANGE = (-(2**31), INT32_MAX)
INT64_RANGE = (INT64_MIN, INT64_MAX)
#: An offset a caller names (read, truncate, delete, high watermark).
OFFSET_RANGE = (0, INT64_MAX)
#: A record timestamp: ms since the epoch, or NO_TIMESTAMP. Keeps every delta within a varlong.
TIMESTAMP_RANGE = (NO_TIMESTAMP, INT64_MAX)
#: An append's producer fields: -1 for none, else a non-negative int64 id, int16 epoch, int32 sequence.
PRODUCER_ID_RANGE = (NO_PRODUCER_ID, INT64_MAX)
PRODUCER_EPOCH_RANGE = (NO_PRODUCER_EPOCH, INT16_RANGE[1])
SEQUENCE_RANGE = (NO_SEQUENCE, INT32_MAX)
#: Producer sequences wrap from INT32_MAX to 0.
SEQUENCE_MODULUS = INT32_MAX + 1
#: A transaction marker's coordinator epoch (int32, never negative).
COORDINATOR_EPOCH_RANGE = (0, INT32_MAX)
#: What each caller-set field of a batch header holds on disk (``encode_batch``'s arguments).
BATCH_FIELD_RANGES = {
    "base_offset": INT64_RANGE, "partition_leader_epoch": INT32_RANGE, "producer_id": INT64_RANGE,
    "producer_epoch": INT16_RANGE, "base_sequence": INT32_RANGE, "timestamp": TIMESTAMP_RANGE,
    "log_append_time": TIMESTAMP_RANGE, "delete_horizon_ms": TIMESTAMP_RANGE,
}

# --- Control records (docs/format/batch.md#control-batches) ----------------
CONTROL_KEY = struct.Struct(">hh")  # version, type
END_TXN_MARKER = struct.Struct(">hi")  # version, coordinatorEpoch
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}

# --- KRaft snapshots (docs/format/kraft-snapshot.md) -----------------------
KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
KRAFT_BOOTSTRAP_FILENAME = "bootstrap.checkpoint"

# --- Legacy message sets, magic 0 and 1 (docs/format/batch.md#legacy) ------
#: crc, magic, attributes (after the 12-byte log overhead)
LEGACY_V0_HEADER = struct.Struct(">IbB")
#: crc, magic, attributes, timestamp
LEGACY_V1_HEADER = struct.Struct(">IbBq")
LEGACY_RECORD_OVERHEAD_V0 = 14  # crc 4, magic 1, attributes 1, key length 4, value length 4
LEGACY_RECORD_OVERHEAD_V1 = 22
LEGACY_CRC_AT = 12  # relative to the entry start
LEGACY_ATTR_COMPRESSION_MASK = 0x07
LEGACY_ATTR_TIMESTAMP_TYPE = 0x08
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
INT16 = struct.Struct(">h")

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
COMPRESSION_IDS = {name: i for i, name in enumerate(COMPRESSION_NAMES)}

# --- Offset index (docs/format/index.md) -----------------------------------
OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position

# --- Time index (docs/format/timeindex.md) ---------------------------------
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset

# --- Transaction index (docs/format/txnindex.md) ---------------------------
#: version, producerId, firstOffset, lastOffset, lastStableOffset
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
TXN_INDEX_ENTRY_BYTES = 34
TXN_INDEX_VERSION = 0

# --- Producer snapshot (docs/format/snapshot.md) ---------------------------
SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc32c of [6, EOF), entry count
SNAPSHOT_CRC_FROM = 6
#: producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_ENTRY_BYTES = 46
SNAPSHOT_VERSION = 1

# --- File names (docs/format/segment.md) -----------------------------------
OFFSET_DIGITS = 20
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
#: An index rewritten by a cut that may drop a mapped page: written whole, then renamed over
#: the index (docs/format/index.md); a load removes one a crash left before its rename.
INDEX_REWRITE_SUFFIX = ".tmp"

# --- Checkpoints (docs/format/checkpoints.md) ------------------------------
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: The marker's content, as Kafka writes it (compact JSON) with a broker epoch: the one of the
#: marker a writer found (a broker's), else -1 (pylog has none of its own).
CLEAN_SHUTDOWN_CONTENT = b'{"version":0,"brokerEpoch":%d}'
LOCK_FILE = ".lock"
#: The lock file of the processes sharing a log dir (pylog/locks.py, pylog/logdir/).
CLIENTS_LOCK_FILE = ".pylog-clients.lock"
#: Each topic's own settings (pylog/logdir/metadata.py owns the file; Kafka keeps them in its cluster metadata).
TOPIC_CONFIGS_FILE = "topic-configs.json"
CHECKPOINT_VERSION = 0

# --- Topics -------------------------------------------------------------------
#: Kafka's internal topics (its Topic.isInternal): the group coordinator's committed offsets and
#: the transaction coordinator's state. Pattern and whole-log-dir subscriptions leave them out
#: unless asked (Kafka's consumer setting exclude.internal.topics).
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset((CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC))
#: Tiered storage's segment metadata (Kafka's TopicBasedRemoteLogMetadataManager; pylog/remote/metadata.py).
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"


assert BATCH_HEADER.size == 61 and OFFSET_INDEX_ENTRY.size == 8 and TIME_INDEX_ENTRY.size == 12
assert TXN_INDEX_ENTRY.size == 34 and SNAPSHOT_ENTRY.size == 46


def offset_file_prefix(offset: int) -> str:
    """``0000…0368769``: the 20-digit zero-padded name Kafka gives segment files."""
    return f"{offset:0{OFFSET_DIGITS}d}"


def segment_file_name(base_offset: int, kind: str, suffix: str = "") -> str:
    """The name of a segment's file of ``kind`` (``LOG_SUFFIX``, ``INDEX_SUFFIX``, ...,
    ``SNAPSHOT_SUFFIX``), with an extra ``suffix`` such as ``.swap``.

    >>> segment_file_name(42, LOG_SUFFIX, SWAP_SUFFIX)
    '00000000000000000042.log.swap'
    """
    return offset_file_prefix(base_offset) + kind + suffix
