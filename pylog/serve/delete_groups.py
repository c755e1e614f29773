"""DeleteGroups and OffsetDelete: a group's committed offsets and metadata deleted as
Kafka's broker deletes them, with tombstones in ``__consumer_offsets`` written by pylog's
:class:`~pylog.coordinator.group_coordinator.GroupCoordinator` (``delete_group``,
``delete_offsets``: what ``pylog consumer-groups --delete`` and ``--delete-offsets`` do).

A group exists while it has committed offsets, a completed generation, or members; an
unknown group is ``GROUP_ID_NOT_FOUND`` (and the server keeps nothing for it), an empty
group id ``INVALID_GROUP_ID``. DeleteGroups refuses a group with live members
(``NON_EMPTY_GROUP``); OffsetDelete refuses the partitions of a topic a live member
subscribes to (``GROUP_SUBSCRIBED_TO_TOPIC``). Durability: the tombstones reach the
operating system before the answer. Cost: the group's offsets partition replayed from
where it last stopped, one small file read and at most one append per group, in the disk
thread pool.
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsResponse
from kafka.protocol.consumer import OffsetDeleteResponse

from pylog.coordinator.group_membership import read_group_file
from pylog.errors import PylogError
from pylog.serve.error_codes import GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NONE, error_code

_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Partition = _Topic.OffsetDeleteResponsePartition


def _group_error(coordinator, group_id: str) -> int:
    """``INVALID_GROUP_ID``, ``GROUP_ID_NOT_FOUND`` or ``NONE`` for ``group_id``. Reads
    the group's state file and offsets partition, opening nothing for an unknown group."""
    if not group_id:
        return INVALID_GROUP_ID
    state = read_group_file(coordinator.root, group_id)
    if (state is not None and state["members"]) or coordinator.committed(group_id) or (
            coordinator.group_metadata(group_id) is not None):
        return NONE
    return GROUP_ID_NOT_FOUND


def _delete_group(coordinator, group_id: str) -> int:
    error = _group_error(coordinator, group_id)
    if error == NONE:
        coordinator.delete_group(group_id)
    return error


async def handle_delete_groups(apis, request) -> DeleteGroupsResponse:
    """Delete each group named: tombstones for its offsets and metadata."""
    coordinator = await apis.group_coordinator()
    results = []
    for group_id in request.body.groups_names or ():
        try:
            error = await apis.run_blocking(_delete_group, coordinator, group_id)
        except PylogError as e:
            error = error_code(e)
        results.append(DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=error))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)


def _delete_offsets(coordinator, group_id: str, partitions: list) -> tuple[int, dict]:
    error = _group_error(coordinator, group_id)
    if error != NONE:
        return error, {}
    return NONE, coordinator.delete_offsets(group_id, partitions)


async def handle_offset_delete(apis, request) -> OffsetDeleteResponse:
    """Delete the group's committed offsets of the partitions named, but those of a topic
    a live member subscribes to."""
    body = request.body
    partitions = [(t.name, p.partition_index) for t in body.topics or () for p in t.partitions or ()]
    coordinator = await apis.group_coordinator()
    try:
        error, results = await apis.run_blocking(_delete_offsets, coordinator, body.group_id, partitions)
    except PylogError as e:
        error, results = error_code(e), {}
    if error != NONE:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    topics = [_Topic(name=t.name, partitions=[
        _Partition(partition_index=p.partition_index,
                   error_code=NONE if results[(t.name, p.partition_index)] is None
                   else error_code(results[(t.name, p.partition_index)]))
        for p in t.partitions or ()]) for t in body.topics or ()]
    return OffsetDeleteResponse(error_code=NONE, throttle_time_ms=0, topics=topics)
