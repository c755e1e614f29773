"""Records read back carry their place: ``topic`` and ``partition`` of the log they were read
from, ``timestamp_type`` of their batch, as Kafka's ConsumerRecord does."""

from __future__ import annotations

import shutil

import pytest

from pylog import Log, LogManager, Record
from tests.conftest import SAMPLES, needs_samples
from tests.record.expected import expected_rows


def _places(records) -> set:
    return {(r.topic, r.partition, r.timestamp_type) for r in records}


def test_records_read_from_a_log_name_its_topic_partition_and_timestamp_type(tmp_path):
    with Log.open(tmp_path / "orders-3") as log, \
            Log.open(tmp_path / "audit-0", message_timestamp_type="LogAppendTime") as audit:
        log.append([Record(b"a", timestamp=5), b"b"])
        audit.append([b"c"])
        assert _places(log.read(0).records()) == {("orders", 3, "CreateTime")}
        assert _places(log.records()) == {("orders", 3, "CreateTime")}
        assert _places(audit.records()) == {("audit", 0, "LogAppendTime")}
    with LogManager(tmp_path, read_only=True) as m:
        assert _places(m.log("orders", 3).records(isolation="committed")) == {("orders", 3, "CreateTime")}


def test_the_place_is_not_part_of_equality_and_a_new_record_has_none():
    appended = Record(b"v", key=b"k", timestamp=1, offset=0)
    assert (appended.topic, appended.partition, appended.timestamp_type) == (None, None, None)
    read = Record(b"v", key=b"k", timestamp=1, offset=0)
    read.topic, read.partition, read.timestamp_type = "t", 0, "CreateTime"
    assert read == appended and (read.topic, read.partition, read.timestamp_type) == ("t", 0, "CreateTime")
    with pytest.raises(AttributeError):
        appended.topics


@needs_samples
def test_kafka_written_records_carry_kafkas_timestamp_type(tmp_path):
    for src, name in [(SAMPLES / "real" / "lz4-logappendtime-0", "lz4-logappendtime-0"),
                      (SAMPLES / "reference" / "v0-none", "legacy-0"),
                      (SAMPLES / "reference" / "v1-none", "legacy-1")]:
        shutil.copytree(src, tmp_path / name)
        expected = {row["timestamp_type"] for row in expected_rows(src / "00000000000000000000.log")}
        topic, _, partition = name.rpartition("-")
        with Log.open(tmp_path / name, read_only=True) as log:
            assert _places(log.records()) == {(topic, int(partition), t) for t in expected}
