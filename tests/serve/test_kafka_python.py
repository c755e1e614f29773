"""kafka-python's KafkaProducer and KafkaConsumer against ``pylog serve``: what they write
reads back identically through pylog's Log API and ``pylog verify`` is clean; the consumer
reads by assign and seek and finds offsets by time."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from pylog.manager import LogManager
from tests.serve.conftest import pylog_cli

#: kafka-python's codecs that work here (snappy and zstd need their packages)
CODECS = ["gzip", "lz4", "zstd", "snappy"]


def _produce(server, topic: str, records, **settings) -> list:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers, **settings)
    futures = [producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts) for k, v, h, ts in records]
    producer.flush(timeout=60)
    metadata = [f.get(timeout=60) for f in futures]
    producer.close()
    return metadata


def _consume(server, topic: str, partition: int, offset: int, count: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=30_000)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    got = []
    for message in consumer:
        got.append(message)
        if len(got) == count:
            break
    consumer.close()
    return got


def _records(n: int, start_ms: int = 1_700_000_000_000):
    return [(f"key-{i}".encode(), f"value-{i}".encode() * (i % 7 + 1), [("h", str(i).encode()), ("empty", b"")],
             start_ms + i * 1000) for i in range(n)]


@pytest.mark.parametrize("codec", CODECS)
def test_records_produced_through_the_server_read_back_identically_with_the_log_api(pylog_server, codec):
    records = _records(50)
    metadata = _produce(pylog_server, "events", records, compression_type=codec, linger_ms=5)
    assert sorted(m.offset for m in metadata) == list(range(50))
    got = _consume(pylog_server, "events", 0, 0, 50)
    assert [(m.offset, m.key, m.value, [tuple(h) for h in m.headers], m.timestamp) for m in got] == [
        (i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(records)]
    pylog_server.stop()
    with LogManager(pylog_server.root, read_only=True) as manager:
        log = manager.log("events", 0)
        read = list(log.records())
        # kafka-python sends a batch uncompressed when compressing does not shrink it
        assert codec in {b.compression for b in log.read(0, 1 << 20).batches()}
    assert [(r.offset, r.key, r.value, [tuple(h) for h in r.headers], r.timestamp) for r in read] == [
        (i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(records)]
    verify = pylog_cli("verify", pylog_server.root)
    assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()


def test_a_consumer_seeks_into_the_middle_and_reads_to_the_end(pylog_server):
    _produce(pylog_server, "seek", _records(30))
    got = _consume(pylog_server, "seek", 0, 17, 13)
    assert [m.offset for m in got] == list(range(17, 30))
    assert got[0].value == b"value-17" * 4


def test_offsets_for_times_earliest_and_latest_are_kafka_s_list_offsets(pylog_server):
    _produce(pylog_server, "times", _records(10, start_ms=1_000_000))
    consumer = KafkaConsumer(bootstrap_servers=pylog_server.bootstrap_servers, enable_auto_commit=False)
    tp = TopicPartition("times", 0)
    found = consumer.offsets_for_times({tp: 1_004_500})[tp]
    assert (found.offset, found.timestamp) == (5, 1_005_000)
    assert consumer.offsets_for_times({tp: 2_000_000})[tp] is None  # after the last record
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 10}
    consumer.close()


def test_an_idempotent_producer_gets_a_producer_id_and_its_batches_carry_it(pylog_server):
    _produce(pylog_server, "idem", _records(20), enable_idempotence=True, acks="all")
    with LogManager(pylog_server.root, read_only=True) as manager:
        batches = manager.log("idem", 0).read(0, 1 << 20).batches()
    assert {b.producer_id for b in batches} == {0} and batches[0].base_sequence == 0


def test_acks_zero_is_not_answered_and_still_appends(pylog_server):
    _produce(pylog_server, "fire", _records(5), acks=0)
    got = _consume(pylog_server, "fire", 0, 0, 5)
    assert [m.key for m in got] == [f"key-{i}".encode() for i in range(5)]


def test_metadata_names_this_server_as_the_leader_of_every_partition(pylog_server):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("three", partitions=3)
    consumer = KafkaConsumer(bootstrap_servers=pylog_server.bootstrap_servers)
    assert consumer.partitions_for_topic("three") == {0, 1, 2}
    assert "three" in consumer.topics()
    consumer.close()
