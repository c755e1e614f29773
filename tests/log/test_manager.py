"""A log dir of many topics: creation, name rules, partitioning, checkpoints."""

from __future__ import annotations

import os

import pytest

from pylog import InvalidConfigError, InvalidTopicError, LogManager
from pylog.errors import UnknownTopicError
from pylog.partitioner import murmur2, partition_for_key


def test_create_topic_makes_kafka_partition_dirs(tmp_path):
    with LogManager(tmp_path) as m:
        m.create_topic("orders", partitions=3)
        assert set(os.listdir(tmp_path)) >= {"orders-0", "orders-1", "orders-2"}
        assert m.topics() == ["orders"] and m.partitions("orders") == [0, 1, 2]


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "x" * 250, "sp ace", "ünï"])
def test_invalid_topic_names_are_refused_and_nothing_is_created(tmp_path, name):
    with LogManager(tmp_path / "root") as m:
        with pytest.raises(InvalidTopicError):
            m.create_topic(name, 1)
    assert [n for n in os.listdir(tmp_path / "root") if not n.startswith(".")] == []
    assert not (tmp_path / "x").exists()


def test_keyed_records_go_where_kafkas_partitioner_sends_them(tmp_path):
    with LogManager(tmp_path) as m:
        t = m.create_topic("t", partitions=7)
        keys = [b"key-%d" % i for i in range(200)]
        t.append([(k, b"v") for k in keys])
        for p in range(7):
            got = {r.key for r in m.log("t", p).records()}
            assert got == {k for k in keys if partition_for_key(k, 7) == p}


def test_murmur2_matches_kafkas_test_vectors():
    # from Kafka's UtilsTest.testMurmur2
    vectors = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
               b"a-little-bit-longer-string": -1486304829,
               b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    for key, want in vectors.items():
        assert murmur2(key) == want


def test_null_keys_round_robin_by_batch(tmp_path):
    with LogManager(tmp_path) as m:
        t = m.create_topic("t", partitions=3)
        for _ in range(6):
            t.append([b"a", b"b"])
        assert [m.log("t", p).log_end_offset for p in range(3)] == [4, 4, 4]


def test_checkpoints_survive_reopen(tmp_path):
    with LogManager(tmp_path) as m:
        t = m.create_topic("t", partitions=2, config={"segment_bytes": 2048})
        for i in range(100):
            t.append([b"x" * 100], partition=0)
        m.log("t", 0).delete_records(50)
    lines = (tmp_path / "log-start-offset-checkpoint").read_text().split("\n")
    assert lines[0] == "0" and "t 0 50" in lines
    assert "t 0 100" in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    with LogManager(tmp_path) as m:
        assert m.log("t", 0).log_start_offset == 50
        assert m.topic_config("t").segment_bytes == 2048
        assert m.log("t", 0).load_report.clean


def test_unknown_topic_and_bad_partition_counts(tmp_path):
    with LogManager(tmp_path) as m:
        with pytest.raises(UnknownTopicError):
            m.topic("nope")
        with pytest.raises(InvalidConfigError):
            m.create_topic("t", 0)
        with pytest.raises(InvalidConfigError):
            m.create_topic("t", 1, config={"segment_bytes": -5})
        assert m.topics() == []


def test_read_only_manager_opens_a_kafka_log_dir(tmp_path):
    from tests.conftest import SAMPLES
    if SAMPLES is None:
        pytest.skip("Kafka samples not found")
    with LogManager(SAMPLES / "real" / "gzip-topic", read_only=True) as m:
        assert m.topics() == ["topic-logx-001"]
        assert sum(m.log("topic-logx-001", p).log_end_offset for p in m.partitions("topic-logx-001")) > 0


def test_log_dir_clean_shutdown_marker_bytes_are_kafkas(tmp_path):
    with LogManager(tmp_path) as manager:
        manager.create_topic("orders", partitions=1)
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":-1}'


def test_set_topic_config_declares_overrides_without_opening_a_log(tmp_path):
    with LogManager(tmp_path) as m:
        m.set_topic_config("t", {"cleanup_policy": "compact"})
        assert "t-0" not in os.listdir(tmp_path) and "topic-configs.json" in os.listdir(tmp_path)
    with LogManager(tmp_path) as m:
        assert m.create_topic("t", 1).log(0).config.cleanup_policy == "compact"
        with pytest.raises(InvalidConfigError):
            m.set_topic_config("t", {"cleanup_policy": "sometimes"})
        assert m.topic_config("t").cleanup_policy == "compact"


def test_partition_for_key_stays_kafkas_once_keys_are_remembered(monkeypatch):
    import pylog.partitioner as partitioner
    monkeypatch.setattr(partitioner, "_CACHED_KEYS", 8)
    monkeypatch.setattr(partitioner, "_HASHES", {})
    keys = [b"user-%d" % i for i in range(20)] + [b"k" * 65, bytearray(b"user-3"), memoryview(b"user-4")]
    for _ in range(2):  # computed, then remembered (the cache filled and emptied meanwhile)
        want = [(murmur2(bytes(k)) & 0x7FFFFFFF) % 7 for k in keys]
        assert [partition_for_key(k, 7) for k in keys] == want
        assert partitioner.partitions_for_keys(keys, 7) == want
    assert len(partitioner._HASHES) <= 8
