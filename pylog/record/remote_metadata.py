"""The records of Kafka's ``__remote_log_metadata`` topic (TopicBasedRemoteLogMetadataManager):
decoded for ``pylog dump --remote-log-metadata-decoder`` and pylog.remote.metadata, encoded for
tiering (:func:`encode_event`).

A record has no key; its value is uvarint frame version (1), uvarint record type, uvarint
version, then the event in the flexible encoding: a remote segment's metadata (type 0), an
update of its state (1), or its partition's deletion state (2). :func:`remote_metadata_text`
renders one as Kafka's DumpLogSegments prints it, the ``toString()`` of Kafka's
RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate and RemotePartitionDeleteMetadata.
"""

from __future__ import annotations

from pylog.coordinator.schema import Array, Field, Message, Struct, decode, encode, uuid_text
from pylog.errors import InvalidRecordError
from pylog.record.kraft import METADATA_FRAME_VERSION, read_frame
from pylog.record.varint import encode_uvarint

_TOPIC_ID_PARTITION = Struct((Field("name", "string"), Field("id", "uuid"), Field("partition", "int32")))
_SEGMENT_ID = Struct((Field("topicIdPartition", _TOPIC_ID_PARTITION), Field("id", "uuid")))
_SEGMENT = Message("RemoteLogSegmentMetadataRecord", "0", "0+", (
    Field("remoteLogSegmentId", _SEGMENT_ID), Field("startOffset", "int64"), Field("endOffset", "int64"),
    Field("brokerId", "int32"), Field("maxTimestampMs", "int64"), Field("eventTimestampMs", "int64"),
    Field("segmentLeaderEpochs", Array(Struct((Field("leaderEpoch", "int32"), Field("offset", "int64"))))),
    Field("segmentSizeInBytes", "int32"), Field("customMetadata", "bytes", nullable="0+"),
    Field("remoteLogSegmentState", "int8"), Field("txnIndexEmpty", "int8", default=0, tag=0, tagged="0+")))
_UPDATE = Message("RemoteLogSegmentMetadataUpdateRecord", "0", "0+", (
    Field("remoteLogSegmentId", _SEGMENT_ID), Field("brokerId", "int32"), Field("eventTimestampMs", "int64"),
    Field("customMetadata", "bytes", nullable="0+"), Field("remoteLogSegmentState", "int8")))
_PARTITION_DELETE = Message("RemotePartitionDeleteMetadataRecord", "0", "0+", (
    Field("topicIdPartition", _TOPIC_ID_PARTITION), Field("brokerId", "int32"), Field("eventTimestampMs", "int64"),
    Field("remotePartitionDeleteState", "int8")))

SEGMENT_STATES = ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED", "DELETE_SEGMENT_STARTED", "DELETE_SEGMENT_FINISHED")
PARTITION_DELETE_STATES = ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED")


def remote_metadata_text(value: bytes | None, offset: int) -> str:
    """One record's payload as DumpLogSegments prints it, or ``Error at offset OFFSET,
    skipping. REASON`` for one it cannot decode. O(len(value))."""
    try:
        return _event_text(value)
    except InvalidRecordError as e:
        return f"Error at offset {offset}, skipping. {e.reason}"


def decode_event(value: bytes | None) -> dict:
    """One record's payload as a dict of its message's fields (Kafka's camelCase names), with
    ``"record"`` naming the message (``"RemoteLogSegmentMetadataRecord"``, ...). Raises
    :class:`InvalidRecordError` for a payload it cannot decode. O(len(value))."""
    type_id, version, body = read_frame(value, "remote log metadata")
    message, _ = _TYPES.get(type_id, (None, None))
    if message is None:
        raise InvalidRecordError(f"pylog does not decode remote log metadata record type {type_id}")
    return {**decode(message, version, body), "record": message.name}


def encode_event(event: dict, version: int = 0) -> bytes:
    """The payload Kafka's RemoteLogMetadataSerde writes for ``event`` (a dict as
    :func:`decode_event` returns; ``"record"`` names the message). O(size of the result)."""
    for type_id, (message, _) in _TYPES.items():
        if message.name == event["record"]:
            frame = encode_uvarint(METADATA_FRAME_VERSION) + encode_uvarint(type_id) + encode_uvarint(version)
            return frame + encode(message, version, event)
    raise InvalidRecordError(f"no remote log metadata record named {event['record']!r}")


def _event_text(value: bytes | None) -> str:
    event = decode_event(value)
    return _RENDERERS[event["record"]](event)


def _segment_text(r: dict) -> str:
    epochs = {e["leaderEpoch"]: e["offset"] for e in r["segmentLeaderEpochs"]}  # a later entry wins, as in a map
    return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={_segment_id(r['remoteLogSegmentId'])}, "
            f"startOffset={r['startOffset']}, endOffset={r['endOffset']}, brokerId={r['brokerId']}, "
            f"maxTimestampMs={r['maxTimestampMs']}, eventTimestampMs={r['eventTimestampMs']}, "
            f"segmentLeaderEpochs={{{', '.join(f'{k}={epochs[k]}' for k in sorted(epochs))}}}, "
            f"segmentSizeInBytes={r['segmentSizeInBytes']}, customMetadata={_custom(r['customMetadata'])}, "
            f"state={_state(SEGMENT_STATES, r['remoteLogSegmentState'])}, "
            f"txnIdxEmpty={'true' if r['txnIndexEmpty'] else 'false'}}}")


def _update_text(r: dict) -> str:
    return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={_segment_id(r['remoteLogSegmentId'])}, "
            f"customMetadata={_custom(r['customMetadata'])}, "
            f"state={_state(SEGMENT_STATES, r['remoteLogSegmentState'])}, "
            f"eventTimestampMs={r['eventTimestampMs']}, brokerId={r['brokerId']}}}")


def _partition_delete_text(r: dict) -> str:
    return (f"RemotePartitionDeleteMetadata{{topicPartition={_topic_id_partition(r['topicIdPartition'])}, "
            f"state={_state(PARTITION_DELETE_STATES, r['remotePartitionDeleteState'])}, "
            f"eventTimestampMs={r['eventTimestampMs']}, brokerId={r['brokerId']}}}")


def _topic_id_partition(t: dict) -> str:
    """Kafka's ``TopicIdPartition.toString()``: ``topicId:topic-partition``."""
    return f"{uuid_text(t['id'])}:{t['name']}-{t['partition']}"


def _segment_id(s: dict) -> str:
    return (f"RemoteLogSegmentId{{topicIdPartition={_topic_id_partition(s['topicIdPartition'])}, "
            f"id={uuid_text(s['id'])}}}")


def _custom(data: bytes | None) -> str:
    return "Optional.empty" if data is None else f"Optional[CustomMetadata{{{len(data)} bytes}}]"


def _state(names: tuple, state_id: int) -> str:
    if not 0 <= state_id < len(names):
        raise InvalidRecordError(f"unknown state id {state_id}")
    return names[state_id]


_TYPES = {0: (_SEGMENT, _segment_text), 1: (_UPDATE, _update_text), 2: (_PARTITION_DELETE, _partition_delete_text)}
_RENDERERS = {message.name: render for message, render in _TYPES.values()}
