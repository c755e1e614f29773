"""Consumer: positions, seeks, resets, pause/resume, isolation, time lookups, waking on
appends, and reading at the tail of a segment a writer is appending to."""

from __future__ import annotations

import os
import select
import threading
import time

import pytest

from pylog import Log, LogManager
from pylog.clients import Consumer, Producer, TopicPartition
from pylog.errors import (
    ClientStateError, IllegalGenerationError, InvalidArgumentError, OffsetOutOfRangeError, UnknownMemberIdError,
)
from tests.clients.conftest import make_topic
from tests.waiting import poll_until

TP = TopicPartition("t", 0)


def values(got, tp=TP):
    return [r.value for r in got.get(tp, [])]


def test_positions_seeks_pause_and_resume(root):
    make_topic(root, "t", 1, [(0, [b"%d" % i for i in range(10)])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        assert c.position(TP) == 0
        assert values(c.poll(1000, max_records=3)) == [b"0", b"1", b"2"] and c.position(TP) == 3
        c.seek(TP, 8)
        assert values(c.poll(1000)) == [b"8", b"9"]
        c.seek_to_beginning(TP)
        c.pause(TP)
        assert c.poll(50) == {} and c.paused() == {TP}
        c.resume(TP)
        assert values(c.poll(1000, max_records=1)) == [b"0"]
        c.seek_to_end()
        assert c.position(TP) == 10 and c.poll(0) == {}
        with pytest.raises(InvalidArgumentError):
            c.seek(TopicPartition("t", 5), 0)


def test_auto_offset_reset_latest_earliest_and_none(root):
    make_topic(root, "t", 1, [(0, [b"a", b"b"])])
    for reset, expected in (("earliest", 0), ("latest", 2)):
        with Consumer(root, auto_offset_reset=reset) as c:
            c.assign([TP])
            assert c.position(TP) == expected
    with Consumer(root, "g", auto_offset_reset="none") as c:
        c.assign([TP])
        with pytest.raises(OffsetOutOfRangeError):
            c.poll(0)


def test_a_position_retention_passed_is_reset_as_kafka_does(root):
    make_topic(root, "t", 1, [(0, [b"%d" % i for i in range(10)])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        c.poll(1000, max_records=2)
        c.seek(TP, 2)  # records already fetched would still be returned, as Kafka's fetcher does
        with LogManager(root) as m:
            m.log("t", 0).delete_records(6)
        assert values(c.poll(1000)) == [b"6", b"7", b"8", b"9"]
    with Consumer(root, auto_offset_reset="none") as c:
        c.assign([TP])
        c.seek(TP, 1)
        with pytest.raises(OffsetOutOfRangeError):
            c.poll(0)


def test_read_committed_skips_aborted_and_waits_for_open_transactions(root):
    make_topic(root, "t", 1)
    with Producer(root, transactional_id="x") as p:
        p.begin_transaction()
        p.send("t", b"aborted", partition=0)
        p.abort_transaction()
        p.begin_transaction()
        p.send("t", b"open", partition=0).get(5)
        committed = Consumer(root, auto_offset_reset="earliest", isolation_level="read_committed")
        uncommitted = Consumer(root, auto_offset_reset="earliest")
        for c in (committed, uncommitted):
            c.assign([TP])
        assert committed.poll(50) == {}
        assert values(uncommitted.poll(1000)) == [b"aborted", b"open"]
        p.commit_transaction()
        assert values(committed.poll(1000)) == [b"open"]
        committed.close()
        uncommitted.close()


def test_offsets_for_times_and_end_offsets(root):
    make_topic(root, "t", 1)
    with Producer(root) as p:
        for ts in (1000, 2000, 3000):
            p.send("t", b"v", partition=0, timestamp_ms=ts)
    with Consumer(root) as c:
        assert c.offsets_for_times({TP: 1500}) == {TP: (1, 2000)}
        assert c.offsets_for_times({TP: 9999}) == {TP: None}
        assert c.end_offsets([TP]) == {TP: 3} and c.beginning_offsets([TP]) == {TP: 0}


def test_poll_returns_as_soon_as_another_process_appends(root):
    make_topic(root, "t", 1)
    with Consumer(root, auto_offset_reset="latest") as c:
        c.assign([TP])
        c.position(TP)
        polling = threading.Event()

        def produce():
            polling.wait(30)  # the consumer is about to wait (the check holds either way)
            with Producer(root) as p:
                p.send("t", b"late", partition=0).get(5)
        threading.Thread(target=produce).start()
        start = time.monotonic()
        polling.set()
        got = c.poll(timeout_ms=20_000)
        assert values(got) == [b"late"] and time.monotonic() - start < 10


def test_a_poll_that_finds_records_leaves_the_wake_up_events_and_one_that_finds_none_drains_them(root):
    """A poll looks for records before it reads the inotify events: one that returns
    records makes no system call for them. One that finds nothing waits on them: the
    events of appends already read end its wait at once, are read away, and it looks
    again before waiting for new ones."""
    make_topic(root, "t", 1, [(0, [b"a"])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        assert values(c.poll(1000)) == [b"a"]
        with LogManager(root) as m:
            m.log("t", 0).append([b"b"])
        events = c._watch._fd
        assert select.select([events], [], [], 5)[0]  # the append's events are there
        assert values(c.poll(1000)) == [b"b"]
        assert select.select([events], [], [], 0)[0]  # still there: not read by a poll that had records
        assert c.poll(300) == {}
        assert not select.select([events], [], [], 0)[0]


def test_iteration_stops_after_consumer_timeout(root):
    make_topic(root, "t", 1, [(0, [b"a", b"b"])])
    with Consumer(root, auto_offset_reset="earliest", consumer_timeout_ms=100) as c:
        c.assign([TP])
        assert [r.value for r in c] == [b"a", b"b"]


def test_columnar_poll_returns_the_same_records(root):
    make_topic(root, "t", 1, [(0, [(b"k%d" % i, b"v%d" % i) for i in range(50)])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        cols = c.poll_columns(1000)[TP]
        assert cols.offsets.tolist() == list(range(50)) and cols.values() == [b"v%d" % i for i in range(50)]


def test_columns_of_an_earlier_poll_stay_whole_after_later_polls(root):
    make_topic(root, "t", 1, [(0, [(b"k%d" % i, b"v%04d" % i) for i in range(300)])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        polls = [c.poll_columns(1000, max_records=100)[TP] for _ in range(3)]
        assert [p.values() for p in polls] == [[b"v%04d" % i for i in range(k, k + 100)] for k in (0, 100, 200)]
        assert [p.keys()[0] for p in polls] == [b"k0", b"k100", b"k200"]


def test_a_reader_at_the_tail_reads_a_new_batch_without_walking_from_the_index(root):
    """A follower that loaded the index long ago reads each new batch at its position:
    it walks one batch header, not every batch since the last index entry it knows."""
    path = os.path.join(root, "t-0")
    with Log.open(path, index_interval_bytes=1 << 30) as writer, Log.open(path, read_only=True) as reader:
        writer.append([b"first"])
        walked = []
        segment = None
        for i in range(300):
            info = writer.append([b"%d" % i])
            reader.refresh()
            segment = reader.active_segment
            original = segment.log.headers

            def counting(start, end=None, _original=original):
                for h in _original(start, end):
                    walked.append(h)
                    yield h
            segment.log.headers = counting
            try:
                assert [r.value for r in reader.read(info.first_offset).records()] == [b"%d" % i]
            finally:
                del segment.log.headers
        assert len(walked) <= 2 * 300


def test_polled_records_know_their_partition_and_survive_pickling(root):
    import pickle
    make_topic(root, "t", 2, [(1, [(b"k", b"v")])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("t", 1)])
        (record,) = c.poll(1000)[TopicPartition("t", 1)]
    copy = pickle.loads(pickle.dumps(record))
    for r in (record, copy):
        assert (r.topic, r.partition, r.offset, r.key, r.value) == ("t", 1, 0, b"k", b"v")


def test_a_group_commit_covers_every_assigned_partition_after_the_first_poll(root):
    """Kafka gives every assigned partition a position before it fetches, so a consumer
    that closes after one small poll commits all of them. pylog positioned only those a
    poll reached before ``max_records``: the others had no commit, and the group's next
    consumer, starting at the latest offset, skipped what they held."""
    make_topic(root, "t", 6, [(p, [b"old-%d" % p]) for p in range(6)])
    with Consumer(root, "g", auto_offset_reset="earliest") as first:
        first.subscribe(["t"])
        polled, deadline = {}, time.monotonic() + 30
        while not polled and time.monotonic() < deadline:  # the first polls may only join the group
            polled = first.poll(100, max_records=1)
        [[seen]] = polled.values()
    with Consumer(root, "g") as look:
        committed = {p: look.committed(TopicPartition("t", p)) for p in range(6)}
    assert committed == {p: int(p == seen.partition) for p in range(6)}
    with LogManager(root) as m:
        for p in range(6):
            m.topic("t").append([b"new-%d" % p], partition=p)
    with Consumer(root, "g", auto_offset_reset="latest") as second:
        second.subscribe(["t"])
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 11 and time.monotonic() < deadline:
            got += [r.value for records in second.poll(100).values() for r in records]
    assert sorted(got) == sorted([b"new-%d" % p for p in range(6)] +
                                 [b"old-%d" % p for p in range(6) if p != seen.partition])


def test_topics_and_partitions_for_topic_as_kafka_python_names_them(root):
    make_topic(root, "t", 3)
    with Consumer(root) as c:
        assert c.topics() == {"t"} and c.partitions_for_topic("t") == {0, 1, 2}
        assert c.partitions_for_topic("nope") is None
    make_topic(root, "__consumer_offsets", 1)
    with Consumer(root, exclude_internal_topics=False) as c:
        assert c.topics() == {"t", "__consumer_offsets"}
    with Consumer(root) as c:
        assert c.topics() == {"t"}


def test_serializers_and_deserializers_turn_objects_into_bytes_and_back(root):
    import json
    make_topic(root, "t", 1)
    with Producer(root, key_serializer=str.encode, value_serializer=lambda v: json.dumps(v).encode()) as p:
        p.send("t", {"n": 1}, key="a")
        p.send("t", None, key="a")  # a tombstone stays None
        p.send_batch("t", [{"n": 2}, [3]], keys=["b", None])
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        assert [(r.key, r.value) for r in log.records()] == [
            (b"a", b'{"n": 1}'), (b"a", None), (b"b", b'{"n": 2}'), (None, b"[3]")]
    with Consumer(root, auto_offset_reset="earliest", key_deserializer=bytes.decode,
                  value_deserializer=json.loads) as c:
        c.assign([TP])
        assert [(r.key, r.value) for r in c.poll(1000)[TP]] == [("a", {"n": 1}), ("a", None), ("b", {"n": 2}),
                                                                (None, [3])]


def test_a_value_the_deserializer_refuses_stops_its_partition_until_seek_passes_it(root):
    from pylog.errors import RecordDeserializationError
    make_topic(root, "t", 1, [(0, [b"1", b"2", b"oops", b"4"])])
    with Consumer(root, auto_offset_reset="earliest", value_deserializer=int) as c:
        c.assign([TP])
        assert values(c.poll(1000)) == [1, 2]  # the records before it first
        for _ in range(2):  # then the same error at every poll, the position kept at it
            with pytest.raises(RecordDeserializationError) as raised:
                c.poll(1000)
            assert (raised.value.partition, raised.value.offset) == (0, 2) and c.position(TP) == 2
            assert isinstance(raised.value.__cause__, ValueError)
        c.seek(TP, raised.value.offset + 1)
        assert values(c.poll(1000)) == [4]


def test_a_serializer_that_fails_sends_nothing_of_that_call(root):
    from pylog.errors import SerializationError
    make_topic(root, "t", 1)
    with Producer(root, value_serializer=lambda v: v.encode()) as p:
        with pytest.raises(SerializationError, match="value_serializer"):
            p.send("t", 5)
        with pytest.raises(SerializationError):
            p.send_batch("t", ["a", 5])
        p.send("t", "ok")
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        assert [r.value for r in log.records()] == [b"ok"]


def test_iterating_moves_the_position_one_yielded_record_at_a_time(root):
    """A loop that stops early, closes (auto-commit) and is started again goes on at the
    next record: the records fetched but not yielded are neither committed nor lost."""
    make_topic(root, "t", 1, [(0, [b"%d" % i for i in range(10)])])
    with Consumer(root, "g", auto_offset_reset="earliest") as c:
        c.subscribe(["t"])
        for record in c:
            if record.offset == 2:
                assert c.position(TP) == 3
                break
    with Consumer(root, "g", auto_offset_reset="earliest", consumer_timeout_ms=500) as c:
        c.subscribe(["t"])
        assert [r.offset for r in c] == list(range(3, 10))


def test_a_seek_or_pause_while_iterating_drops_what_was_fetched_for_the_partition(root):
    make_topic(root, "t", 1, [(0, [b"%d" % i for i in range(10)])])
    with Consumer(root, auto_offset_reset="earliest", consumer_timeout_ms=100) as c:
        c.assign([TP])
        it = iter(c)
        assert next(it).offset == 0
        c.seek(TP, 5)
        assert next(it).offset == 5
        c.pause(TP)
        assert list(it) == [] and c.position(TP) == 6
        c.resume(TP)
        assert [r.offset for r in c] == [6, 7, 8, 9]


def test_a_seek_of_one_partition_while_iterating_keeps_what_was_fetched_of_the_others(root):
    make_topic(root, "t", 2, [(p, [b"%d-%d" % (p, i) for i in range(5)]) for p in range(2)])
    one = TopicPartition("t", 1)
    with Consumer(root, auto_offset_reset="earliest", consumer_timeout_ms=100) as c:
        c.assign([TP, one])
        it = iter(c)
        first = next(it)
        c.seek(TopicPartition(first.topic, first.partition), 3)  # its records fetched are dropped
        rest = [(r.partition, r.offset) for r in it]
        other = 1 - first.partition
        assert [o for p, o in rest if p == first.partition] == [3, 4]
        assert [o for p, o in rest if p == other] == [0, 1, 2, 3, 4]
        assert c.position(TP) == c.position(one) == 5


def test_a_poll_after_a_partial_iteration_returns_the_records_not_yet_yielded(root):
    make_topic(root, "t", 1, [(0, [b"%d" % i for i in range(10)])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        assert next(iter(c)).offset == 0
        assert [r.offset for r in c.poll(1000)[TP]] == list(range(1, 10))


def test_columnar_and_record_polls_share_positions_and_max_records_caps_the_total(root):
    make_topic(root, "t", 3, [(p, [b"%d" % i for i in range(20)]) for p in range(3)])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        assert [r.offset for r in c.poll(1000, max_records=2)[TP]] == [0, 1]
        assert c.poll_columns(1000)[TP].offsets.tolist() == list(range(2, 20))
        assert c.poll(50) == {}
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("t", p) for p in range(3)])
        got = c.poll_columns(1000, max_records=5)
        assert sum(cols.num_rows for cols in got.values()) == 5


def test_close_commits_the_positions_of_assigned_partitions(root):
    make_topic(root, "t", 1, [(0, [b"%d" % i for i in range(10)])])
    with Consumer(root, "g", auto_offset_reset="earliest") as c:
        c.assign([TP])
        assert len(c.poll(1000)[TP]) == 10
    with Consumer(root, "g") as c:
        c.assign([TP])
        assert c.committed(TP) == 10 and c.position(TP) == 10


def test_close_while_the_group_rebalances_commits_for_the_current_generation(root):
    """A second member joining puts the group in PreparingRebalance; the first member's
    close still commits what it read (Kafka takes commits of the current generation then),
    so the second does not read it again."""
    make_topic(root, "t", 1, [(0, [b"%d" % i for i in range(10)])])
    first = Consumer(root, "g", auto_offset_reset="earliest")
    first.subscribe(["t"])
    deadline = time.monotonic() + 20
    while sum(len(v) for v in first.poll(100).values()) == 0 and time.monotonic() < deadline:
        pass
    assert first.position(TP) == 10
    with Consumer(root, "g", auto_offset_reset="earliest", consumer_timeout_ms=1000) as second:
        second.subscribe(["t"])
        second.poll(0)  # joins: the group now waits for the first member to rejoin
        first.close()
        assert second.committed(TP) == 10
        assert [r.offset for r in second] == []


def test_a_closed_consumer_refuses_every_call(root):
    make_topic(root, "t", 1)
    c = Consumer(root, "g")
    c.assign([TP])
    c.close()
    for call in (lambda: c.assign([TP]), c.assignment, lambda: c.position(TP), lambda: c.seek(TP, 0),
                 lambda: c.subscribe(["t"]), lambda: c.commit(), lambda: c.committed(TP), c.poll,
                 lambda: c.end_offsets([TP])):
        with pytest.raises(ClientStateError):
            call()


@pytest.mark.parametrize("call", [
    lambda c: c.assign(["t"]), lambda c: c.assign([("t", "0")]), lambda c: c.poll("100"),
    lambda c: c.poll(-5), lambda c: c.poll(0, max_records=0), lambda c: c.commit({("t", "zero"): 1}),
    lambda c: c.offsets_for_times({TP: -1}), lambda c: c.end_offsets([("t",)]),
], ids=["topic-alone", "str-partition", "str-timeout", "negative-timeout", "no-records", "commit-str-partition",
        "negative-time", "one-tuple"])
def test_bad_arguments_raise_invalid_argument_error(root, call):
    make_topic(root, "t", 1)
    with Consumer(root, "g") as c:
        with pytest.raises(InvalidArgumentError):
            call(c)


@pytest.mark.parametrize("kwargs", [dict(group_id=5), dict(group_id=""), dict(max_poll_records=0)])
def test_bad_settings_raise_invalid_argument_error(root, kwargs):
    with pytest.raises(InvalidArgumentError):
        Consumer(root, **kwargs)


def test_commit_async_reports_the_outcome_to_its_callback(root):
    make_topic(root, "t", 1, [(0, [b"a", b"b"])])
    outcomes = []
    with Consumer(root, "g", auto_offset_reset="earliest") as c:
        c.assign([TP])
        c.poll(1000)
        c.commit_async(callback=lambda offsets, error: outcomes.append((offsets, error)))
        assert outcomes == [({TP: 2}, None)] and c.committed(TP) == 2


def test_commit_async_of_a_member_the_group_dropped_gives_the_error_to_the_callback(root):
    make_topic(root, "t", 1, [(0, [b"a", b"b"])])
    opts = dict(auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=20,
                max_poll_interval_ms=300)
    outcomes = []
    with Consumer(root, "g", **opts) as zombie, Consumer(root, "g", **opts) as survivor:
        zombie.subscribe(["t"])
        zombie.poll(1000)
        survivor.subscribe(["t"])
        # the zombie never polls again: the survivor's rebalance drops it after max_poll_interval_ms
        poll_until(survivor, lambda: survivor.assignment() == {TP}, what="survivor owning t-0")
        zombie.commit_async({TP: 1}, callback=lambda offsets, error: outcomes.append((offsets, type(error))))
    assert outcomes in ([({TP: 1}, UnknownMemberIdError)], [({TP: 1}, IllegalGenerationError)])


# -- kafka-python's ConsumerRecord and calls ----------------------------------------------------

def test_a_polled_record_has_kafka_pythons_consumer_record_fields_and_says_where_it_is(root):
    make_topic(root, "t", 1)
    with Producer(root) as p:
        p.send("t", b"value", key=b"key").get()
        p.send("t", None).get()
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        keyed, tombstone = c.poll(1000)[TP]
    assert (keyed.topic, keyed.partition, keyed.offset, keyed.timestamp_type) == ("t", 0, 0, "CreateTime")
    assert keyed.leader_epoch == 0
    assert (keyed.serialized_key_size, keyed.serialized_value_size) == (3, 5)
    assert (tombstone.serialized_key_size, tombstone.serialized_value_size) == (-1, -1)
    assert "topic='t'" in repr(keyed) and "partition=0" in repr(keyed) and "offset=0" in repr(keyed)


def test_a_deserialized_record_keeps_the_sizes_of_its_bytes_and_its_leader_epoch(root):
    make_topic(root, "t", 1, [(0, [(b"k1", b"[1, 2]")])])
    with Consumer(root, auto_offset_reset="earliest", key_deserializer=bytes.decode,
                  value_deserializer=lambda v: v.decode().split(",")) as c:
        c.assign([TP])
        (record,) = c.poll(1000)[TP]
    assert (record.key, record.value) == ("k1", ["[1", " 2]"])
    assert (record.serialized_key_size, record.serialized_value_size, record.leader_epoch) == (2, 6, 0)
    assert "topic='t'" in repr(record)


def test_polling_before_subscribe_or_assign_is_a_state_error(root):
    make_topic(root, "t", 1)
    with Consumer(root, "g") as c:
        with pytest.raises(ClientStateError, match="subscribe"):
            c.poll(0)
        with pytest.raises(ClientStateError, match="subscribe"):
            next(iter(c))
        c.assign([TP])
        assert c.poll(0) == {}
        c.unsubscribe()
        with pytest.raises(ClientStateError, match="subscribe"):
            c.poll_columns(0)


def test_highwater_is_the_high_watermark_of_an_assigned_partition(root):
    make_topic(root, "t", 1, [(0, [b"a", b"b", b"c"])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([TP])
        assert c.highwater(TP) == 3
        with Producer(root) as p:
            p.send("t", b"d").get()
        c.poll(1000)
        assert c.highwater(TP) == 4
        with pytest.raises(InvalidArgumentError, match="not assigned"):
            c.highwater(TopicPartition("t", 1))


def test_a_pickled_consumer_record_keeps_its_fields(root):
    import pickle
    make_topic(root, "t", 1, [(0, [(b"k", b"v")])])
    for options in ({}, {"value_deserializer": bytes.decode}):
        with Consumer(root, auto_offset_reset="earliest", **options) as c:
            c.assign([TP])
            (record,) = c.poll(1000)[TP]
        copy = pickle.loads(pickle.dumps(record))
        assert repr(copy) == repr(record) and copy.serialized_value_size == 1 and copy.leader_epoch == 0


_FEW_DESCRIPTORS = r"""
import os, resource, shutil, sys
from pylog import Log
from pylog.clients import Consumer, TopicPartition
root, partitions, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with Log.open(os.path.join(root, "many-0")) as log:
    log.append([b"a", b"b"])
for p in range(1, partitions):  # copies: no fsync per partition
    shutil.copytree(os.path.join(root, "many-0"), os.path.join(root, "many-%d" % p))
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
with Consumer(root, auto_offset_reset="earliest") as c:
    c.assign([TopicPartition("many", p) for p in range(partitions)])
    got = 0
    while got < 2 * partitions:
        got += sum(len(records) for records in c.poll(1000).values())
    print(got, c.end_offsets([TopicPartition("many", p) for p in range(partitions)])[TopicPartition("many", 7)])
"""


def test_a_consumer_reads_more_partitions_than_the_descriptor_limit_allows_files(tmp_path):
    """A consumer's partitions share one ``max_open_files`` budget (half the process's
    RLIMIT_NOFILE by default), as a LogManager's logs do: 150 partitions under a limit of
    64 descriptors are read whole."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _FEW_DESCRIPTORS, str(tmp_path), "150", "64"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["300", "2"]
