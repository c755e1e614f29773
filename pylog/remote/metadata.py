"""``RemoteLogMetadata``: which remote segments of each partition are live, from Kafka's
``__remote_log_metadata`` topic (TopicBasedRemoteLogMetadataManager), and
``RemoteLogMetadataWriter``, which appends to it as a broker tiering its logs does.

The topic's partitions are ordinary partition dirs (``__remote_log_metadata-N``); each
record's value is one event (pylog/record/remote_metadata.py): a segment's metadata with
state COPY_SEGMENT_STARTED, updates of its state (COPY_SEGMENT_FINISHED,
DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED), or a partition's deletion. Replaying them in
order follows Kafka's RemoteLogMetadataCache: a transition RemoteLogSegmentState does not
allow is dropped, as is an update of a segment never started; DELETE_SEGMENT_FINISHED and
DELETE_PARTITION_FINISHED forget. A segment is *live* once COPY_SEGMENT_FINISHED and until
DELETE_SEGMENT_STARTED: a copy that died midway (STARTED only) never is.

Every event of one partition goes to the same metadata partition (Kafka's
RemoteLogMetadataTopicPartitioner: murmur2 of ``Objects.hash(id lsb, id msb, partition)``), so
one partition's events are replayed in the order they were written.
"""

from __future__ import annotations

import base64
import re
import struct
import threading
from dataclasses import dataclass, field, replace

from pylog.coordinator.schema import uuid_text
from pylog.errors import InvalidConfigError, InvalidRecordError, UnknownTopicError
from pylog.layout import INT32_MAX, REMOTE_LOG_METADATA_TOPIC
from pylog.partitioner import murmur2
from pylog.record.encode import now_ms
from pylog.record.record import Record
from pylog.record.remote_metadata import (
    PARTITION_DELETE_STATES, SEGMENT_STATES, decode_event, encode_event,
)

#: Kafka's topic name and its default partition count (remote.log.metadata.topic.num.partitions).
METADATA_TOPIC = REMOTE_LOG_METADATA_TOPIC
DEFAULT_METADATA_PARTITIONS = 50
#: The settings Kafka creates the topic with: kept forever (retention.ms -1), never compacted.
METADATA_TOPIC_CONFIG = {"retention_ms": -1, "retention_bytes": -1, "cleanup_policy": "delete"}

COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED = SEGMENT_STATES
_DELETE_PARTITION_FINISHED = PARTITION_DELETE_STATES[2]
#: Kafka's RemoteLogSegmentState.isValidTransition: from -> the states it may move to (and itself).
_TRANSITIONS = {
    None: {COPY_SEGMENT_STARTED},
    COPY_SEGMENT_STARTED: {COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED},
    COPY_SEGMENT_FINISHED: {COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED},
    DELETE_SEGMENT_STARTED: {DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED},
    DELETE_SEGMENT_FINISHED: {DELETE_SEGMENT_FINISHED},
}
_UUID_BYTES = 16
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")  # 22 characters of base64: the last holds 2 bits


def uuid_bytes(text) -> bytes:
    """The 16 bytes of a Kafka uuid given as its text (``Uuid.toString()``) or as bytes.
    Raises :class:`InvalidConfigError` for anything else."""
    if isinstance(text, (bytes, bytearray)) and len(text) == _UUID_BYTES:
        return bytes(text)
    raw = base64.urlsafe_b64decode(text + "==") if isinstance(text, str) and _UUID_TEXT.fullmatch(text) else b""
    if len(raw) != _UUID_BYTES:
        raise InvalidConfigError(f"{text!r} is not a Kafka uuid (22 characters of URL-safe base64, or 16 bytes)")
    return raw


@dataclass(frozen=True)
class RemoteSegmentInfo:
    """One remote segment as ``__remote_log_metadata`` describes it (Kafka's
    RemoteLogSegmentMetadata). ``end_offset`` is its last offset (inclusive);
    ``segment_leader_epochs`` maps each leader epoch to the first offset it wrote in the
    segment; ``topic_id`` and ``segment_id`` are 16 bytes (``*_text`` give Kafka's text)."""
    topic: str
    topic_id: bytes
    partition: int
    segment_id: bytes
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    segment_leader_epochs: dict = field(default_factory=dict)
    segment_size_bytes: int = 0
    broker_id: int = 0
    txn_index_empty: bool = True
    custom_metadata: bytes | None = None
    state: str = COPY_SEGMENT_STARTED
    event_timestamp_ms: int = 0

    @property
    def topic_id_text(self) -> str:
        return uuid_text(self.topic_id)

    @property
    def segment_id_text(self) -> str:
        return uuid_text(self.segment_id)

    @property
    def key(self) -> tuple[str, bytes, int]:
        """Its partition: ``(topic, topic_id, partition)``."""
        return (self.topic, self.topic_id, self.partition)


def metadata_partition(topic_id, partition: int, partitions: int = DEFAULT_METADATA_PARTITIONS) -> int:
    """The ``__remote_log_metadata`` partition holding ``topic_id``-``partition``'s events
    (Kafka's RemoteLogMetadataTopicPartitioner). O(1)."""
    msb, lsb = struct.unpack(">qq", uuid_bytes(topic_id))
    h = 1
    for value in (_long_hash(lsb), _long_hash(msb), partition):  # java.util.Objects.hash
        h = (31 * h + value) & 0xFFFFFFFF
    return (murmur2(h.to_bytes(4, "big")) & INT32_MAX) % partitions


def _long_hash(v: int) -> int:
    """Java's ``Long.hashCode``: the two halves xor-ed."""
    v &= 0xFFFFFFFFFFFFFFFF
    return (v ^ (v >> 32)) & 0xFFFFFFFF


class RemoteLogMetadata:
    """The state replayed from ``__remote_log_metadata`` events, per partition.

    >>> m = RemoteLogMetadata()
    >>> seg = RemoteSegmentInfo("t", bytes(16), 0, b"s" * 16, 0, 9, 1000)
    >>> m.apply(segment_event(seg))
    >>> m.live_segments("t", 0)
    []
    >>> m.apply(update_event(seg, COPY_SEGMENT_FINISHED))
    >>> [s.end_offset for s in m.live_segments("t", 0)]
    [9]
    """

    def __init__(self):
        self._segments: dict[tuple, dict[bytes, RemoteSegmentInfo]] = {}  # partition key -> segment id -> info
        self._lock = threading.Lock()
        #: events dropped as Kafka drops them (an invalid transition, an update of an unknown segment)
        self.dropped = 0

    @classmethod
    def from_logs(cls, logs) -> "RemoteLogMetadata":
        """Replay the records of ``logs`` (open ``__remote_log_metadata`` partitions, each in
        offset order). A record that does not decode raises :class:`InvalidRecordError`
        naming the partition and offset."""
        out = cls()
        for log in logs:
            out.replay(log)
        return out

    def replay(self, log, start_offset: int | None = None) -> int:
        """Apply the records of ``log`` from ``start_offset`` on; returns the offset after
        the last one read. O(records read)."""
        next_offset = log.log_start_offset if start_offset is None else start_offset
        for record in log.records(start_offset):
            try:
                self.apply(decode_event(record.value))
            except InvalidRecordError as e:
                raise InvalidRecordError(f"{log.path} offset {record.offset}: {e}") from None
            next_offset = record.offset + 1
        return next_offset

    # -- the state ---------------------------------------------------------------------------
    def apply(self, event: dict) -> None:
        """Apply one decoded event, with Kafka's rules (see the module's docstring). O(1)."""
        kind = event["record"]
        with self._lock:
            if kind == "RemoteLogSegmentMetadataRecord":
                self._apply_segment(_info_of(event))
            elif kind == "RemoteLogSegmentMetadataUpdateRecord":
                self._apply_update(event)
            elif _state(event["remotePartitionDeleteState"], PARTITION_DELETE_STATES) == _DELETE_PARTITION_FINISHED:
                self._segments.pop(_partition_key(event["topicIdPartition"]), None)

    def _apply_segment(self, info: RemoteSegmentInfo) -> None:
        segments = self._segments.setdefault(info.key, {})
        current = segments.get(info.segment_id)
        if info.state != COPY_SEGMENT_STARTED or info.state not in _TRANSITIONS[current and current.state]:
            self.dropped += 1
            return
        segments[info.segment_id] = info

    def _apply_update(self, event: dict) -> None:
        sid = event["remoteLogSegmentId"]
        segments = self._segments.get(_partition_key(sid["topicIdPartition"]), {})
        current = segments.get(sid["id"])
        state = _state(event["remoteLogSegmentState"])
        if current is None or state not in _TRANSITIONS[current.state] or state == COPY_SEGMENT_STARTED:
            self.dropped += 1
            return
        if state == DELETE_SEGMENT_FINISHED:
            del segments[sid["id"]]
            return
        segments[sid["id"]] = replace(current, state=state, broker_id=event["brokerId"],
                                      event_timestamp_ms=event["eventTimestampMs"],
                                      custom_metadata=event["customMetadata"])

    # -- queries -----------------------------------------------------------------------------
    def partitions(self) -> list[tuple[str, bytes, int]]:
        """``(topic, topic_id, partition)`` of every partition with segments, sorted."""
        with self._lock:
            return sorted(k for k, segs in self._segments.items() if segs)

    def segments(self, topic: str, partition: int, topic_id=None) -> list[RemoteSegmentInfo]:
        """Every segment known of the partition, in any state but deleted, by start offset
        (then end offset). ``topic_id`` picks one incarnation of a topic name (default:
        every one). O(segments log segments)."""
        wanted = None if topic_id is None else uuid_bytes(topic_id)
        with self._lock:
            found = [s for (t, tid, p), segs in self._segments.items()
                     if t == topic and p == partition and wanted in (None, tid) for s in segs.values()]
        return sorted(found, key=lambda s: (s.start_offset, s.end_offset, s.event_timestamp_ms))

    def live_segments(self, topic: str, partition: int, topic_id=None) -> list[RemoteSegmentInfo]:
        """The segments a reader may use: COPY_SEGMENT_FINISHED and not being deleted,
        sorted by start offset."""
        return [s for s in self.segments(topic, partition, topic_id) if s.state == COPY_SEGMENT_FINISHED]

    def segment(self, topic_id, partition: int, segment_id) -> RemoteSegmentInfo | None:
        """One segment by its ids, or None once deleted (or never started)."""
        tid, sid = uuid_bytes(topic_id), uuid_bytes(segment_id)
        with self._lock:
            for (_, t, p), segs in self._segments.items():
                if t == tid and p == partition and sid in segs:
                    return segs[sid]
        return None


# -- events ------------------------------------------------------------------------------------
def segment_event(info: RemoteSegmentInfo) -> dict:
    """The RemoteLogSegmentMetadataRecord of ``info`` (its ``state``, normally
    COPY_SEGMENT_STARTED)."""
    return {"record": "RemoteLogSegmentMetadataRecord", "remoteLogSegmentId": _segment_id(info),
            "startOffset": info.start_offset, "endOffset": info.end_offset, "brokerId": info.broker_id,
            "maxTimestampMs": info.max_timestamp_ms, "eventTimestampMs": info.event_timestamp_ms,
            "segmentLeaderEpochs": [{"leaderEpoch": epoch, "offset": offset}
                                    for epoch, offset in sorted(info.segment_leader_epochs.items())],
            "segmentSizeInBytes": info.segment_size_bytes, "customMetadata": info.custom_metadata,
            "remoteLogSegmentState": SEGMENT_STATES.index(info.state), "txnIndexEmpty": int(info.txn_index_empty)}


def update_event(info: RemoteSegmentInfo, state: str, *, broker_id: int | None = None,
                 event_timestamp_ms: int | None = None) -> dict:
    """The RemoteLogSegmentMetadataUpdateRecord moving ``info`` to ``state``."""
    return {"record": "RemoteLogSegmentMetadataUpdateRecord", "remoteLogSegmentId": _segment_id(info),
            "brokerId": info.broker_id if broker_id is None else broker_id,
            "eventTimestampMs": now_ms() if event_timestamp_ms is None else event_timestamp_ms,
            "customMetadata": info.custom_metadata, "remoteLogSegmentState": SEGMENT_STATES.index(state)}


def partition_delete_event(topic: str, topic_id, partition: int, state: str, *, broker_id: int = 0,
                           event_timestamp_ms: int | None = None) -> dict:
    """The RemotePartitionDeleteMetadataRecord of one partition at ``state``
    (DELETE_PARTITION_MARKED, _STARTED or _FINISHED)."""
    return {"record": "RemotePartitionDeleteMetadataRecord",
            "topicIdPartition": {"name": topic, "id": uuid_bytes(topic_id), "partition": partition},
            "brokerId": broker_id, "eventTimestampMs": now_ms() if event_timestamp_ms is None else event_timestamp_ms,
            "remotePartitionDeleteState": PARTITION_DELETE_STATES.index(state)}


def _segment_id(info: RemoteSegmentInfo) -> dict:
    return {"topicIdPartition": {"name": info.topic, "id": info.topic_id, "partition": info.partition},
            "id": info.segment_id}


def _partition_key(tip: dict) -> tuple[str, bytes, int]:
    return (tip["name"], bytes(tip["id"]), tip["partition"])


def _state(state_id: int, names: tuple = SEGMENT_STATES) -> str:
    if not 0 <= state_id < len(names):
        raise InvalidRecordError(f"unknown remote log state id {state_id}")
    return names[state_id]


def _info_of(event: dict) -> RemoteSegmentInfo:
    sid = event["remoteLogSegmentId"]
    topic, topic_id, partition = _partition_key(sid["topicIdPartition"])
    epochs = {e["leaderEpoch"]: e["offset"] for e in event["segmentLeaderEpochs"]}
    return RemoteSegmentInfo(
        topic=topic, topic_id=topic_id, partition=partition, segment_id=bytes(sid["id"]),
        start_offset=event["startOffset"], end_offset=event["endOffset"], max_timestamp_ms=event["maxTimestampMs"],
        segment_leader_epochs=epochs, segment_size_bytes=event["segmentSizeInBytes"], broker_id=event["brokerId"],
        txn_index_empty=bool(event["txnIndexEmpty"]), custom_metadata=event["customMetadata"],
        state=_state(event["remoteLogSegmentState"]), event_timestamp_ms=event["eventTimestampMs"])


class RemoteLogMetadataWriter:
    """Appends events to the ``__remote_log_metadata`` partitions of a writable log dir (a
    :class:`~pylog.manager.LogManager`), as Kafka's TopicBasedRemoteLogMetadataManager
    does, and keeps their replayed state in ``metadata``.

    The topic is created on first use with ``partitions`` partitions (Kafka's default 50)
    and Kafka's settings for it (kept forever); an existing one keeps its own count. Each
    event is appended and fsynced before the call returns (a broker waits for its
    producer's acknowledgement), so a state recorded is a state a restart replays.
    Thread-safe. Cost per event: one append and one fsync of one partition."""

    def __init__(self, manager, *, partitions: int = DEFAULT_METADATA_PARTITIONS, broker_id: int = 0):
        self.manager = manager
        self.broker_id = broker_id
        self._lock = threading.Lock()
        try:
            self.partition_count = len(manager.partitions(METADATA_TOPIC))
        except UnknownTopicError:
            manager.create_topic(METADATA_TOPIC, partitions, config=METADATA_TOPIC_CONFIG)
            self.partition_count = partitions
        self.metadata = RemoteLogMetadata.from_logs(manager.log(METADATA_TOPIC, p)
                                                    for p in range(self.partition_count))

    def copy_started(self, info: RemoteSegmentInfo) -> RemoteSegmentInfo:
        """Record ``info`` (state COPY_SEGMENT_STARTED) before its objects are written."""
        info = replace(info, state=COPY_SEGMENT_STARTED, broker_id=self.broker_id, event_timestamp_ms=now_ms())
        self._append(info.topic_id, info.partition, segment_event(info))
        return info

    def update(self, info: RemoteSegmentInfo, state: str) -> None:
        """Record ``info``'s move to ``state`` (COPY_SEGMENT_FINISHED once every object is
        written; DELETE_SEGMENT_STARTED before deleting them, DELETE_SEGMENT_FINISHED after)."""
        self._append(info.topic_id, info.partition, update_event(info, state, broker_id=self.broker_id))

    def partition_deleted(self, topic: str, topic_id, partition: int, state: str) -> None:
        """Record a partition's deletion state (DELETE_PARTITION_MARKED, _STARTED, _FINISHED)."""
        self._append(topic_id, partition, partition_delete_event(topic, topic_id, partition, state,
                                                                  broker_id=self.broker_id))

    def _append(self, topic_id, partition: int, event: dict) -> None:
        value = encode_event(event)
        log = self.manager.log(METADATA_TOPIC, metadata_partition(topic_id, partition, self.partition_count))
        with self._lock:
            log.append([Record(value, key=None, timestamp=event["eventTimestampMs"])])
            log.flush()
            self.metadata.apply(event)


__all__ = [
    "COPY_SEGMENT_FINISHED", "COPY_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED",
    "DEFAULT_METADATA_PARTITIONS", "METADATA_TOPIC", "RemoteLogMetadata", "RemoteLogMetadataWriter",
    "RemoteSegmentInfo", "metadata_partition", "uuid_bytes", "uuid_text",
]
