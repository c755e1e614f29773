"""Producer.send_batch: many records at once, through the same partitioner, batches,
sequences and transactions as ``send``; and ``send``'s fast path keeps its checks."""

from __future__ import annotations

import os

import pytest

from pylog import Log
from pylog.clients import Producer
from pylog.errors import InvalidArgumentError, UnknownTopicError
from pylog.partitioner import partition_for_key
from tests.clients.conftest import make_topic


def records(root, topic, p, isolation="uncommitted"):
    with Log.open(os.path.join(root, f"{topic}-{p}"), read_only=True) as log:
        return list(log.records(isolation=isolation))


def batches(root, topic, p):
    with Log.open(os.path.join(root, f"{topic}-{p}"), read_only=True) as log:
        return log.read(0, 1 << 30).batches()


def end_offsets(root, topic, partitions):
    out = []
    for p in range(partitions):
        with Log.open(os.path.join(root, f"{topic}-{p}"), read_only=True) as log:
            out.append(log.log_end_offset)
    return out


@pytest.mark.parametrize("linger_ms", [0, 60_000])
def test_keyed_records_land_once_in_order_in_the_partition_kafkas_partitioner_picks(root, linger_ms):
    make_topic(root, "t", 4)
    keys = [b"user-%d" % (i % 37) for i in range(600)]
    values = [b"v%d" % i for i in range(600)]
    with Producer(root, linger_ms=linger_ms, batch_size=1024) as producer:
        future = producer.send_batch("t", values, keys=keys)
        producer.flush()
        meta = future.get(5)
    assert len(meta) == 600
    for p in range(4):
        sent = [(k, v) for k, v in zip(keys, values) if partition_for_key(k, 4) == p]
        landed = records(root, "t", p)
        assert [(r.key, r.value) for r in landed] == sent
    for i in (0, 1, 299, 599):
        assert meta[i].partition == partition_for_key(keys[i], 4)
        assert records(root, "t", meta[i].partition)[meta[i].offset].value == values[i]


def test_keyless_records_among_keyed_ones_go_to_the_sticky_partition(root):
    make_topic(root, "t", 3)
    keys = [b"k%d" % i if i % 3 else None for i in range(30)]
    with Producer(root) as producer:
        meta = producer.send_batch("t", [b"v%d" % i for i in range(30)], keys=keys).get(5)
    keyless = {meta[i].partition for i in range(30) if keys[i] is None}
    assert len(keyless) == 1
    assert all(meta[i].partition == partition_for_key(keys[i], 3) for i in range(30) if keys[i] is not None)
    landed = sorted(r.value for p in range(3) for r in records(root, "t", p))
    assert landed == sorted(b"v%d" % i for i in range(30))


def test_a_bulk_run_is_cut_into_the_batches_sends_would_fill_and_sequences_stay_gapless_with_send(root):
    make_topic(root, "bulk", 1)
    make_topic(root, "one-by-one", 1)
    with Producer(root, linger_ms=60_000, batch_size=2000) as producer:
        first = producer.send("bulk", b"a", partition=0)
        bulk = producer.send_batch("bulk", [b"x" * 100] * 95, partition=0)
        last = producer.send("bulk", b"z", partition=0)
        for value in [b"a"] + [b"x" * 100] * 95 + [b"z"]:
            producer.send("one-by-one", value, partition=0)
        producer.flush()
        assert [first.get(1).offset, bulk.get(1)[0].offset, bulk.get(1)[94].offset, last.get(1).offset] == \
            [0, 1, 95, 96]
    got = batches(root, "bulk", 0)
    assert [b.base_offset for b in got] == [b.base_offset for b in batches(root, "one-by-one", 0)]
    assert len(got) > 4 and [b.base_sequence for b in got] == [b.base_offset for b in got]  # gapless from 0
    assert len({b.producer_id for b in got}) == 1 and got[0].producer_id >= 0
    assert [r.value for r in records(root, "bulk", 0)] == [b"a"] + [b"x" * 100] * 95 + [b"z"]


def test_without_linger_the_records_are_appended_before_send_batch_returns(root):
    make_topic(root, "t", 2)
    with Producer(root) as producer:
        future = producer.send_batch("t", (b"%d" % i for i in range(10)), partition=1)
        assert future.is_done()
        assert [m.offset for m in future.get(0)] == list(range(10))
        assert end_offsets(root, "t", 2) == [0, 10]


def test_keyless_records_stick_to_a_partition_per_batch(root):
    make_topic(root, "t", 3)
    with Producer(root, linger_ms=60_000, batch_size=121 * 10) as producer:
        meta = producer.send_batch("t", [b"x" * 100] * 45)
        producer.flush()
        meta = meta.get(5)
    runs = [meta[i].partition for i in range(0, 45, 10)]
    assert all(meta[i].partition == runs[i // 10] for i in range(45))
    assert len(set(runs[:3])) == 3  # each full batch moved the sticky partition on
    assert sum(end_offsets(root, "t", 3)) == 45


def test_a_transactions_bulk_records_are_invisible_to_read_committed_until_commit(root):
    make_topic(root, "t", 2)
    with Producer(root, transactional_id="bulk", linger_ms=5) as producer:
        producer.begin_transaction()
        producer.send_batch("t", [b"gone"] * 3, partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        future = producer.send_batch("t", [b"a", b"b", b"c"], keys=[b"k1", b"k2", b"k3"])
        producer.flush()
        future.get(5)
        assert records(root, "t", 0, "committed") == [] and records(root, "t", 1, "committed") == []
        producer.commit_transaction()
    committed = [r.value for p in range(2) for r in records(root, "t", p, "committed")]
    assert sorted(committed) == [b"a", b"b", b"c"]


def test_columns_from_arrow_and_pandas_with_headers_and_timestamps(root):
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    make_topic(root, "t", 1)
    values = pa.array([b"one", None, b"three"], type=pa.binary())
    keys = pd.Series([b"k1", b"k2", b"k3"])
    with Producer(root) as producer:
        meta = producer.send_batch("t", values, keys=keys, partition=0, headers=[[("h", b"1")], None, []],
                                   timestamps_ms=[1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002]).get(5)
    assert [m.timestamp for m in meta] == [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002]
    got = records(root, "t", 0)
    assert [(r.key, r.value, tuple(r.headers)) for r in got] == [
        (b"k1", b"one", (("h", b"1"),)), (b"k2", None, ()), (b"k3", b"three", ())]


@pytest.mark.parametrize("bad, what", [
    (dict(values=[b"ok"] * 5 + ["text"] + [b"ok"]), "record 5"),
    (dict(values=[b"a", b"b"], keys=[b"k", 7]), "record 1"),
    (dict(values=[b"a", b"b"], headers=[[("h", b"x")], ("h", b"y")]), "record 1"),
    (dict(values=[b"a", b"b"], headers=[[("h", "not bytes")], None]), "record 0"),
    (dict(values=[b"a", b"b"], timestamps_ms=[1, "soon"]), "record 1"),
    (dict(values=[b"a", b"b"], keys=[b"k"]), "keys has 1 items for 2 values"),
    (dict(values=b"not a column"), "values must be a column"),
    (dict(values=[b"a"], partition=-1), "partition"),
])
def test_bad_input_is_refused_before_anything_is_appended(root, bad, what):
    make_topic(root, "t", 2)
    with Producer(root, linger_ms=60_000) as producer:
        producer.send_batch("t", [b"before"] * 3, partition=0)
        with pytest.raises(InvalidArgumentError, match=what):
            producer.send_batch("t", **bad)
        producer.flush()
    assert [r.value for r in records(root, "t", 0)] == [b"before"] * 3
    assert end_offsets(root, "t", 2) == [3, 0]


def test_unknown_topic_is_refused_even_for_no_records_without_auto_create(root):
    with Producer(root, auto_create_topics_enable=False) as producer, pytest.raises(UnknownTopicError):
        producer.send_batch("missing", [])


def test_send_keeps_checking_what_its_fast_path_does_not_take(root):
    make_topic(root, "t", 2)
    with Producer(root, linger_ms=60_000) as producer:
        for bad in (dict(value="text"), dict(value=b"v", key="text"), dict(value=b"v", headers=[("h", 1)]),
                    dict(value=b"v", headers=5), dict(value=b"v", timestamp_ms="now")):
            with pytest.raises(InvalidArgumentError):
                producer.send("t", partition=0, **bad)
        stamped = producer.send("t", b"v", partition=0, timestamp_ms=1_700_000_000_000)
        viewed = producer.send("t", bytearray(b"v"), key=memoryview(b"k"), partition=1)
        producer.flush()
        assert stamped.get(1).timestamp == 1_700_000_000_000
        assert viewed.get(1).partition == 1
    assert [(r.key, r.value) for r in records(root, "t", 1)] == [(b"k", b"v")]
    assert end_offsets(root, "t", 2) == [1, 1]
