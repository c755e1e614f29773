"""librdkafka (confluent-kafka) against ``pylog serve``: an idempotent producer, an
assigned consumer, read_committed skipping an aborted transaction written by pylog."""

from __future__ import annotations

import pytest

from pylog.manager import LogManager
from tests.serve.conftest import librdkafka_consume

confluent_kafka = pytest.importorskip("confluent_kafka")


def test_an_idempotent_librdkafka_producer_and_an_assigned_consumer(pylog_server):
    producer = confluent_kafka.Producer({"bootstrap.servers": pylog_server.bootstrap_servers,
                                         "enable.idempotence": True, "compression.type": "zstd", "linger.ms": 5})
    for i in range(200):
        producer.produce("orders", key=b"k%d" % i, value=b"v%d" % i, headers=[("n", str(i).encode())])
    assert producer.flush(60) == 0
    got = librdkafka_consume(pylog_server, "orders", 200)
    assert got == [(i, b"k%d" % i, b"v%d" % i, [("n", str(i).encode())]) for i in range(200)]
    with LogManager(pylog_server.root, read_only=True) as manager:
        batches = manager.log("orders", 0).read(0, 1 << 20).batches()
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]  # one producer, from 0


def test_read_committed_skips_an_aborted_transaction_and_waits_at_an_open_one(pylog_server):
    with LogManager(pylog_server.root) as manager:
        log = manager.create_topic("txn", partitions=1).log(0)
        log.append([b"before"])
        log.append([b"aborted-1", b"aborted-2"], producer_id=7, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(7, 0, commit=False)
        log.append([b"committed"], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(8, 0, commit=True)
        log.append([b"open"], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    committed = librdkafka_consume(pylog_server, "txn", 2, **{"isolation.level": "read_committed"})
    assert [value for _, _, value, _ in committed] == [b"before", b"committed"]
    uncommitted = librdkafka_consume(pylog_server, "txn", 5, **{"isolation.level": "read_uncommitted"})
    assert [value for _, _, value, _ in uncommitted] == [b"before", b"aborted-1", b"aborted-2", b"committed", b"open"]


def test_librdkafka_lists_the_topics_and_this_broker(pylog_server):
    with LogManager(pylog_server.root) as manager:
        manager.create_topic("listed", partitions=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": pylog_server.bootstrap_servers})
    metadata = producer.list_topics(timeout=30)
    assert sorted(metadata.topics["listed"].partitions) == [0, 1]
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [(pylog_server.host, pylog_server.port)]
