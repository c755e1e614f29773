"""pylog tiers, pylog restores, Kafka opens: the partition directory ``pylog tiered pull``
rebuilds from tiered segments goes into a broker's log dir (under the topic id the broker gave
the topic, as a restore into another cluster must), and the restarted broker serves exactly
the records that were tiered, then appends after them."""

from __future__ import annotations

import shutil

from pylog import LogManager
from pylog.checkpoint import read_partition_metadata, write_partition_metadata
from pylog.remote.restore import pull

TIERED = {"remote_storage_enable": True, "segment_bytes": 1024}


def test_kafkas_broker_serves_a_partition_pylog_restored_from_tiered_segments(kafka_broker_factory, tmp_path):
    root, url = tmp_path / "pylog", (tmp_path / "bucket").as_uri()
    with LogManager(root, remote_storage=url, remote_log_metadata_topic_num_partitions=1) as m:
        topic = m.create_topic("restored", config=TIERED)
        for i in range(30):
            topic.append([(b"key-%d" % i, b"value-%d" % i)])
        m.tier()
    [restored] = pull(url, tmp_path / "restored", remote_log_metadata=root)
    expected = [{"offset": o, "key": f"key-{o}", "value": f"value-{o}"} for o in range(restored.log_end_offset)]
    assert restored.base_offsets[0] == 0 and restored.log_end_offset > 10

    broker = kafka_broker_factory()
    broker.create_topic("restored")
    broker.stop()
    target = broker.partition_dir("restored", 0)
    topic_id = read_partition_metadata(target / "partition.metadata")["topic_id"]
    shutil.rmtree(target)
    shutil.copytree(restored.path, target)
    write_partition_metadata(target / "partition.metadata", topic_id)
    broker.start()

    consumed = broker.clients("consume", "--topic", "restored", "--partition", "0")
    assert [{k: c[k] for k in ("offset", "key", "value")} for c in consumed] == expected
    [ack] = broker.clients("produce", lines=[{"topic": "restored", "partition": 0, "key": "k", "value": "after"}])
    assert ack["offset"] == restored.log_end_offset
