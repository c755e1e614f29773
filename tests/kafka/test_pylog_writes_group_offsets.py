"""Offsets that pylog's ``Consumer`` commits into a Kafka broker's ``__consumer_offsets``
while the broker is down are the broker's committed offsets once it is back: Kafka's
``kafka-consumer-groups --describe`` prints what ``pylog consumer-groups --describe`` printed
(offsets, log end offsets, lag), and Kafka's admin client reads each commit's leader epoch as
the epoch of the last record consumed, as Kafka's own consumer commits it.

The session's broker, which has Kafka's default of 50 ``__consumer_offsets`` partitions that
pylog's coordinators assume (docs/faq.md, "internal topics").
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from pylog.clients import Consumer, TopicPartition

READ_BACK = "io.pylog.interop.writes.ReadBack"
TOPIC = "pg-events"
RECORDS_PER_PARTITION = 4


def pylog_cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pylog", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def consume_and_commit(root: str, group: str, counts: dict[int, int], *, subscribe: bool) -> None:
    """pylog's consumer of ``group`` reads ``counts[partition]`` records of each partition
    from the start and commits its positions (assigned, or as a subscribed member)."""
    got: dict[int, int] = {p: 0 for p in counts}
    with Consumer(root, group, auto_offset_reset="earliest", enable_auto_commit=False,
                  max_poll_records=1) as consumer:
        if subscribe:
            consumer.subscribe([TOPIC])
        else:
            consumer.assign([TopicPartition(TOPIC, p) for p in counts])

        deadline_s = time.monotonic() + 60
        while got != counts:  # one record a poll: each partition is paused at its count
            assert time.monotonic() < deadline_s, f"{group} read {got} of {counts} within 60 s"
            for tp, records in consumer.poll(timeout_ms=100).items():
                got[tp.partition] += len(records)
                if got[tp.partition] == counts[tp.partition]:
                    consumer.pause(tp)
        consumer.commit()


@pytest.fixture(scope="module")
def committed(kafka_broker):
    broker = kafka_broker
    broker.create_topics([{"topic": TOPIC, "partitions": 2}])
    broker.clients("produce", lines=[{"topic": TOPIC, "partition": p, "key": f"k{i}", "value": f"v{p}-{i}"}
                                     for p in (0, 1) for i in range(RECORDS_PER_PARTITION)])
    # Kafka's consumer commits first: its coordinator creates __consumer_offsets
    broker.clients("commit", "--group", "kafka-g", "--tp", f"{TOPIC}:0:1")
    broker.stop()

    root = str(broker.log_dir)
    consume_and_commit(root, "pylog-assigned", {0: 3, 1: 1}, subscribe=False)
    consume_and_commit(root, "pylog-subscribed", {0: 2, 1: 4}, subscribe=True)
    described = {g: pylog_cli("consumer-groups", root, "--describe", "--group", g)
                 for g in ("pylog-assigned", "pylog-subscribed")}
    broker.start()
    return broker, described


def test_kafka_consumer_groups_describes_pylogs_offsets_and_lag(committed):
    broker, described = committed
    kafkas = dict(zip(described, broker.admin_many([("consumer-groups", "--describe", "--group", g)
                                                    for g in described])))  # in one JVM
    for group, ours in described.items():
        theirs = kafkas[group]
        assert theirs.returncode == 0, theirs.stderr
        assert theirs.stdout == ours.stdout, group
        assert theirs.stderr.strip().splitlines()[-1:] == ours.stderr.strip().splitlines()[-1:], group


def test_kafka_reads_the_leader_epoch_of_the_last_record_consumed_in_pylogs_commits(committed):
    broker, _ = committed
    done = broker.admin(READ_BACK, "read", "--partition", f"{TOPIC}:0", "--partition", f"{TOPIC}:1",
                        "--group", "pylog-assigned", "--group", "pylog-subscribed")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    epoch_at = {(r["partition"], r["offset"]): r["leaderEpoch"]
                for r in lines if r.get("isolation") == "read_uncommitted"}
    commits = {(c["group"], c["partition"]): (c["offset"], c["leaderEpoch"]) for c in lines if "group" in c}
    assert {k: offset for k, (offset, _) in commits.items()} == {
        ("pylog-assigned", 0): 3, ("pylog-assigned", 1): 1, ("pylog-subscribed", 0): 2, ("pylog-subscribed", 1): 4}
    for (group, partition), (offset, epoch) in commits.items():
        assert epoch is not None and epoch == epoch_at[(partition, offset - 1)], (group, partition)
