"""A commit carries the leader epoch of the last record consumed, as Kafka's consumer's
commits do (its position is an offset and the epoch of the batch it came from); an offset
given without one commits none (-1), as Kafka's ``OffsetAndMetadata(offset)``."""

from __future__ import annotations

import os

from pylog import Log
from pylog.clients import Consumer, OffsetAndMetadata, TopicPartition
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.partition_dir import partition_dir_name
from tests.clients.conftest import make_topic

TP = TopicPartition("events", 0)


def write_epochs(root: str, epochs_values: list[tuple[int, list[bytes]]]) -> None:
    """Append each group of values as one batch written by the leader of its epoch."""
    make_topic(root, TP.topic, 1)
    with Log.open(os.path.join(root, partition_dir_name(*TP))) as log:
        for epoch, values in epochs_values:
            log.replica_view.leader_epoch = epoch
            log.append(values)


def committed_epoch(root: str, group_id: str) -> tuple[int, int | None]:
    """(offset, leader epoch) of the group's commit for TP, as the record holds them."""
    coordinator = GroupCoordinator.for_root(root)
    try:
        om = coordinator.committed(group_id)[TP]
        return om.offset, om.leader_epoch
    finally:
        coordinator.release()


def test_a_commit_of_the_positions_carries_the_epoch_of_the_last_record_consumed(root):
    write_epochs(root, [(2, [b"a", b"b"]), (5, [b"c", b"d"])])
    with Consumer(root, "g", auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([TP])
        assert [r.value for r in consumer.poll(timeout_ms=5000, max_records=1)[TP]] == [b"a"]
        consumer.commit()
        assert committed_epoch(root, "g") == (1, 2)
        got = []
        while len(got) < 3:
            got += [r.value for r in consumer.poll(timeout_ms=5000).get(TP, [])]
        assert got == [b"b", b"c", b"d"]
        consumer.commit()
        assert committed_epoch(root, "g") == (4, 5)


def test_a_commit_by_iteration_carries_the_epoch_of_the_record_yielded_last(root):
    write_epochs(root, [(1, [b"a"]), (3, [b"b"])])
    with Consumer(root, "g", auto_offset_reset="earliest", enable_auto_commit=False,
                  consumer_timeout_ms=5000) as consumer:
        consumer.assign([TP])
        assert next(consumer).value == b"a"
        consumer.commit()
        assert committed_epoch(root, "g") == (1, 1)


def test_given_offsets_commit_their_own_epoch_or_none(root):
    write_epochs(root, [(4, [b"a", b"b"])])
    with Consumer(root, "g", enable_auto_commit=False) as consumer:
        consumer.commit({TP: OffsetAndMetadata(1, "", 7)})
        assert committed_epoch(root, "g") == (1, 7)
        consumer.commit({TP: 2})
        assert committed_epoch(root, "g") == (2, None)
        consumer.commit({TP: OffsetAndMetadata(1, "m")})
        assert committed_epoch(root, "g") == (1, None)


def test_a_commit_after_poll_columns_carries_the_epoch_of_the_last_row(root):
    write_epochs(root, [(2, [b"a"]), (6, [b"b", b"c"])])
    with Consumer(root, "g", auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([TP])
        assert consumer.poll_columns(timeout_ms=5000, max_records=2)[TP].num_rows == 2
        consumer.commit()
        assert committed_epoch(root, "g") == (2, 6)


def test_a_position_taken_from_a_commit_keeps_its_epoch_until_a_record_is_consumed(root):
    write_epochs(root, [(3, [b"a", b"b"]), (8, [b"c"])])
    with Consumer(root, "g", enable_auto_commit=False) as consumer:
        consumer.commit({TP: OffsetAndMetadata(2, "", 3)})
    with Consumer(root, "g", enable_auto_commit=False) as consumer:
        consumer.assign([TP])
        assert consumer.position(TP) == 2
        consumer.commit()
        assert committed_epoch(root, "g") == (2, 3)
        consumer.seek(TP, 1)  # a seek knows no epoch, as Kafka's seek(offset)
        consumer.commit()
        assert committed_epoch(root, "g") == (1, None)
