"""The shared Kafka broker answers: Kafka's producer writes, Kafka's consumer and pylog read back."""

from __future__ import annotations

from pylog import Log
from tests.kafka.broker import KafkaBroker, kafka_uuid


def test_a_record_kafka_produces_is_read_back_by_kafka_and_by_pylog(kafka_broker):
    kafka_broker.create_topic("smoke")
    acks = kafka_broker.clients("produce", lines=[
        {"topic": "smoke", "partition": 0, "key": "k", "value": "v", "timestamp": 1_700_000_000_000,
         "headers": [["h", "x"]]}])
    assert [(a["partition"], a["offset"]) for a in acks] == [(0, 0)]

    [consumed] = kafka_broker.clients("consume", "--topic", "smoke", "--partition", "0")
    assert (consumed["offset"], consumed["key"], consumed["value"], consumed["timestamp"],
            consumed["timestampType"], consumed["headers"]) == (0, "k", "v", 1_700_000_000_000, "CreateTime",
                                                               [["h", "x"]])

    with Log.open(kafka_broker.partition_dir("smoke", 0), read_only=True) as log:
        [record] = list(log.records())
    assert (record.offset, record.key, record.value, record.timestamp, list(record.headers)) == \
        (0, b"k", b"v", 1_700_000_000_000, [("h", b"x")])


def test_kafka_uuids_never_start_with_a_dash_as_kafkas_own_do():
    assert not [u for u in (kafka_uuid() for _ in range(2000)) if u.startswith("-")]


def test_a_cluster_id_starting_with_a_dash_formats_the_log_dir(kafka_jars, tmp_path):
    broker = KafkaBroker(tmp_path)
    broker.cluster_id = "-0JwesCKROWfVOcIxUEMhw"  # one a test run drew: the tool took it for an option
    broker.format()
    assert "cluster.id=-0JwesCKROWfVOcIxUEMhw" in (broker.log_dir / "meta.properties").read_text().splitlines()
