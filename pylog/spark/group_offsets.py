"""A stream's consumer-group offsets: ``startingOffsets="group"`` reads a group's committed
offsets, ``commitOffsetsToGroup`` commits each micro-batch's end offsets (docs/spark.md,
"Streaming").

Both go through the log dir's ``__consumer_offsets`` as pylog's consumers and Kafka's group
coordinator use it: reads replay the group's partition (committed records only), commits
append OffsetCommit records through :class:`~pylog.coordinator.group_coordinator.GroupCoordinator`,
so ``pylog consumer-groups --describe --group G`` (and Kafka's tool on the same log dir)
shows the query's position and lag. A local log dir only: a log dir in object storage is
read-only here.
"""

from __future__ import annotations

import os

from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.offsets_reader import OFFSETS_TOPIC, replay_partition
from pylog.coordinator.partitioning import DEFAULT_PARTITIONS, partition_for_group
from pylog.errors import InvalidConfigError
from pylog.partition_dir import partition_dir_name
from pylog.remote.location import local_path, remote_target
from pylog.spark.options import GROUP


def _local_root(root: str, option: str) -> str:
    if remote_target(root) is not None:
        raise InvalidConfigError(f"option {option} needs a local log dir: consumer groups live in its "
                                 f"{OFFSETS_TOPIC} partitions")
    return local_path(root)


def require_local(opts) -> None:
    """:class:`InvalidConfigError` when the read options ``opts`` use a consumer group
    (``startingOffsets="group"``, ``commitOffsetsToGroup``) on a log dir in object storage:
    said when the stream is created, not at its first trigger."""
    if opts.starting == GROUP:
        _local_root(opts.root, 'startingOffsets="group"')
    if opts.commit_offsets_to_group:
        _local_root(opts.root, "commitOffsetsToGroup")


def committed(root: str, group_id: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` that ``group_id`` committed in the log dir ``root``
    ({} for a group that never committed). Cost: one replay of the group's
    ``__consumer_offsets`` partition, read only."""
    root = _local_root(root, 'startingOffsets="group"')
    path = os.path.join(root, partition_dir_name(OFFSETS_TOPIC, partition_for_group(group_id, DEFAULT_PARTITIONS)))
    if not os.path.isdir(path):
        return {}
    state = replay_partition(path)
    return {tp: om.offset for tp, om in state.offsets.get(group_id, {}).items()}


def commit(root: str, group_id: str, end: dict) -> None:
    """Commit a micro-batch's end offsets ``end`` (``{"topic": {"partition": offset}}``,
    the next offset of each partition) as ``group_id``'s committed offsets. A group with
    live members (consumers that joined it) refuses the commit
    (:class:`UnknownMemberIdError`), as Kafka's coordinator refuses a commit from outside
    the group. Cost: one append of a record per partition to the group's
    ``__consumer_offsets`` partition; durability: the operating system has it on return."""
    offsets = {(t, int(p)): off for t, parts in end.items() for p, off in parts.items()}
    if not offsets:
        return
    coordinator = GroupCoordinator.for_root(_local_root(root, "commitOffsetsToGroup"))
    try:
        coordinator.commit_offsets(group_id, offsets)
    finally:
        coordinator.release()
