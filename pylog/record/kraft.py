"""KRaft snapshot files, the control records of the metadata log and its metadata records
(docs/format/kraft-snapshot.md): read only, for ``pylog dump``.

A snapshot ``<20-digit end offset>-<10-digit epoch>.checkpoint`` is a run of v2 batches
like a segment. The values of its control records (SnapshotHeader, SnapshotFooter,
KRaftVersion, KRaftVoters, LeaderChange) are Kafka protocol messages in their flexible
encoding; :func:`control_text` renders one the way Kafka's DumpLogSegments prints it,
through the JSON Kafka's generated message converters write.
"""

from __future__ import annotations

import base64
import json
import re

from pylog.coordinator.schema import Array, Field, Message, Struct, decode, json_text, json_tree
from pylog.errors import CorruptCheckpointError, InvalidRecordError
from pylog.layout import (
    CONTROL_TYPE_NAMES, INT16, INT32, INT64, KRAFT_BOOTSTRAP_FILENAME, KRAFT_SNAPSHOT_SUFFIX, OFFSET_DIGITS,
)

EPOCH_DIGITS = 10
_SNAPSHOT_NAME = re.compile(rf"(\d{{{OFFSET_DIGITS}}})-(\d{{{EPOCH_DIGITS}}}){re.escape(KRAFT_SNAPSHOT_SUFFIX)}")
#: The directory id LeaderChange voters carry when read at version 0 (Kafka's Uuid.ZERO_UUID).
_ZERO_UUID = base64.urlsafe_b64encode(bytes(16)).rstrip(b"=").decode()


def snapshot_title(name: str) -> str:
    """The line Kafka's DumpLogSegments prints before a snapshot's batches: ``KRaft bootstrap
    snapshot`` or ``Snapshot end offset: N, epoch: E``. Raises :class:`CorruptCheckpointError`
    for a name that is neither."""
    if name == KRAFT_BOOTSTRAP_FILENAME:
        return "KRaft bootstrap snapshot"
    m = _SNAPSHOT_NAME.fullmatch(name)
    if m is None:
        raise CorruptCheckpointError(f"{name} is not a KRaft snapshot name (<{OFFSET_DIGITS}-digit end offset>-"
                                     f"<{EPOCH_DIGITS}-digit epoch>{KRAFT_SNAPSHOT_SUFFIX})")
    return f"Snapshot end offset: {int(m[1])}, epoch: {int(m[2])}"


class _Fields:
    """Reads the fields of a flexible-version Kafka message in order. Each read raises
    :class:`InvalidRecordError` when the value ends first; bytes after the last field are
    ignored, as Kafka's readers ignore them."""

    __slots__ = ("_buf", "_pos", "_what")

    def __init__(self, buf: bytes, what: str):
        self._buf = buf
        self._pos = 0
        self._what = what

    def _take(self, n: int) -> bytes:
        end = self._pos + n
        if n < 0 or end > len(self._buf):
            raise InvalidRecordError(f"{self._what} control record value ends at byte {len(self._buf)}, "
                                     f"inside a field at byte {self._pos}")
        out = self._buf[self._pos:end]
        self._pos = end
        return out

    @property
    def position(self) -> int:
        return self._pos

    def int16(self) -> int:
        return INT16.unpack(self._take(2))[0]

    def uint16(self) -> int:
        return int.from_bytes(self._take(2), "big")

    def int32(self) -> int:
        return INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return INT64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
        raise InvalidRecordError(f"{self._what} control record has an unsigned varint longer than 5 bytes")

    def string(self) -> str:
        return self._take(self._length("string")).decode("utf-8", "replace")

    def uuid(self) -> str:
        """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, unpadded."""
        return base64.urlsafe_b64encode(self._take(16)).rstrip(b"=").decode()

    def array(self, read_item) -> list:
        return [read_item(self) for _ in range(self._length("array"))]

    def tagged_fields(self) -> None:
        """Skip the tagged fields (none of them appear in Kafka's JSON)."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def _length(self, what: str) -> int:
        n = self.uvarint() - 1  # compact encoding: length + 1, 0 = null
        if n < 0:
            raise InvalidRecordError(f"{self._what} control record has a null {what}")
        return n


def _message(f: _Fields, schema) -> dict:
    """Read the fields ``schema`` lists, ``(JSON name, reader)`` in wire order, then the
    message's tagged fields."""
    out = {name: read(f) for name, read in schema}
    f.tagged_fields()
    return out


def _array_of(schema):
    return lambda f: f.array(lambda g: _message(g, schema))


_VERSION = ("version", _Fields.int16)
_ENDPOINT = (("name", _Fields.string), ("host", _Fields.string), ("port", _Fields.uint16))
_VERSION_RANGE = (("minSupportedVersion", _Fields.int16), ("maxSupportedVersion", _Fields.int16))
_VOTER = (("voterId", _Fields.int32), ("voterDirectoryId", _Fields.uuid), ("endpoints", _array_of(_ENDPOINT)),
          ("kRaftVersionFeature", lambda f: _message(f, _VERSION_RANGE)))
_LEADER_CHANGE_VOTER = (("voterId", _Fields.int32),)


def _leader_change(f: _Fields) -> dict:
    """Kafka reads LeaderChange at version 0 and writes its JSON at the version the record
    states, so from version 1 on every voter shows the zero directory id."""
    out = _message(f, (_VERSION, ("leaderId", _Fields.int32), ("voters", _array_of(_LEADER_CHANGE_VOTER)),
                       ("grantingVoters", _array_of(_LEADER_CHANGE_VOTER))))
    if out["version"] >= 1:
        for voter in out["voters"] + out["grantingVoters"]:
            voter["voterDirectoryId"] = _ZERO_UUID
    return out


#: control type id -> (label DumpLogSegments prints before the JSON, message reader,
#: highest version Kafka's JSON converters write)
_MESSAGES = {
    2: ("LeaderChange: ", _leader_change, 1),
    3: ("SnapshotHeader ", lambda f: _message(f, (_VERSION, ("lastContainedLogTimestamp", _Fields.int64))), 0),
    4: ("SnapshotFooter ", lambda f: _message(f, (_VERSION,)), 0),
    5: ("KRaftVersion ", lambda f: _message(f, (_VERSION, ("kRaftVersion", _Fields.int16))), 0),
    6: ("KRaftVoters ", lambda f: _message(f, (_VERSION, ("voters", _array_of(_VOTER)))), 0),
}


def control_text(type_id: int, value: bytes | None) -> str | None:
    """``SnapshotHeader {"version":0,...}`` and the like for a KRaft control record, or
    ``None`` for a type id that is not one (transaction markers, unknown types).
    Raises :class:`InvalidRecordError` for a value cut short or a version Kafka's JSON
    converter refuses too. O(len(value))."""
    entry = _MESSAGES.get(type_id)
    if entry is None:
        return None
    label, read, max_version = entry
    name = CONTROL_TYPE_NAMES[type_id]
    if value is None:
        raise InvalidRecordError(f"{name} control record has a null value")
    message = read(_Fields(bytes(value), name))
    if not 0 <= message["version"] <= max_version:
        raise InvalidRecordError(f"{name} control record has version {message['version']}; "
                                 f"versions 0 to {max_version} are defined")
    return label + json.dumps(message, separators=(",", ":"), ensure_ascii=False)


# --- cluster metadata records (DumpLogSegments --cluster-metadata-decoder) -----------------

#: Each record of the metadata log (and of a KRaft snapshot's data batches) is a value of
#: uvarint frame version (1), uvarint record type, uvarint version, then the record's message
#: in the flexible encoding; no key.
METADATA_FRAME_VERSION = 1

_INT32S = Array("int32")
_UUIDS = Array("uuid")
_ENDPOINTS = Array(Struct((Field("name", "string"), Field("host", "string"), Field("port", "int16"),
                           Field("securityProtocol", "int16"))))
_FEATURES = Array(Struct((Field("name", "string"), Field("minSupportedVersion", "int16"),
                          Field("maxSupportedVersion", "int16"))))


def _tagged(name: str, typ, tag: int, present: str = "0+", default=None, nullable: bool = True) -> Field:
    return Field(name, typ, present, nullable=present if nullable else "none", default=default, tag=tag,
                 tagged=present)


#: record type -> (Kafka's MetadataRecordType name, schema), fields in the order Kafka's JSON
#: converters write them: the types a broker's metadata log and a formatted log dir's bootstrap
#: snapshot hold, each checked against Kafka's output (tests/kafka/test_dump_parity.py). Kafka's
#: booleans and uint16 ports are read as int8 and int16 and given their Java type by _JAVA_TYPES.
#: Types missing here print a skip notice (docs/cli.md).
_METADATA_RECORDS = {
    0: ("REGISTER_BROKER_RECORD", Message("RegisterBrokerRecord", "0-4", "0+", (
        Field("brokerId", "int32"), Field("isMigratingZkBroker", "int8", "2+"), Field("incarnationId", "uuid"),
        Field("brokerEpoch", "int64"), Field("endPoints", _ENDPOINTS), Field("features", _FEATURES),
        Field("rack", "string", nullable="0+"), Field("fenced", "int8"), Field("inControlledShutdown", "int8", "1+"),
        _tagged("logDirs", _UUIDS, 0, "3+", default=[], nullable=False), _tagged("cordonedLogDirs", _UUIDS, 1, "4+")))),
    2: ("TOPIC_RECORD", Message("TopicRecord", "0", "0+", (Field("name", "string"), Field("topicId", "uuid")))),
    3: ("PARTITION_RECORD", Message("PartitionRecord", "0-2", "0+", (
        Field("partitionId", "int32"), Field("topicId", "uuid"), Field("replicas", _INT32S), Field("isr", _INT32S),
        Field("removingReplicas", _INT32S), Field("addingReplicas", _INT32S), Field("leader", "int32"),
        _tagged("leaderRecoveryState", "int8", 0, default=0, nullable=False), Field("leaderEpoch", "int32"),
        Field("partitionEpoch", "int32"), Field("directories", _UUIDS, "1+"),
        _tagged("eligibleLeaderReplicas", _INT32S, 1, "2+"), _tagged("lastKnownElr", _INT32S, 2, "2+")))),
    4: ("CONFIG_RECORD", Message("ConfigRecord", "0", "0+", (
        Field("resourceType", "int8"), Field("resourceName", "string"), Field("name", "string"),
        Field("value", "string", nullable="0+")))),
    5: ("PARTITION_CHANGE_RECORD", Message("PartitionChangeRecord", "0-2", "0+", (
        Field("partitionId", "int32"), Field("topicId", "uuid"), _tagged("isr", _INT32S, 0),
        _tagged("leader", "int32", 1, default=-2, nullable=False), _tagged("replicas", _INT32S, 2),
        _tagged("removingReplicas", _INT32S, 3), _tagged("addingReplicas", _INT32S, 4),
        _tagged("leaderRecoveryState", "int8", 5, default=-1, nullable=False), _tagged("directories", _UUIDS, 8, "1+"),
        _tagged("eligibleLeaderReplicas", _INT32S, 6, "2+"), _tagged("lastKnownElr", _INT32S, 7, "2+")))),
    9: ("REMOVE_TOPIC_RECORD", Message("RemoveTopicRecord", "0", "0+", (Field("topicId", "uuid"),))),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", Message("UserScramCredentialRecord", "0", "0+", (
        Field("name", "string"), Field("mechanism", "int8"), Field("salt", "bytes"), Field("storedKey", "bytes"),
        Field("serverKey", "bytes"), Field("iterations", "int32")))),
    12: ("FEATURE_LEVEL_RECORD", Message("FeatureLevelRecord", "0", "0+", (
        Field("name", "string"), Field("featureLevel", "int16")))),
    15: ("PRODUCER_IDS_RECORD", Message("ProducerIdsRecord", "0", "0+", (
        Field("brokerId", "int32"), Field("brokerEpoch", "int64"), Field("nextProducerId", "int64")))),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", Message("BrokerRegistrationChangeRecord", "0-3", "0+", (
        Field("brokerId", "int32"), Field("brokerEpoch", "int64"),
        _tagged("fenced", "int8", 0, default=0, nullable=False),
        _tagged("inControlledShutdown", "int8", 1, "1+", default=0, nullable=False),
        _tagged("logDirs", _UUIDS, 2, "2+", default=[], nullable=False), _tagged("cordonedLogDirs", _UUIDS, 3, "3+")))),
    20: ("NO_OP_RECORD", Message("NoOpRecord", "0", "0+", ())),
    23: ("BEGIN_TRANSACTION_RECORD", Message("BeginTransactionRecord", "0", "0+", (_tagged("name", "string", 0),))),
    24: ("END_TRANSACTION_RECORD", Message("EndTransactionRecord", "0", "0+", ())),
    27: ("REGISTER_CONTROLLER_RECORD", Message("RegisterControllerRecord", "0", "0+", (
        Field("controllerId", "int32"), Field("incarnationId", "uuid"), Field("zkMigrationReady", "int8"),
        Field("endPoints", _ENDPOINTS), Field("features", _FEATURES)))),
    28: ("CLEAR_ELR_RECORD", Message("ClearElrRecord", "0", "0+", (Field("topicName", "string"),))),
}
#: record type -> (its boolean fields, its uint16 fields), by JSON name
_JAVA_TYPES = {0: ({"isMigratingZkBroker", "fenced", "inControlledShutdown"}, {"port"}),
               27: ({"zkMigrationReady"}, {"port"})}


def _with_java_types(tree, booleans: set, uint16s: set):
    """``tree`` with the named int8 fields as booleans and int16 fields as unsigned."""
    if isinstance(tree, list):
        return [_with_java_types(v, booleans, uint16s) for v in tree]
    if not isinstance(tree, dict):
        return tree
    return {k: (v != 0 if k in booleans else v & 0xFFFF if k in uint16s else _with_java_types(v, booleans, uint16s))
            for k, v in tree.items()}


def metadata_text(value: bytes | None, offset: int) -> str:
    """A cluster metadata record's payload as DumpLogSegments prints it:
    ``{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{...}}``, or
    ``Error at OFFSET, skipping. REASON`` for one it cannot decode. O(len(value))."""
    try:
        type_name, version, data = _metadata_record(value)
    except InvalidRecordError as e:
        return f"Error at {offset}, skipping. {e.reason}"
    return json_text({"type": type_name, "version": version, "data": data})


def read_frame(value: bytes | None, what: str) -> tuple[int, int, bytes]:
    """``(record type, version, message bytes)`` of a framed record value (the metadata log's,
    __remote_log_metadata's). Raises :class:`InvalidRecordError` for a null value, a cut
    varint or a frame version other than 1."""
    if value is None:
        raise InvalidRecordError(f"a {what} record has a value")
    f = _Fields(bytes(value), what)
    frame = f.uvarint()
    if frame != METADATA_FRAME_VERSION:
        raise InvalidRecordError(f"Could not deserialize {what} record due to unknown frame version {frame}"
                                 f" (expected {METADATA_FRAME_VERSION})")
    type_id, version = f.uvarint(), f.uvarint()
    return type_id, version, bytes(value)[f.position:]


def _metadata_record(value: bytes | None) -> tuple[str, int, dict]:
    type_id, version, body = read_frame(value, "metadata")
    known = _METADATA_RECORDS.get(type_id)
    if known is None:
        raise InvalidRecordError(f"pylog does not decode metadata record type {type_id}")
    name, message = known
    message.check_version(version)
    tree = json_tree(message, version, decode(message, version, body))
    return name, version, _with_java_types(tree, *_JAVA_TYPES.get(type_id, (set(), set())))
