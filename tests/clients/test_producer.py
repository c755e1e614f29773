"""Producer: partitioner, idempotence, batching, transactions and fencing."""

from __future__ import annotations

import os
import threading

import pytest

from pylog import Log
from pylog.clients import Producer
from pylog.clients.producer_ids import allocate_producer_id
from pylog.errors import ProducerFencedError, UnknownTopicError
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


def test_unknown_topic_is_refused(root):
    with Producer(root) as producer, pytest.raises(UnknownTopicError):
        producer.send("missing", b"x")


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
