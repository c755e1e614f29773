"""Kafka tiers, pylog restores: ``pylog tiered pull`` of the segments a real broker copied with
Kafka's reference LocalTieredStorage (tests/kafka/tiered_by_kafka.py), with the broker's
``__remote_log_metadata``, rebuilds partition directories that pylog verifies clean and that
hold exactly the records Kafka's consumer read from the tiered range, transaction markers and
aborted transactions included."""

from __future__ import annotations

import pytest

from pylog import Log
from pylog.remote.restore import pull
from tests.cli.test_cli import pylog
from tests.kafka import tiered_by_kafka as scenario


@pytest.fixture(scope="module")
def tiered(kafka_module_broker_factory, tmp_path_factory) -> scenario.TieredByKafka:
    storage_root = tmp_path_factory.mktemp("local-tiered-storage")
    broker = kafka_module_broker_factory(**scenario.server_properties(storage_root))
    return scenario.tier(broker)


def test_pull_of_kafkas_local_tiered_storage_holds_what_kafkas_consumer_read(tiered, tmp_path):
    dest = tmp_path / "restored"
    restored = pull(tiered.storage_dir.as_uri(), dest, remote_log_metadata=tiered.broker.log_dir)
    assert [(r.topic, r.partition) for r in restored] == [(scenario.TOPIC, p) for p in scenario.PARTITIONS]
    for r in restored:
        kafka = [(c["offset"], c["key"], c["value"]) for c in tiered.records[r.partition]
                 if c["offset"] < r.log_end_offset]
        committed = [c["offset"] for c in tiered.committed[r.partition] if c["offset"] < r.log_end_offset]
        with Log.open(r.path, read_only=True) as log:
            assert [(rec.offset, rec.key, rec.value) for rec in log.records()] == kafka
            assert [rec.offset for rec in log.records(isolation="committed")] == committed
        [local] = scenario.local_logs(tiered.broker, r.partition)  # what Kafka kept: the rest follows on
        assert r.log_end_offset == int(local.stem) > 0
    out = pylog("verify", dest)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
