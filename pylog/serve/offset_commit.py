"""OffsetCommit and OffsetFetch: a group's committed offsets, as Kafka's broker keeps them,
in ``__consumer_offsets`` through pylog's
:class:`~pylog.coordinator.group_coordinator.GroupCoordinator` (the same records pylog's
own ``Consumer`` commits, and ``pylog consumer-groups`` shows).

A commit is checked against the group's membership and generation (a member of an older
generation gets ``ILLEGAL_GENERATION``, one the group removed ``UNKNOWN_MEMBER_ID``; a
commit without a generation is allowed only to a group without members; metadata longer
than a coordinator record's string is ``OFFSET_METADATA_TOO_LARGE``, an empty group id
or one longer than such a string ``INVALID_GROUP_ID``) and is appended as one batch, so
every partition of a request gets the same answer. Durability: the batch reaches the
operating system before the answer, the disk at the partition's flush policy. Cost: one append, and a fetch replays the group's offsets partition from where it
last stopped; both in the disk thread pool.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetCommitResponse, OffsetFetchResponse

from pylog.clients.consumer_coordinator import OffsetAndMetadata
from pylog.errors import PylogError
from pylog.coordinator.group_coordinator import MAX_STRING_BYTES
from pylog.serve.consumer_groups import fits_a_record
from pylog.serve.error_codes import INVALID_GROUP_ID, NONE, OFFSET_METADATA_TOO_LARGE, error_code

_CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_CommitPartition = _CommitTopic.OffsetCommitResponsePartition
_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_GroupTopic = _Group.OffsetFetchResponseTopics
_GroupPartition = _GroupTopic.OffsetFetchResponsePartitions
_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Partition = _Topic.OffsetFetchResponsePartition
#: the first OffsetFetch version that asks for several groups at once
_BATCHED_VERSION = 8


async def handle_offset_commit(apis, request) -> OffsetCommitResponse:
    """Append the offsets as one batch if the member and generation are current."""
    body = request.body
    offsets = {(t.name, p.partition_index): OffsetAndMetadata(
        p.committed_offset, p.committed_metadata or "",
        p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None)
        for t in body.topics or () for p in t.partitions or ()}
    coordinator = await apis.group_coordinator()
    if not body.group_id or not fits_a_record(body.group_id):
        error = INVALID_GROUP_ID
    elif any(len(om.metadata.encode()) > MAX_STRING_BYTES for om in offsets.values()):
        error = OFFSET_METADATA_TOO_LARGE
    else:
        try:
            await apis.run_blocking(lambda: coordinator.commit_offsets(
                body.group_id, offsets, generation=body.generation_id_or_member_epoch, member_id=body.member_id))
            error = NONE
        except PylogError as e:
            error = error_code(e)
    if error == NONE:
        apis.groups.notify(body.group_id)
    topics = [_CommitTopic(name=t.name, partitions=[_CommitPartition(partition_index=p.partition_index,
                                                                      error_code=error) for p in t.partitions or ()])
              for t in body.topics or ()]
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)


async def handle_offset_fetch(apis, request) -> OffsetFetchResponse:
    """The committed offsets of the partitions asked for (all the group's when the topics
    are null); -1 for a partition without one."""
    body = request.body
    coordinator = await apis.group_coordinator()
    if request.api_version < _BATCHED_VERSION:
        error, found = await _committed(apis, coordinator, body.group_id, body.topics)
        topics = [_Topic(name=t, partitions=[_Partition(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                                                        metadata=m, error_code=NONE) for p, o, e, m in parts])
                  for t, parts in found]
        return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=error)
    groups = []
    for group in body.groups or ():
        error, found = await _committed(apis, coordinator, group.group_id, group.topics)
        topics = [_GroupTopic(name=t, partitions=[_GroupPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=NONE)
            for p, o, e, m in parts]) for t, parts in found]
        groups.append(_Group(group_id=group.group_id, topics=topics, error_code=error))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


async def _committed(apis, coordinator, group_id: str, topics) -> tuple[int, list]:
    """The group's error code and ``[(topic, [(partition, offset, leader epoch, metadata)])]``."""
    if not group_id:
        return INVALID_GROUP_ID, []
    try:
        committed = await apis.run_blocking(coordinator.committed, group_id)
    except PylogError as e:
        return error_code(e), []
    if topics is None:
        wanted: dict[str, list] = {}
        for t, p in sorted(committed):
            wanted.setdefault(t, []).append(p)
    else:
        wanted = {t.name: list(t.partition_indexes or ()) for t in topics}
    found = []
    for topic, partitions in wanted.items():
        parts = []
        for p in partitions:
            om = committed.get((topic, p))
            if om is None:
                parts.append((p, -1, -1, ""))
            else:
                parts.append((p, om.offset, om.leader_epoch if om.leader_epoch is not None else -1, om.metadata))
        found.append((topic, parts))
    return NONE, found
