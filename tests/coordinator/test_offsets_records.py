"""``__consumer_offsets`` records, byte for byte: every record type and value version
encoded and decoded against bytes written out here from Kafka's schemas."""

from __future__ import annotations

import pytest

from pylog.coordinator.offsets_records import GROUP_RECORDS, GroupMetadata, OffsetAndMetadata
from pylog.coordinator.records import UnknownRecordTypeError
from pylog.errors import InvalidRecordError
from tests.coordinator.wire import (
    NO_TAGS, array, blob, compact_array, compact_blob, compact_string, i8, i16, i32, i64, string, tags, uvarint,
)

TOPIC_ID = bytes(range(16))


def round_trip(type_id: int, key: dict, key_bytes: bytes, version: int | None, value: dict | None,
               value_bytes: bytes | None) -> None:
    """Encoding gives exactly the expected bytes, and decoding them gives the fields back."""
    assert GROUP_RECORDS.encode_key(type_id, key) == i16(type_id) + key_bytes
    full_value = None if value_bytes is None else i16(version) + value_bytes
    assert GROUP_RECORDS.encode_value(type_id, version, value) == full_value
    rec = GROUP_RECORDS.decode(i16(type_id) + key_bytes, full_value)
    assert (rec.type_id, rec.key, rec.value_version) == (type_id, key, version)
    assert only_fields_of(rec.value, value) == value


def only_fields_of(decoded, expected):
    """``decoded`` limited to the fields ``expected`` names, at every level (a decoded
    message also holds the defaults of fields its version lacks)."""
    if isinstance(expected, dict):
        return {k: only_fields_of(decoded[k], v) for k, v in expected.items()}
    if isinstance(expected, list) and len(decoded) == len(expected):
        return [only_fields_of(d, e) for d, e in zip(decoded, expected)]
    return decoded


# --- offset commits -----------------------------------------------------------------------

COMMIT_KEY = {"group": "g1", "topic": "orders", "partition": 7}
COMMIT_KEY_BYTES = string("g1") + string("orders") + i32(7)


@pytest.mark.parametrize("key_type", [0, 1])
def test_offset_commit_key_both_types(key_type):
    round_trip(key_type, COMMIT_KEY, COMMIT_KEY_BYTES, None, None, None)


@pytest.mark.parametrize("version, value, value_bytes", [
    (0, {"offset": 42, "metadata": "m", "commitTimestamp": 1000, "leaderEpoch": -1, "expireTimestamp": -1},
     i64(42) + string("m") + i64(1000)),
    (1, {"offset": 42, "metadata": "m", "commitTimestamp": 1000, "expireTimestamp": 2000},
     i64(42) + string("m") + i64(1000) + i64(2000)),
    (2, {"offset": 42, "metadata": "", "commitTimestamp": 1000, "expireTimestamp": -1},
     i64(42) + string("") + i64(1000)),
    (3, {"offset": 42, "leaderEpoch": 5, "metadata": "m", "commitTimestamp": 1000},
     i64(42) + i32(5) + string("m") + i64(1000)),
    (4, {"offset": 42, "leaderEpoch": -1, "metadata": "é", "commitTimestamp": 1000},
     i64(42) + i32(-1) + compact_string("é") + i64(1000) + NO_TAGS),
])
def test_offset_commit_value_every_version(version, value, value_bytes):
    round_trip(1, COMMIT_KEY, COMMIT_KEY_BYTES, version, value, value_bytes)


def test_offset_commit_fields_absent_from_a_version_read_as_their_defaults():
    rec = GROUP_RECORDS.decode(i16(1) + COMMIT_KEY_BYTES, i16(0) + i64(42) + string("m") + i64(1000))
    assert OffsetAndMetadata.from_value(rec.value) == OffsetAndMetadata(42, "m", 1000, None, None)


def test_offset_commit_tombstone_has_no_value():
    round_trip(1, COMMIT_KEY, COMMIT_KEY_BYTES, None, None, None)
    assert GROUP_RECORDS.encode_value(1, 3, None) is None


def test_unknown_tagged_fields_survive_a_round_trip():
    raw = i16(4) + i64(1) + i32(0) + compact_string("") + i64(2) + tags((9, b"xy"))
    rec = GROUP_RECORDS.decode(i16(1) + COMMIT_KEY_BYTES, raw)
    assert rec.value["_unknown_tags"] == [(9, b"xy")]
    assert GROUP_RECORDS.encode_value(1, 4, rec.value) == raw


# --- classic group metadata -----------------------------------------------------------------

GROUP_KEY = {"group": "g1"}
MEMBER = {"memberId": "m1", "groupInstanceId": "i1", "clientId": "c1", "clientHost": "/10.0.0.1",
          "rebalanceTimeout": 300000, "sessionTimeout": 45000, "subscription": b"\x00\x01", "assignment": b""}
GROUP = {"protocolType": "consumer", "generation": 3, "protocol": "range", "leader": "m1",
         "currentStateTimestamp": 1721325671188, "members": [MEMBER]}


def member_bytes(version: int) -> bytes:
    if version >= 4:
        return (compact_string("m1") + compact_string("i1") + compact_string("c1") + compact_string("/10.0.0.1")
                + i32(300000) + i32(45000) + compact_blob(b"\x00\x01") + compact_blob(b"") + NO_TAGS)
    return (string("m1") + (string("i1") if version >= 3 else b"") + string("c1") + string("/10.0.0.1")
            + (i32(300000) if version >= 1 else b"") + i32(45000) + blob(b"\x00\x01") + blob(b""))


def group_bytes(version: int) -> bytes:
    if version >= 4:
        return (compact_string("consumer") + i32(3) + compact_string("range") + compact_string("m1")
                + i64(1721325671188) + compact_array([member_bytes(4)]) + NO_TAGS)
    return (string("consumer") + i32(3) + string("range") + string("m1")
            + (i64(1721325671188) if version >= 2 else b"") + array([member_bytes(version)]))


def fields_in(version: int) -> dict:
    member = dict(MEMBER)
    if version < 3:
        del member["groupInstanceId"]
    if version < 1:
        del member["rebalanceTimeout"]
    group = dict(GROUP, members=[member])
    if version < 2:
        del group["currentStateTimestamp"]
    return group


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_every_version(version):
    round_trip(2, GROUP_KEY, string("g1"), version, fields_in(version), group_bytes(version))


def test_group_metadata_without_protocol_or_members():
    value = {"protocolType": "consumer", "generation": 4, "protocol": None, "leader": None, "members": []}
    raw = string("consumer") + i32(4) + string(None) + string(None) + array([])
    round_trip(2, GROUP_KEY, string("g1"), 1, value, raw)
    group = GroupMetadata.from_value("g1", GROUP_RECORDS.decode(i16(2) + string("g1"), i16(1) + raw).value)
    assert (group.state, group.generation, group.protocol, group.leader) == ("Empty", 4, None, None)


# --- consumer-protocol group records (all flexible, version 0) ---------------------------------

PARTITIONS = compact_array([TOPIC_ID + compact_array([i32(0), i32(2)]) + NO_TAGS])
CONSUMER_GROUP_CASES = [
    (3, {"groupId": "g"}, {"epoch": 9}, i32(9) + NO_TAGS),
    (4, {"groupId": "g"},
     {"topics": [{"topicId": TOPIC_ID, "topicName": "t", "numPartitions": 2,
                  "partitionMetadata": [{"partition": 0, "racks": ["r1"]}]}]},
     compact_array([TOPIC_ID + compact_string("t") + i32(2)
                    + compact_array([i32(0) + compact_array([compact_string("r1")]) + NO_TAGS]) + NO_TAGS])
     + NO_TAGS),
    (5, {"groupId": "g", "memberId": "m"},
     {"instanceId": None, "rackId": "r1", "clientId": "c", "clientHost": "/h", "subscribedTopicNames": ["t"],
      "subscribedTopicRegex": None, "rebalanceTimeoutMs": 5000, "serverAssignor": "uniform",
      "classicMemberMetadata": None},
     compact_string(None) + compact_string("r1") + compact_string("c") + compact_string("/h")
     + compact_array([compact_string("t")]) + compact_string(None) + i32(5000) + compact_string("uniform")
     + NO_TAGS),
    (5, {"groupId": "g", "memberId": "m"},
     {"instanceId": "i", "rackId": None, "clientId": "c", "clientHost": "/h", "subscribedTopicNames": [],
      "subscribedTopicRegex": "t.*", "rebalanceTimeoutMs": -1, "serverAssignor": None,
      "classicMemberMetadata": {"sessionTimeoutMs": 45000,
                                "supportedProtocols": [{"name": "range", "metadata": b"\x00\x03"}]}},
     compact_string("i") + compact_string(None) + compact_string("c") + compact_string("/h") + compact_array([])
     + compact_string("t.*") + i32(-1) + compact_string(None)
     + tags((0, uvarint(1) + i32(45000)
             + compact_array([compact_string("range") + compact_blob(b"\x00\x03") + NO_TAGS]) + NO_TAGS))),
    (6, {"groupId": "g"}, {"assignmentEpoch": 12}, i32(12) + NO_TAGS),
    (7, {"groupId": "g", "memberId": "m"}, {"topicPartitions": [{"topicId": TOPIC_ID, "partitions": [0, 2]}]},
     PARTITIONS + NO_TAGS),
    (8, {"groupId": "g", "memberId": "m"},
     {"memberEpoch": 4, "previousMemberEpoch": 3, "state": 1,
      "assignedPartitions": [{"topicId": TOPIC_ID, "partitions": [0, 2]}], "partitionsPendingRevocation": []},
     i32(4) + i32(3) + i8(1) + PARTITIONS + compact_array([]) + NO_TAGS),
]


@pytest.mark.parametrize("type_id, key, value, value_bytes", CONSUMER_GROUP_CASES)
def test_consumer_group_records(type_id, key, value, value_bytes):
    key_bytes = string(key["groupId"]) + (string(key["memberId"]) if "memberId" in key else b"")
    round_trip(type_id, key, key_bytes, 0, value, value_bytes)


# --- what cannot be decoded -----------------------------------------------------------------------

def test_an_unknown_record_type_is_named():
    with pytest.raises(UnknownRecordTypeError, match="unknown record type 99") as e:
        GROUP_RECORDS.decode(i16(99) + string("g"), None)
    assert e.value.type_id == 99


@pytest.mark.parametrize("key, value, match", [
    (i16(1) + COMMIT_KEY_BYTES, i16(3) + i64(42) + i32(5), "end inside a field"),
    (i16(1) + COMMIT_KEY_BYTES, i16(5) + i64(42), "no version 5"),
    (i16(1) + string("g1"), None, "end inside a field"),
    (b"\x00", None, "Could not read version from key's buffer"),
    (i16(2) + string("g1"), i16(1) + string("consumer") + i32(1) + string(None) + string(None) + i32(10**6),
     "claims 1000000 items"),
    (i16(2) + string("g1"), i16(4) + compact_string(None), "protocolType is null but not nullable"),
])
def test_bytes_that_break_the_schema_raise_invalid_record(key, value, match):
    with pytest.raises(InvalidRecordError, match=match):
        GROUP_RECORDS.decode(key, value)


# --- JSON as Kafka's dump prints it ---------------------------------------------------------------

def test_json_of_uuids_and_tagged_structs():
    _, key, value, raw = CONSUMER_GROUP_CASES[5]
    assert GROUP_RECORDS.dump_text(i16(7) + string("g") + string("m"), i16(0) + raw, 0) == (
        '{"type":"7","data":{"groupId":"g","memberId":"m"}}',
        '{"version":"0","data":{"topicPartitions":[{"topicId":"AAECAwQFBgcICQoLDA0ODw","partitions":[0,2]}]}}')
    _, key, value, raw = CONSUMER_GROUP_CASES[3]
    assert GROUP_RECORDS.dump_text(i16(5) + string("g") + string("m"), i16(0) + raw, 0)[1] == (
        '{"version":"0","data":{"instanceId":"i","rackId":null,"clientId":"c","clientHost":"/h",'
        '"subscribedTopicNames":[],"subscribedTopicRegex":"t.*","rebalanceTimeoutMs":-1,"serverAssignor":null,'
        '"classicMemberMetadata":{"sessionTimeoutMs":45000,"supportedProtocols":[{"name":"range",'
        '"metadata":"AAM="}]}}}')
    _, key, value, raw = CONSUMER_GROUP_CASES[2]
    assert '"classicMemberMetadata"' not in GROUP_RECORDS.dump_text(i16(5) + string("g") + string("m"),
                                                                  i16(0) + raw, 0)[1]


def test_json_strings_are_escaped_as_jackson_writes_them():
    value = i16(3) + i64(1) + i32(2) + string('q"b\\s/\x1f\t\u2028é') + i64(3)
    assert GROUP_RECORDS.dump_text(i16(1) + COMMIT_KEY_BYTES, value, 0)[1] == (
        '{"version":"3","data":{"offset":1,"leaderEpoch":2,"metadata":"q\\"b\\\\s/\\u001F\\t\u2028é",'
        '"commitTimestamp":3}}')
