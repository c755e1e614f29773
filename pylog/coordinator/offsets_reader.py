"""The committed offsets and group metadata stored in a log dir's ``__consumer_offsets``
partitions, replayed as the group coordinator reloads them.

Each partition is read in offset order with ``isolation="committed"`` (records of aborted
transactions and of transactions still open are left out); the latest record of a key wins
and a tombstone deletes the key's state. Reading never modifies the directories.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from pylog.coordinator.offsets_records import GROUP_METADATA, GROUP_RECORDS, GroupMetadata, OffsetAndMetadata
from pylog.coordinator.records import UnknownRecordTypeError
from pylog.errors import InvalidRecordError, LogDirNotFoundError, MissingKeyError
from pylog.layout import CONSUMER_OFFSETS_TOPIC
from pylog.log import Log

OFFSETS_TOPIC = CONSUMER_OFFSETS_TOPIC
_OFFSETS_PARTITION = re.compile(re.escape(OFFSETS_TOPIC) + r"-(\d+)")
_OFFSET_COMMIT_TYPES = (0, 1)


@dataclass
class GroupState:
    """``offsets``: ``{group: {(topic, partition): OffsetAndMetadata}}``;
    ``groups``: ``{group: GroupMetadata}`` for classic groups."""
    offsets: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)

    def apply(self, key: bytes | None, value: bytes | None, *, offset: int, path: str) -> None:
        """Replay one record. Record types other than offset commits and classic group
        metadata are skipped; a record that breaks its schema raises
        :class:`InvalidRecordError`, one without a key :class:`MissingKeyError`, both
        naming the partition and offset."""
        if key is None:
            raise MissingKeyError(f"record at offset {offset} of {path} has no key")
        try:
            rec = GROUP_RECORDS.decode(key, value)
        except UnknownRecordTypeError:
            return
        except InvalidRecordError as e:
            raise InvalidRecordError(f"record at offset {offset}: {e.reason}", path=path) from None
        if rec.type_id in _OFFSET_COMMIT_TYPES:
            group = self.offsets.setdefault(rec.key["group"], {})
            tp = (rec.key["topic"], rec.key["partition"])
            if rec.value is None:
                group.pop(tp, None)
                if not group:
                    del self.offsets[rec.key["group"]]
            else:
                group[tp] = OffsetAndMetadata.from_value(rec.value)
        elif rec.type_id == GROUP_METADATA:
            group_id = rec.key["group"]
            if rec.value is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = GroupMetadata.from_value(group_id, rec.value)


def replay_partition(path, state: GroupState | None = None, *, end_offset: int | None = None,
                     fetch_bytes: int = 1 << 20) -> GroupState:
    """Replay one ``__consumer_offsets`` partition directory (opened read-only) into
    ``state`` (a new one by default) and return it; with ``end_offset``, only the records
    below it (the state as it was then). Cost: one pass over the partition, ``fetch_bytes``
    at a time."""
    state = GroupState() if state is None else state
    with Log.open(path, read_only=True) as log:
        offset, end = log.log_start_offset, log.last_stable_offset
        if end_offset is not None:
            end = min(end, end_offset)
        while offset < end:
            fetch = log.read(offset, fetch_bytes, isolation="committed", max_offset=end)
            if fetch.next_offset <= offset:
                break
            for record in fetch.records():
                state.apply(record.key, record.value, offset=record.offset, path=str(path))
            offset = fetch.next_offset
    return state


def offsets_partitions(log_dir) -> list[str]:
    """The ``__consumer_offsets-<n>`` directories of ``log_dir``, by partition number.
    Raises :class:`LogDirNotFoundError` when ``log_dir`` is not a directory."""
    if not os.path.isdir(log_dir):
        raise LogDirNotFoundError(f"log dir {log_dir} does not exist or is not a directory")
    found = []
    for name in os.listdir(log_dir):
        m = _OFFSETS_PARTITION.fullmatch(name)
        if m and os.path.isdir(os.path.join(log_dir, name)):
            found.append((int(m[1]), os.path.join(log_dir, name)))
    return [p for _, p in sorted(found)]


def read_group_state(log_dir) -> GroupState:
    """Every group's committed offsets and metadata in ``log_dir`` (a group lives in one
    partition, so partitions do not overlap). Cost: one pass over each partition."""
    state = GroupState()
    for path in offsets_partitions(log_dir):
        replay_partition(path, state)
    return state


def committed_offsets(log_dir) -> dict:
    """``{group: {(topic, partition): OffsetAndMetadata}}`` for every group in ``log_dir``.
    Cost: one pass over each ``__consumer_offsets`` partition; nothing is written.

    >>> committed_offsets("/var/lib/kafka/data")["GroupA"][("foo", 0)].offset  # doctest: +SKIP
    204
    """
    return read_group_state(log_dir).offsets
