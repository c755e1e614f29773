"""``Fetcher``: reads a subscription state's partitions from real partition directories,
moves the positions, keeps what ``max_records`` left for the next fetch, applies the
isolation level and ``auto_offset_reset``, with no Consumer around it."""

from __future__ import annotations

import shutil

import pytest

from pylog import LogManager
from pylog.clients.fetcher import Fetcher
from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.logdir.wakeup import DirWatch
from pylog.closing import close_all
from pylog.errors import CorruptRecordError, OffsetOutOfRangeError, RecordDeserializationError

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def fetching(root):
    """``make(**settings) -> (fetcher, subscriptions)`` over ``root``, closed at the end."""
    made = []

    def make(isolation="uncommitted", auto_offset_reset="earliest", **settings):
        watch = DirWatch()
        subscriptions = SubscriptionState()
        fetcher = Fetcher(root, subscriptions, watch, isolation=isolation, fetch_max_bytes=1 << 20,
                          auto_offset_reset=auto_offset_reset, **settings)
        made.append((fetcher, watch))
        return fetcher, subscriptions
    yield make
    for fetcher, watch in made:
        close_all(fetcher.close_steps() + [watch.close])


def values(records) -> list:
    return [r.value for r in records]


def test_records_past_max_records_are_kept_for_the_next_fetch_and_positions_move(root, fetching):
    with LogManager(root) as m:
        m.create_topic("t", 2).append([b"a", b"b", b"c"], partition=0)
    fetcher, subscriptions = fetching()
    subscriptions.assign_from_user([T0, T1])
    fetcher.offsets.reset_positions()
    assert subscriptions.all_consumed() == {T0: (0, -1), T1: (0, -1)}
    assert {tp: values(rs) for tp, rs in fetcher.fetched_records(2).items()} == {T0: [b"a", b"b"]}
    assert subscriptions.position(T0) == 2
    with LogManager(root) as m:
        m.log("t", 0).append([b"d"])  # not read: the kept record comes first
    assert {tp: values(rs) for tp, rs in fetcher.fetched_records(10).items()} == {T0: [b"c"]}
    assert {tp: values(rs) for tp, rs in fetcher.fetched_records(10).items()} == {T0: [b"d"]}
    assert fetcher.fetched_records(10) == {}


def test_kept_records_are_dropped_once_the_position_moved_elsewhere(root, fetching):
    with LogManager(root) as m:
        m.create_topic("t", 1).append([b"a", b"b", b"c"])
    fetcher, subscriptions = fetching()
    subscriptions.assign_from_user([T0])
    fetcher.offsets.reset_positions()
    fetcher.fetched_records(1)  # keeps b, c
    subscriptions.seek(T0, 0)  # a rebalance or a seek that did not tell the fetcher
    assert values(fetcher.fetched_records(10)[T0]) == [b"a", b"b", b"c"]


def test_read_committed_stops_at_an_open_transaction_and_read_uncommitted_does_not(root, fetching):
    with LogManager(root) as m:
        log = m.create_topic("t", 1).log(0)
        log.append([b"before"])
        log.append([b"open"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    committed, committed_subscriptions = fetching(isolation="committed")
    uncommitted, uncommitted_subscriptions = fetching(isolation="uncommitted")
    for fetcher, subscriptions in ((committed, committed_subscriptions), (uncommitted, uncommitted_subscriptions)):
        subscriptions.assign_from_user([T0])
        fetcher.offsets.reset_positions()
    assert values(committed.fetched_records(10)[T0]) == [b"before"]
    assert committed.fetched_records(10) == {}
    assert values(uncommitted.fetched_records(10)[T0]) == [b"before", b"open"]
    assert committed.offsets.end_offsets([T0]) == {T0: 1} and uncommitted.offsets.end_offsets([T0]) == {T0: 2}


def test_a_position_out_of_range_is_reset_as_auto_offset_reset_says(root, fetching):
    with LogManager(root) as m:
        m.create_topic("t", 1).append([b"a", b"b"])
    latest, latest_subscriptions = fetching(auto_offset_reset="latest")
    latest_subscriptions.assign_from_user([T0])
    latest_subscriptions.seek(T0, 50)
    assert latest.fetched_records(10) == {}
    assert latest_subscriptions.position(T0) == 2
    strict, strict_subscriptions = fetching(auto_offset_reset="none")
    strict_subscriptions.assign_from_user([T0])
    with pytest.raises(OffsetOutOfRangeError, match="t-0 has no committed offset"):
        strict.offsets.reset_positions()


def test_a_deleted_partition_is_marked_and_no_longer_fetched(root, fetching):
    with LogManager(root) as m:
        m.create_topic("t", 2).append([b"a"], partition=1)
    fetcher, subscriptions = fetching()
    subscriptions.assign_from_user([T0, T1])
    fetcher.offsets.reset_positions()
    shutil.rmtree(f"{root}/t-0")
    assert values(fetcher.fetched_records(10)[T1]) == [b"a"]
    assert subscriptions.deleted() == [T0]
    assert subscriptions.fetchable() == [T1]


def test_a_value_that_fails_to_deserialize_stops_its_partition_there(root, fetching):
    with LogManager(root) as m:
        m.create_topic("t", 1).append([b"1", b"x", b"3"])
    fetcher, subscriptions = fetching(value_deserializer=int)
    subscriptions.assign_from_user([T0])
    fetcher.offsets.reset_positions()
    assert values(fetcher.fetched_records(10)[T0]) == [1]
    assert subscriptions.position(T0) == 1
    with pytest.raises(RecordDeserializationError, match="offset 1 failed"):
        fetcher.fetched_records(10)


def test_a_fetch_decodes_only_the_batches_its_max_records_reaches(root, fetching):
    with LogManager(root) as m:
        log = m.create_topic("t", 1).log(0)
        for b in range(5):
            log.append([b"%d-%d" % (b, i) for i in range(4)])
        third = log.read(8, 1).position
        path = log.segments[0].log_path
    with open(path, "r+b") as f:  # a byte of the third batch's records: its CRC fails once checked
        f.seek(third + 70)
        byte = f.read(1)
        f.seek(third + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    fetcher, subscriptions = fetching()
    subscriptions.assign_from_user([T0])
    fetcher.offsets.reset_positions()
    assert values(fetcher.fetched_records(6)[T0]) == [b"0-0", b"0-1", b"0-2", b"0-3", b"1-0", b"1-1"]
    assert values(fetcher.fetched_records(2)[T0]) == [b"1-2", b"1-3"]  # kept from the read
    assert subscriptions.position(T0) == 8
    with pytest.raises(CorruptRecordError):
        fetcher.fetched_records(10)
    assert subscriptions.position(T0) == 8
    with pytest.raises(CorruptRecordError):  # read again, and failing again
        fetcher.fetched_records(10)


def test_records_are_decoded_as_consumer_records_of_their_batch_leader_epoch(root, fetching):
    from pylog.clients.consumer_record import ConsumerRecord
    with LogManager(root) as m:
        log = m.create_topic("t", 1).log(0)
        for epoch, batch in ((2, [b"a", b"b"]), (5, [b"c"])):
            log.replica_view.leader_epoch = epoch
            log.append(batch)
    fetcher, subscriptions = fetching()
    subscriptions.assign_from_user([T0])
    fetcher.offsets.reset_positions()
    records = fetcher.fetched_records(10)[T0]
    assert all(isinstance(r, ConsumerRecord) for r in records)
    assert [(r.value, r.leader_epoch, r.serialized_value_size, r.topic, r.partition) for r in records] == \
        [(b"a", 2, 1, "t", 0), (b"b", 2, 1, "t", 0), (b"c", 5, 1, "t", 0)]
    assert subscriptions.all_consumed() == {T0: (3, 5)}
