"""The records of ``__consumer_offsets``, the group coordinator's topic
(docs/format/consumer-offsets.md), as schema data for :mod:`pylog.coordinator.schema`.

Record types (the key's leading int16):

== =========================================== =================================================
0  OffsetCommit (key v0, written by old brokers) offset of one partition for a group
1  OffsetCommit                                 offset of one partition for a group
2  GroupMetadata                                a classic group: protocol, generation, members
3  ConsumerGroupMetadata                        a consumer-protocol group's epoch
4  ConsumerGroupPartitionMetadata               the topics it subscribes to, with their partitions
5  ConsumerGroupMemberMetadata                  one member's client, subscription, assignor
6  ConsumerGroupTargetAssignmentMetadata        the epoch of the target assignment
7  ConsumerGroupTargetAssignmentMember          one member's target partitions
8  ConsumerGroupCurrentMemberAssignment         one member's current partitions and epochs
== =========================================== =================================================

Other types (share and streams groups) decode to "unknown record type N".
"""

from __future__ import annotations

from dataclasses import dataclass

from pylog.coordinator.records import RecordSet, RecordType
from pylog.coordinator.schema import Array, Field, Message, Struct, decode, json_tree
from pylog.errors import InvalidRecordError

OFFSET_COMMIT_KEY = Message("OffsetCommitKey", "0-1", "none", (
    Field("group", "string"),
    Field("topic", "string"),
    Field("partition", "int32"),
))
OFFSET_COMMIT_VALUE = Message("OffsetCommitValue", "0-4", "4+", (
    Field("offset", "int64"),
    Field("leaderEpoch", "int32", "3+", default=-1),
    Field("metadata", "string"),
    Field("commitTimestamp", "int64"),
    Field("expireTimestamp", "int64", "1", default=-1),
    Field("topicId", "uuid", "4+", tag=0, tagged="4+"),
))
GROUP_METADATA_KEY = Message("GroupMetadataKey", "2", "none", (Field("group", "string"),))
MEMBER_METADATA = Struct((
    Field("memberId", "string"),
    Field("groupInstanceId", "string", "3+", nullable="3+", default=None),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("rebalanceTimeout", "int32", "1+", default=-1),
    Field("sessionTimeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
))
GROUP_METADATA_VALUE = Message("GroupMetadataValue", "0-4", "4+", (
    Field("protocolType", "string"),
    Field("generation", "int32"),
    Field("protocol", "string", nullable="0+"),
    Field("leader", "string", nullable="0+"),
    Field("currentStateTimestamp", "int64", "2+", default=-1),
    Field("members", Array(MEMBER_METADATA)),
))

# The client's embedded consumer protocol, stored inside GroupMetadataValue members.
_TOPIC_PARTITIONS = Struct((Field("topic", "string"), Field("partitions", Array("int32"))))
CONSUMER_PROTOCOL_SUBSCRIPTION = Message("ConsumerProtocolSubscription", "0-3", "none", (
    Field("topics", Array("string")),
    Field("userData", "bytes", nullable="0+", default=None),
    Field("ownedPartitions", Array(_TOPIC_PARTITIONS), "1+"),
    Field("generationId", "int32", "2+", default=-1),
    Field("rackId", "string", "3+", nullable="3+", default=None),
))
CONSUMER_PROTOCOL_ASSIGNMENT = Message("ConsumerProtocolAssignment", "0-3", "none", (
    Field("assignedPartitions", Array(_TOPIC_PARTITIONS)),
    Field("userData", "bytes", nullable="0+", default=None),
))
CONSUMER_PROTOCOL_TYPE = "consumer"


def _group_key(name: str, member: bool = False) -> Message:
    fields = (Field("groupId", "string"),) + ((Field("memberId", "string"),) if member else ())
    return Message(name, "0+", "none", fields)


def _flexible(name: str, fields: tuple) -> Message:
    return Message(name, "0", "0+", fields)


_TOPIC_ID_PARTITIONS = Struct((Field("topicId", "uuid"), Field("partitions", Array("int32"))))
CONSUMER_GROUP_METADATA_VALUE = _flexible("ConsumerGroupMetadataValue", (Field("epoch", "int32"),))
CONSUMER_GROUP_PARTITION_METADATA_VALUE = _flexible("ConsumerGroupPartitionMetadataValue", (
    Field("topics", Array(Struct((
        Field("topicId", "uuid"),
        Field("topicName", "string"),
        Field("numPartitions", "int32"),
        Field("partitionMetadata", Array(Struct((
            Field("partition", "int32"),
            Field("racks", Array("string")),
        )))),
    )))),
))
CONSUMER_GROUP_MEMBER_METADATA_VALUE = _flexible("ConsumerGroupMemberMetadataValue", (
    Field("instanceId", "string", nullable="0+"),
    Field("rackId", "string", nullable="0+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("subscribedTopicNames", Array("string")),
    Field("subscribedTopicRegex", "string", nullable="0+"),
    Field("rebalanceTimeoutMs", "int32", default=-1),
    Field("serverAssignor", "string", nullable="0+"),
    Field("classicMemberMetadata", Struct((
        Field("sessionTimeoutMs", "int32"),
        Field("supportedProtocols", Array(Struct((Field("name", "string"), Field("metadata", "bytes"))))),
    )), nullable="0+", default=None, tag=0, tagged="0+"),
))
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _flexible(
    "ConsumerGroupTargetAssignmentMetadataValue", (Field("assignmentEpoch", "int32"),))
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _flexible(
    "ConsumerGroupTargetAssignmentMemberValue", (Field("topicPartitions", Array(_TOPIC_ID_PARTITIONS)),))
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _flexible("ConsumerGroupCurrentMemberAssignmentValue", (
    Field("memberEpoch", "int32"),
    Field("previousMemberEpoch", "int32"),
    Field("state", "int8"),
    Field("assignedPartitions", Array(_TOPIC_ID_PARTITIONS)),
    Field("partitionsPendingRevocation", Array(_TOPIC_ID_PARTITIONS)),
))


def _group_metadata_json(version: int, value: dict) -> dict:
    """Kafka's dump shows the subscription and assignment of a consumer group's members
    decoded (each is ``version:int16`` + the consumer protocol message); bytes that do not
    decode stay base64."""
    tree = json_tree(GROUP_METADATA_VALUE, version, value)
    if value["protocolType"] != CONSUMER_PROTOCOL_TYPE:
        return tree
    for member, member_tree in zip(value["members"], tree["members"]):
        for name, schema in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                             ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            raw = member[name]
            version = int.from_bytes(raw[:2], "big", signed=True)
            try:
                if len(raw) >= 2:
                    member_tree[name] = json_tree(schema, version, decode(schema, version, raw[2:]))
            except InvalidRecordError:
                pass  # Kafka keeps the bytes too
    return tree


OFFSET_COMMIT = 1
GROUP_METADATA = 2
GROUP_RECORDS = RecordSet([
    RecordType(0, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    RecordType(OFFSET_COMMIT, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    RecordType(GROUP_METADATA, GROUP_METADATA_KEY, GROUP_METADATA_VALUE, _group_metadata_json),
    RecordType(3, _group_key("ConsumerGroupMetadataKey"), CONSUMER_GROUP_METADATA_VALUE),
    RecordType(4, _group_key("ConsumerGroupPartitionMetadataKey"), CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    RecordType(5, _group_key("ConsumerGroupMemberMetadataKey", member=True), CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    RecordType(6, _group_key("ConsumerGroupTargetAssignmentMetadataKey"),
               CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    RecordType(7, _group_key("ConsumerGroupTargetAssignmentMemberKey", member=True),
               CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    RecordType(8, _group_key("ConsumerGroupCurrentMemberAssignmentKey", member=True),
               CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
])


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: the next offset to consume and what the client stored with it.
    ``leader_epoch`` and ``expire_timestamp`` are ``None`` when the record has none (-1)."""
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int | None = None
    expire_timestamp: int | None = None

    @classmethod
    def from_value(cls, value: dict) -> "OffsetAndMetadata":
        return cls(value["offset"], value["metadata"], value["commitTimestamp"],
                   _optional(value["leaderEpoch"]), _optional(value["expireTimestamp"]))


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadata:
    """A classic group as its coordinator reloads it: ``state`` is ``"Empty"`` without
    members, else ``"Stable"``."""
    group_id: str
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: tuple[MemberMetadata, ...]

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    @classmethod
    def from_value(cls, group_id: str, value: dict) -> "GroupMetadata":
        members = tuple(MemberMetadata(m["memberId"], m["groupInstanceId"], m["clientId"], m["clientHost"],
                                       m["rebalanceTimeout"], m["sessionTimeout"], m["subscription"],
                                       m["assignment"]) for m in value["members"])
        return cls(group_id, value["protocolType"], value["generation"], value["protocol"], value["leader"],
                   _optional(value["currentStateTimestamp"]), members)


def _optional(n: int) -> int | None:
    return None if n == -1 else n
