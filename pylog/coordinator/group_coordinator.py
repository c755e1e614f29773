"""``GroupCoordinator``: committed offsets and group metadata of the consumer groups of a
log dir, written as Kafka's group coordinator writes them (docs/consumers.md).

A group lives in ``__consumer_offsets-<partition_for_group(group)>`` (50 partitions by
default, compacted). A commit appends one batch of OffsetCommit records (key type 1,
value version 3), checked first against the group's membership under the group's mutex
(pylog/coordinator/group_membership.py), so a commit is in the log only if its member and
generation were current then. Every completed rebalance appends a GroupMetadata record
(value version 3, the members' subscriptions and assignments in the consumer protocol);
deleting a group appends tombstones for its offsets and metadata. A transactional commit
(``sender=``) is a batch of the producer's transaction and counts only if it commits.

Committed offsets are read back by replaying the partition (``isolation="committed"``),
incrementally (pylog/coordinator/tail.py). Durability: an append reaches the operating
system before the call returns (it survives the process), the disk at the partition's
flush policy.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Mapping

from pylog.arguments import check_int, check_name, check_topic_partition
from pylog.logdir.per_root import PerRoot
from pylog.logdir.writers import WriterPool
from pylog.closing import close_all
from pylog.coordinator.group_membership import GroupMembership, read_group_file
from pylog.coordinator.offsets_reader import OFFSETS_TOPIC, GroupState
from pylog.coordinator.offsets_records import (
    CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION, CONSUMER_PROTOCOL_TYPE, GROUP_METADATA,
    GROUP_RECORDS, OFFSET_COMMIT,
)
from pylog.coordinator.partitioning import DEFAULT_PARTITIONS, partition_for_group
from pylog.coordinator.schema import encode
from pylog.coordinator.tail import TailReader
from pylog.coordinator.txn_coordinator import ensure_internal_topic
from pylog.errors import GroupNotEmptyError, GroupSubscribedToTopicError, InvalidArgumentError
from pylog.layout import CLIENTS_LOCK_FILE, INT32_MAX, INT64_MAX
from pylog.locks import ByteLockFile
from pylog.partition_dir import partition_dir_name
from pylog.record.encode import now_ms

OFFSET_COMMIT_VALUE_VERSION = 3
_OFFSET_COMMIT_KEY_TYPE = struct.pack(">h", OFFSET_COMMIT)
_VALUE_V3_HEAD = struct.Struct(">hqi")  # version, offset, leaderEpoch
_INT32, _INT64, _INT16 = struct.Struct(">i"), struct.Struct(">q"), struct.Struct(">h")
GROUP_METADATA_VALUE_VERSION = 3
SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 0
#: The longest string of a coordinator record (an int16 length).
MAX_STRING_BYTES = 32767


class GroupCoordinator(PerRoot):
    """The groups of one log dir, as seen from this process (one per log dir:
    :meth:`for_root`)."""

    def __init__(self, root: str, *, partitions: int = DEFAULT_PARTITIONS):
        self.root = os.path.abspath(root)
        self.partitions = partitions
        self.pool = WriterPool.for_root(self.root)
        self._lock = threading.RLock()
        self._readers: dict[int, TailReader] = {}
        self._states: dict[int, GroupState] = {}
        self._memberships: dict[str, GroupMembership] = {}
        self._membership_locks: ByteLockFile | None = None  # one descriptor for every group's locks
        ensure_internal_topic(self.root, OFFSETS_TOPIC, partitions)

    def _close(self) -> None:
        """Close the readers and give back the logs written (the last user's release)."""
        close_all([r.close for r in self._readers.values()] + [m.close for m in self._memberships.values()]
                  + ([self._membership_locks.close] if self._membership_locks is not None else [])
                  + [self.pool.release])

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, partition_for_group(group_id, self.partitions)

    def membership(self, group_id: str) -> GroupMembership:
        with self._lock:
            m = self._memberships.get(group_id)
            if m is None:
                if self._membership_locks is None:
                    self._membership_locks = ByteLockFile(os.path.join(self.root, CLIENTS_LOCK_FILE))
                m = self._memberships[group_id] = GroupMembership(
                    self.root, group_id, on_generation=lambda state: self.write_group_metadata(state),
                    lock_file=self._membership_locks)
            return m

    # -- reading -------------------------------------------------------------------------------
    def _state(self, group_id: str) -> GroupState:
        """The replayed state of the group's partition, caught up. O(new records)."""
        return self._partition_state(partition_for_group(group_id, self.partitions))

    def group_ids(self) -> list[str]:
        """Every group with committed offsets or metadata, sorted. O(new records of all
        the partitions)."""
        ids = set()
        for p in range(self.partitions):
            state = self._partition_state(p)
            ids.update(state.offsets, state.groups)
        return sorted(ids)

    def _partition_state(self, p: int) -> GroupState:
        with self._lock:
            reader = self._readers.get(p)
            if reader is None:
                reader = self._readers[p] = TailReader(os.path.join(self.root, partition_dir_name(OFFSETS_TOPIC, p)))
            records, reset = reader.new_records()
            state = self._states.get(p)
            if state is None or reset:
                state = self._states[p] = GroupState()
            for r in records:
                state.apply(r.key, r.value, offset=r.offset, path=reader.path)
            return state

    def committed(self, group_id: str) -> dict:
        """``{(topic, partition): OffsetAndMetadata}`` committed by ``group_id``."""
        return dict(self._state(group_id).offsets.get(group_id, {}))

    def group_metadata(self, group_id: str):
        """The group's last GroupMetadata record (a ``GroupMetadata``), or None."""
        return self._state(group_id).groups.get(group_id)

    # -- writing -------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, offsets: dict, *, generation: int = -1, member_id: str = "",
                       sender=None) -> None:
        """Append the offsets of ``offsets`` (``{(topic, partition): offset |
        OffsetAndMetadata}``) as one batch if the member and generation are current
        (else :class:`IllegalGenerationError`, :class:`RebalanceInProgressError` or
        :class:`UnknownMemberIdError`, and nothing is written). ``sender``: a
        transactional producer's :class:`~pylog.clients.sender.Sender`, whose
        ``append_atomic`` appends the batch in its transaction. Cost: one append of
        len(offsets) records under the group's mutex, by this process or by the one
        holding the partition's log (``WriterPool.append``: a round trip)."""
        records = self.offset_records(group_id, offsets)
        if not records:
            return
        membership = self.membership(group_id)
        with membership.mutex:
            state = read_group_file(self.root, group_id)
            if state is not None:
                membership.check_commit(state, member_id, generation)
            elif generation >= 0 or member_id:
                membership.check_commit({"members": {}, "generation": 0, "state": "Empty"}, member_id, generation)
            tp = self.offsets_partition(group_id)
            if sender is not None:
                sender.append_atomic(tp, records)
            else:
                self.pool.append(*tp, records)

    def offset_records(self, group_id: str, offsets: dict) -> list:
        """``(key, value)`` OffsetCommit records (key type 1, value version 3), encoded
        directly: the same bytes as the schema codec (tests/clients check it), at about a
        microsecond each. Checks ``offsets`` first (:func:`checked_offsets`)."""
        now = now_ms()
        group_prefix = _OFFSET_COMMIT_KEY_TYPE + _string(check_name(group_id, "group id"))
        out = []
        for (topic, partition), offset, metadata, leader_epoch in checked_offsets(offsets):
            key = group_prefix + _string(topic) + _INT32.pack(partition)
            value = (_VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch) + _string(metadata)
                     + _INT64.pack(now))
            out.append((key, value))
        return out

    def write_group_metadata(self, state: dict) -> None:
        """Append the group's GroupMetadata record for a completed generation (called
        under the group's mutex)."""
        members = []
        for member_id, info in sorted(state["members"].items()):
            assigned = state["assignment"].get(member_id, [])
            members.append({
                "memberId": member_id, "groupInstanceId": None, "clientId": info["client_id"],
                "clientHost": info["client_host"], "rebalanceTimeout": info["rebalance_timeout_ms"],
                "sessionTimeout": info["session_timeout_ms"],
                "subscription": _versioned(CONSUMER_PROTOCOL_SUBSCRIPTION, SUBSCRIPTION_VERSION, {
                    "topics": info["topics"], "userData": None,
                    "ownedPartitions": _by_topic(info["owned"])}),
                "assignment": consumer_assignment(assigned)})
        value = {"protocolType": CONSUMER_PROTOCOL_TYPE, "generation": state["generation"],
                 "protocol": state["protocol"], "leader": state["leader"],
                 "currentStateTimestamp": state["current_state_ms"], "members": members}
        key = GROUP_RECORDS.encode_key(GROUP_METADATA, {"group": state["group_id"]})
        raw = GROUP_RECORDS.encode_value(GROUP_METADATA, GROUP_METADATA_VALUE_VERSION, value)
        self.pool.append(*self.offsets_partition(state["group_id"]), [(key, raw)])

    def delete_group(self, group_id: str) -> int:
        """Tombstones for every committed offset and the metadata of a group without live
        members (else :class:`GroupNotEmptyError`). Returns the records written."""
        membership = self.membership(group_id)
        with membership.mutex:
            state = read_group_file(self.root, group_id)
            if state is not None and membership.live_members(state):
                raise GroupNotEmptyError(f"group {group_id!r} has live members")
            offsets = self.committed(group_id)
            records = [(GROUP_RECORDS.encode_key(OFFSET_COMMIT, {"group": group_id, "topic": t, "partition": p}),
                        None) for t, p in sorted(offsets)]
            if self.group_metadata(group_id) is not None:
                records.append((GROUP_RECORDS.encode_key(GROUP_METADATA, {"group": group_id}), None))
            if records:
                self.pool.append(*self.offsets_partition(group_id), records)
            return len(records)

    def delete_offsets(self, group_id: str, partitions) -> dict:
        """Kafka's OffsetDelete: tombstones for the group's committed offsets of
        ``partitions`` (``[(topic, partition)]``), except those of a topic the group's live
        members subscribe to. Returns ``{(topic, partition): None | error}``, the error a
        :class:`GroupSubscribedToTopicError` (nothing written for that partition); a
        partition without an offset is deleted already. One append."""
        membership = self.membership(group_id)
        with membership.mutex:
            state = read_group_file(self.root, group_id)
            live = membership.live_members(state) if state is not None else []
            subscribed = {t for m in live for t in state["members"][m]["topics"]}
            offsets = self.committed(group_id)
            results, records = {}, []
            for t, p in partitions:
                if t in subscribed:
                    results[(t, p)] = GroupSubscribedToTopicError(
                        f"group {group_id!r} has live members subscribed to {t!r}")
                    continue
                results[(t, p)] = None
                if (t, p) in offsets:
                    records.append((GROUP_RECORDS.encode_key(
                        OFFSET_COMMIT, {"group": group_id, "topic": t, "partition": p}), None))
            if records:
                self.pool.append(*self.offsets_partition(group_id), records)
            return results


def checked_offsets(offsets) -> list:
    """``offsets`` (``{(topic, partition): offset | OffsetAndMetadata}``) as sorted
    ``((topic, partition), offset, metadata, leader_epoch)`` (leader epoch -1 when not
    known), or :class:`InvalidArgumentError` naming the first bad entry. Touches no file,
    so a commit is checked before anything of it is written. O(n log n)."""
    if not isinstance(offsets, Mapping):
        raise InvalidArgumentError(f"offsets to commit must be a dict of {{TopicPartition: OffsetAndMetadata or "
                                   f"int}}, not {type(offsets).__name__}")
    out = []
    for tp, om in offsets.items():
        topic, partition = check_topic_partition(tp, "partition to commit")
        offset = getattr(om, "offset", om)
        metadata = getattr(om, "metadata", "") or ""
        leader_epoch = getattr(om, "leader_epoch", None)
        check_int(offset, f"offset to commit for {topic}-{partition}", (0, INT64_MAX))
        if not isinstance(metadata, str) or len(metadata.encode()) > MAX_STRING_BYTES:
            raise InvalidArgumentError(f"metadata to commit for {topic}-{partition} must be a str of at most "
                                       f"{MAX_STRING_BYTES} bytes, not {metadata!r:.80}")
        if leader_epoch is None or leader_epoch == -1:
            leader_epoch = -1
        else:
            check_int(leader_epoch, f"leader epoch to commit for {topic}-{partition}", (0, INT32_MAX))
        out.append(((topic, partition), offset, metadata, leader_epoch))
    return sorted(out, key=lambda item: item[0])


def consumer_assignment(partitions) -> bytes:
    """The consumer protocol's Assignment of ``partitions`` (``[(topic, partition)]``), as
    a member's SyncGroup answer and a GroupMetadata record carry it."""
    return _versioned(CONSUMER_PROTOCOL_ASSIGNMENT, ASSIGNMENT_VERSION,
                      {"assignedPartitions": _by_topic(partitions), "userData": None})


def consumer_subscription(topics) -> bytes:
    """The consumer protocol's version-0 Subscription of ``topics``."""
    return _versioned(CONSUMER_PROTOCOL_SUBSCRIPTION, 0, {"topics": list(topics), "userData": None})


def _string(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > MAX_STRING_BYTES:
        raise InvalidArgumentError(f"string of {len(raw)} bytes is too long for a coordinator record")
    return _INT16.pack(len(raw)) + raw


def _versioned(schema, version: int, data: dict) -> bytes:
    return version.to_bytes(2, "big") + encode(schema, version, data)


def _by_topic(tps) -> list:
    by: dict[str, list] = {}
    for t, p in sorted(tuple(tp) for tp in tps):
        by.setdefault(t, []).append(p)
    return [{"topic": t, "partitions": ps} for t, ps in by.items()]

