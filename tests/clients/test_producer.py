"""Producer: partitioner, idempotence, batching, transactions and fencing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from pylog import Log, LogManager
from pylog.clients import Consumer, Producer
from pylog.logdir.producer_ids import allocate_producer_id
from pylog.logdir.writers import WriterPool
from pylog.clients.consumer import GroupMetadata
from pylog.coordinator.txn_coordinator import MAX_EPOCH, TransactionCoordinator
from pylog.errors import (
    InvalidArgumentError, InvalidConfigError, LogLockedError, ProducerFencedError, RecordTooLargeError,
    TransactionAbortableError, UnknownMemberIdError, UnknownTopicError,
)
from pylog.record.encode import now_ms
from pylog.partitioner import partition_for_key
from tests.clients.conftest import make_topic


def read(root, topic, p, isolation="uncommitted"):
    with Log.open(os.path.join(root, f"{topic}-{p}"), read_only=True) as log:
        return [r.value for r in log.records(isolation=isolation)]


def test_keyed_records_go_where_kafkas_partitioner_puts_them(root):
    make_topic(root, "t", 4)
    with Producer(root) as producer:
        metas = [producer.send("t", b"v%d" % i, key=b"k%d" % i).get(5) for i in range(20)]
    for i, m in enumerate(metas):
        assert m.partition == partition_for_key(b"k%d" % i, 4)
        assert b"v%d" % i in read(root, "t", m.partition)


def test_linger_batches_records_into_one_append_and_flush_sends_them(root):
    make_topic(root, "t", 1)
    with Producer(root, linger_ms=60_000, batch_size=1 << 20) as producer:
        futures = [producer.send("t", b"%d" % i) for i in range(50)]
        assert not futures[0].is_done()
        producer.flush()
        assert [f.get(1).offset for f in futures] == list(range(50))
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        batches = log.read(0).batches()
    assert len(batches) == 1 and batches[0].producer_id >= 0 and batches[0].base_sequence == 0


def test_producer_ids_are_unique_and_survive_reopening(root):
    ids = [allocate_producer_id(root) for _ in range(3)]
    with Producer(root) as p1, Producer(root) as p2:
        ids += [p1.producer_id, p2.producer_id]
    assert len(set(ids)) == 5 and allocate_producer_id(root) == max(ids) + 1


def test_an_unknown_topic_without_auto_create_is_refused_naming_the_command_that_creates_it(root):
    with Producer(root, auto_create_topics_enable=False) as producer:
        with pytest.raises(UnknownTopicError, match=r"pylog topics .* --create --topic missing"):
            producer.send("missing", b"x")
        with pytest.raises(UnknownTopicError, match="auto_create_topics_enable"):
            producer.send("missing", b"x", partition=0)
    assert sorted(os.listdir(root)) == sorted(n for n in os.listdir(root) if not n.startswith("missing"))


# -- a fresh directory, kafka-python's keywords --------------------------------------------------

def test_the_first_example_of_the_docs_runs_in_a_fresh_directory(tmp_path):
    """As Kafka's broker (auto.create.topics.enable, num.partitions=1), the first send to
    a topic creates it, and the log dir too."""
    root = str(tmp_path / "data" / "kafka")
    with Producer(root) as producer:
        meta = producer.send("events", b"login", key=b"user-1").get()
    assert (meta.topic, meta.partition, meta.offset) == ("events", 0, 0)
    with Consumer(root, group_id="audit", auto_offset_reset="earliest", consumer_timeout_ms=100) as consumer:
        consumer.subscribe(["events"])
        got, deadline = [], time.monotonic() + 30
        while not got and time.monotonic() < deadline:  # the first iterations may only join the group
            got = [(r.partition, r.offset, r.value) for r in consumer]
    assert got == [(0, 0, b"login")]


def test_auto_created_topics_take_num_partitions(root):
    with Producer(root, num_partitions=3) as producer:
        metas = [producer.send("three", b"v", key=b"k%d" % i).get() for i in range(12)]
        producer.send_batch("batch", [b"a", b"b"]).get()
    with LogManager(root, read_only=True) as m:
        assert m.partitions("three") == [0, 1, 2] and m.partitions("batch") == [0, 1, 2]
    assert {meta.partition for meta in metas} == {0, 1, 2}


def test_producers_auto_creating_one_topic_at_once_all_send_to_it(root):
    from concurrent.futures import ThreadPoolExecutor
    barrier = threading.Barrier(4)

    def send(i):
        with Producer(root, num_partitions=2) as producer:
            barrier.wait()
            return producer.send("shared", b"%d" % i, partition=i % 2).get().partition
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(send, range(4))) == [0, 1, 0, 1]  # a failed send raises here
    assert sorted(read(root, "shared", 0) + read(root, "shared", 1)) == [b"0", b"1", b"2", b"3"]


def test_a_producer_does_not_count_the_partitions_of_a_topic_another_is_still_creating(root):
    """While a producer creates a topic (its partition directories one by one), another
    one learning its partition count waits for it: counting a half-made topic would map
    keys to the wrong partitions for as long as the count is kept."""
    from pylog.clients.producer import topic_creation_lock
    with Producer(root) as producer:
        with topic_creation_lock(root, "half"):  # a creator, between its first and its last partition
            with LogManager(root) as m:
                m.create_topic("half", 1)
            metas = []
            sent = threading.Thread(target=lambda: metas.append(producer.send("half", b"v", key=b"k").get()))
            sent.start()
            with LogManager(root) as m:
                m.add_partitions("half", 3)
        sent.join()
        assert [meta.partition for meta in metas] == [partition_for_key(b"k", 3)] != [0]


@pytest.mark.parametrize("acks, flushed", [(1, False), (0, False), ("all", True), (-1, True)])
def test_acks_all_answers_once_the_records_are_flushed_to_disk(root, acks, flushed):
    """The log's recovery point (what is known to be on disk) passes the records before
    their futures are done with ``acks="all"``; with 0 or 1 they are in the page cache."""
    with Producer(root, acks=acks, linger_ms=5) as producer:
        futures = [producer.send("t", b"v") for _ in range(3)]
        metas = [f.get() for f in futures]
        with producer._pool.writer("t", 0) as log:
            assert log.recovery_point == (metas[-1].offset + 1 if flushed else 0)


@pytest.mark.parametrize("options", [dict(acks=2), dict(acks="1"), dict(acks=True)], ids=repr)
def test_acks_takes_kafkas_values(tmp_path, options):
    with pytest.raises(InvalidArgumentError, match="acks"):
        Producer(str(tmp_path / "new"), **options)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("client", [Producer, Consumer])
@pytest.mark.parametrize("setting", ["bootstrap_servers", "retries", "security_protocol", "no_such_thing"])
def test_kafka_python_settings_without_a_meaning_here_are_refused_before_anything_is_made(tmp_path, client, setting):
    with pytest.raises(InvalidConfigError, match=setting):
        client(str(tmp_path / "new"), **{setting: "x"})
    assert os.listdir(tmp_path) == []


def test_fenced_producer_commit_fails_and_its_records_stay_invisible(root):
    make_topic(root, "out", 2)
    old = Producer(root, transactional_id="tx")
    old.begin_transaction()
    old.send("out", b"zombie", partition=0).get(5)
    new = Producer(root, transactional_id="tx")
    assert (new.producer_id, new.producer_epoch) == (old.producer_id, old.producer_epoch + 1)
    with pytest.raises(ProducerFencedError):
        old.commit_transaction()
    with pytest.raises(ProducerFencedError):
        old.send("out", b"more", partition=1)
    new.begin_transaction()
    new.send("out", b"fresh", partition=0)
    new.commit_transaction()
    old.close()
    new.close()
    assert read(root, "out", 0, "committed") == [b"fresh"]
    assert read(root, "out", 1, "committed") == []


def test_abort_hides_records_and_a_new_instance_aborts_what_a_crash_left_open(root):
    make_topic(root, "out", 1)
    with Producer(root, transactional_id="a") as p:
        p.begin_transaction()
        p.send("out", b"aborted")
        p.abort_transaction()
        p.begin_transaction()
        p.send("out", b"left open").get(5)
    with Log.open(os.path.join(root, "out-0"), read_only=True) as log:
        assert log.last_stable_offset < log.log_end_offset  # the open transaction holds readers back
    with Producer(root, transactional_id="a") as p:
        p.begin_transaction()
        p.send("out", b"kept")
        p.commit_transaction()
    assert read(root, "out", 0, "committed") == [b"kept"]


def test_a_new_instance_past_the_last_epoch_aborts_what_the_old_producer_id_left_open(root):
    """When the epochs of a transactional id's producer id run out, the next instance gets
    a new producer id; the transaction the old id left open is aborted first (at the last
    epoch, fencing it), or its records would hold every read_committed reader back for ever."""
    make_topic(root, "out", 1)
    with Producer(root, transactional_id="a"):
        pass
    coordinator = TransactionCoordinator(root, WriterPool.for_root(root))
    meta = coordinator.current("a")
    meta.producer_epoch = MAX_EPOCH - 2  # as after 32,765 restarts of the id
    coordinator._write("a", meta)
    old = Producer(root, transactional_id="a")
    assert old.producer_epoch == MAX_EPOCH - 1
    old.begin_transaction()
    old.send("out", b"left open", partition=0).get(5)
    new = Producer(root, transactional_id="a")
    assert (new.producer_id, new.producer_epoch) != (old.producer_id, old.producer_epoch)
    assert new.producer_epoch == 0
    with pytest.raises(ProducerFencedError):
        old.commit_transaction()
    new.begin_transaction()
    new.send("out", b"kept", partition=0)
    new.commit_transaction()
    old.close()
    new.close()
    coordinator.close()
    assert read(root, "out", 0, "committed") == [b"kept"]
    with Log.open(os.path.join(root, "out-0"), read_only=True) as log:
        assert log.last_stable_offset == log.log_end_offset


def test_a_lingering_producer_appends_every_record_of_a_partition_in_send_order(root):
    """Full batches are appended by the threads that filled them and lingering ones by the
    linger thread: the partition still takes its batches in the order they were filled,
    so each sending thread's records land in the order it sent them."""
    make_topic(root, "t", 1)
    per_thread = 5000
    with Producer(root, linger_ms=1, batch_size=2048, max_block_ms=2000) as producer:
        def send_all(name):
            futures[name] = [producer.send("t", b"%s-%d" % (name, i), partition=0) for i in range(per_thread)]
        futures = {}
        threads = [threading.Thread(target=send_all, args=(n,)) for n in (b"a", b"b", b"c", b"d")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        producer.flush()
    for name, sent in futures.items():
        offsets = [f.get(0).offset for f in sent]
        assert offsets == sorted(offsets), f"{name} landed out of order"
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        values = [r.value for r in log.records()]
    assert len(values) == 4 * per_thread
    for name in futures:
        assert [v for v in values if v.startswith(name)] == [b"%s-%d" % (name, i) for i in range(per_thread)]


def test_a_transaction_with_a_failed_send_cannot_commit_and_aborts_whole(root):
    """Kafka's rule: every send of a transaction must succeed for it to commit; after one
    failed, commit raises (nothing committed) and only abort is possible."""
    make_topic(root, "t", 1)
    with Producer(root, transactional_id="tx") as p:
        p.begin_transaction()
        p.send("t", b"ok-1").get(5)
        too_large = p.send("t", b"x" * (2 << 20))
        with pytest.raises(RecordTooLargeError):
            too_large.get(5)
        with pytest.raises(TransactionAbortableError):
            p.send("t", b"ok-2")
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction()
        assert read(root, "t", 0, "committed") == []
        p.abort_transaction()
        p.begin_transaction()
        p.send("t", b"next")
        p.commit_transaction()
    assert read(root, "t", 0, "committed") == [b"next"]


def test_a_failed_offset_commit_in_a_transaction_leaves_it_abortable_only(root):
    make_topic(root, "t", 1)
    with Producer(root, transactional_id="tx") as p:
        p.begin_transaction()
        p.send("t", b"record")
        with pytest.raises(UnknownMemberIdError):
            p.send_offsets_to_transaction({("t", 0): 1}, GroupMetadata("g", 1, "no-such-member"))
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction()
        p.abort_transaction()
    assert read(root, "t", 0, "committed") == []


def test_closing_a_fenced_producer_fails_the_records_it_never_appended(root):
    make_topic(root, "t", 2)
    old = Producer(root, transactional_id="tx", linger_ms=60_000)
    old.begin_transaction()
    lingering = old.send("t", b"a", partition=0)
    Producer(root, transactional_id="tx").close()
    with pytest.raises(ProducerFencedError):
        old.send("t", b"b", partition=1)
    old.close()
    assert lingering.is_done()
    with pytest.raises(ProducerFencedError):
        lingering.get(0)


def test_a_lingering_record_takes_its_send_time_as_create_time(root):
    make_topic(root, "t", 1)
    with Producer(root, linger_ms=60_000) as p:
        first = p.send("t", b"a")
        first_ms = now_ms()
        while now_ms() == first_ms:  # the next millisecond
            pass
        before = now_ms()
        second = p.send("t", b"b")
        third = p.send_batch("t", [b"c"])
        p.flush()
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        stored = [r.timestamp for r in log.records()]
    assert stored == [first.get().timestamp, second.get().timestamp, third.get()[0].timestamp]
    assert stored[0] <= first_ms < before <= stored[1] <= stored[2]
    assert len(log_batches(root)) == 1  # still one batch


def log_batches(root):
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        return log.read(0).batches()


def test_close_waits_for_a_log_held_by_another_process_at_most_its_timeout(root):
    make_topic(root, "t", 1)
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from pylog import Log; "
                               "log = Log.open(sys.argv[1]); print('held', flush=True); sys.stdin.read()",
                               os.path.join(root, "t-0")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        p = Producer(root, linger_ms=60_000, max_block_ms=60_000)
        future = p.send("t", b"x")
        started = time.monotonic()
        p.close(timeout=0.5)
        assert time.monotonic() - started < 30  # not max_block_ms
        with pytest.raises(LogLockedError):
            future.get(0)
    finally:
        holder.stdin.close()
        holder.wait(30)


def test_send_callbacks_get_the_metadata_or_the_error(root):
    make_topic(root, "t", 1)
    got = []

    def note(tag, what):
        got.append((tag, what))

    with Producer(root, linger_ms=60_000) as p:
        future = p.send("t", b"a").add_callback(note, "ok").add_errback(note, "failed")
        assert got == [] and not future.is_done()
        p.flush()
        assert [(tag, meta.offset) for tag, meta in got] == [("ok", 0)]
        assert future.succeeded() and future.exception is None
        got.clear()
        future.add_callback(note, "late")  # done already: called at once
        assert [(tag, meta.offset) for tag, meta in got] == [("late", 0)]
        got.clear()
        failing = p.send("t", b"x" * (2 << 20)).add_errback(note, "failed").add_callback(note, "ok")
        p.flush()
        assert failing.failed() and [(tag, type(e)) for tag, e in got] == [("failed", RecordTooLargeError)]


def test_a_callback_that_raises_does_not_fail_the_append(root, caplog):
    make_topic(root, "t", 1)
    with Producer(root) as p:
        meta = p.send("t", b"a").add_callback(lambda meta: 1 / 0).get(5)
    assert meta.offset == 0 and "send callback raised" in caplog.text


def test_a_record_too_large_for_the_topic_fails_alone_and_the_batch_around_it_goes_in(root):
    """Kafka's producer splits a batch the broker refuses as too large: only a record that
    does not fit alone fails; the others are appended, in order, with their own offsets."""
    make_topic(root, "t", 1)
    with Producer(root, linger_ms=60_000) as p:
        futures = [p.send("t", value) for value in (b"a", b"b", b"x" * (2 << 20), b"c")]
        batch = p.send_batch("t", [b"d", b"x" * (2 << 20)])
        p.flush()
        assert [f.get(1).offset for f in futures[:2]] + [futures[3].get(1).offset] == [0, 1, 2]
        with pytest.raises(RecordTooLargeError):
            futures[2].get(1)
        assert futures[2].failed() and futures[3].succeeded()
        with pytest.raises(RecordTooLargeError):
            batch.get(1)
    assert read(root, "t", 0) == [b"a", b"b", b"c", b"d"]
    with Log.open(os.path.join(root, "t-0"), read_only=True) as log:
        batches = log.read(0).batches()
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]  # gapless: refused ones took none


_FEW_DESCRIPTORS = r"""
import os, resource, shutil, sys
from pylog import Log
from pylog.clients import Producer
root, partitions, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
Log.open(os.path.join(root, "many-0")).close()
for p in range(1, partitions):  # copies: no fsync per partition
    shutil.copytree(os.path.join(root, "many-0"), os.path.join(root, "many-%d" % p))
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
with Producer(root) as producer:
    futures = [producer.send("many", b"v", partition=i % partitions) for i in range(2 * partitions)]
    print(sum(f.get().offset for f in futures))
"""


def test_a_producer_writes_more_partitions_than_the_descriptor_limit_allows_files(tmp_path):
    """The logs a producer's process holds share one ``max_open_files`` budget (half the
    process's RLIMIT_NOFILE by default), as a LogManager's do: 50 partitions under a limit
    of 32 descriptors take every record."""
    out = subprocess.run([sys.executable, "-c", _FEW_DESCRIPTORS, str(tmp_path), "50", "32"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["50"]
