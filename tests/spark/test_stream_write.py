"""``writeStream.format("pylog")``: a task's write of a micro-batch, exactly once
(pylog/spark/stream_write.py), first without Spark, then in streaming queries."""

from __future__ import annotations

import pytest

from pylog import LogManager, Producer
from pylog.errors import ProducerFencedError
from pylog.log import Log
from pylog.spark.stream_write import MARKER_TOPIC, batches_written, sink_group, transactional_id, write_task

pa = pytest.importorskip("pyarrow")

pytestmark = pytest.mark.spark

QUERY = "5c1a2d3e-0000-4000-8000-000000000001"


def rows(*values: str):
    return [pa.RecordBatch.from_pydict({"value": [v.encode() for v in values]})]


def write(root, values, *, batch: int, partition: int = 0, exactly_once: bool = True) -> int:
    return write_task(rows(*values), root=str(root), topic="out", partitions=1, query_id=QUERY, batch_id=batch,
                      partition_id=partition, exactly_once=exactly_once)


def committed_values(root, topic: str = "out") -> list[str]:
    out = []
    with LogManager(str(root), read_only=True) as manager:
        for p in manager.partitions(topic):
            with Log.open(root / f"{topic}-{p}", read_only=True) as log:
                out += [r.value.decode() for r in log.records(isolation="committed")]
    return sorted(out)


def test_a_replayed_micro_batch_adds_nothing(tmp_path):
    assert write(tmp_path, ["a", "b", "c"], batch=0) == 3
    assert batches_written(str(tmp_path), QUERY, 0) == 1
    assert write(tmp_path, ["a", "b", "c"], batch=0) == 0
    assert write(tmp_path, ["d"], batch=1) == 1
    assert write(tmp_path, ["d"], batch=1) == 0
    assert committed_values(tmp_path) == ["a", "b", "c", "d"]


def test_partitions_of_a_query_keep_their_own_markers(tmp_path):
    write(tmp_path, ["a"], batch=0, partition=0)
    assert batches_written(str(tmp_path), QUERY, 1) == 0
    assert write(tmp_path, ["b"], batch=0, partition=1) == 1
    assert committed_values(tmp_path) == ["a", "b"]


def test_a_zombie_attempt_is_fenced_and_its_rows_never_show(tmp_path):
    zombie = Producer(str(tmp_path), transactional_id=transactional_id(QUERY, 0))
    zombie.begin_transaction()
    zombie.send("out", b"zombie", partition=0)
    zombie.flush()
    assert write(tmp_path, ["a"], batch=0) == 1  # the new attempt fences the zombie, aborting its transaction
    with pytest.raises(ProducerFencedError):
        zombie.send_offsets_to_transaction({(MARKER_TOPIC, 0): 1}, sink_group(QUERY))
    zombie.close()
    assert committed_values(tmp_path) == ["a"]


def test_a_marker_committed_behind_another_tasks_open_transaction_is_found(tmp_path):
    """The markers of a query share one ``__consumer_offsets`` partition, whose committed
    view stops at an open transaction: partition 1's task is still writing when
    partition 0's commits after it. A read of that view alone finds no marker for
    partition 0, and a replay of partition 0 would append its rows again."""
    other = Producer(str(tmp_path), transactional_id=transactional_id(QUERY, 1))
    other.begin_transaction()
    other.send("out", b"x", partition=0)
    other.send_offsets_to_transaction({(MARKER_TOPIC, 1): 1}, sink_group(QUERY))  # open, in the same partition
    assert write(tmp_path, ["a"], batch=0, partition=0) == 1
    assert batches_written(str(tmp_path), QUERY, 0) == 1
    assert write(tmp_path, ["a"], batch=0, partition=0) == 0
    other.commit_transaction()
    other.close()
    assert committed_values(tmp_path) == ["a", "x"]
    assert batches_written(str(tmp_path), QUERY, 1) == 1


def test_an_aborted_attempt_leaves_no_marker(tmp_path):
    aborted = Producer(str(tmp_path), transactional_id=transactional_id(QUERY, 0))
    aborted.begin_transaction()
    aborted.send("out", b"lost", partition=0)
    aborted.send_offsets_to_transaction({(MARKER_TOPIC, 0): 1}, sink_group(QUERY))
    aborted.abort_transaction()
    aborted.close()
    assert batches_written(str(tmp_path), QUERY, 0) == 0
    assert write(tmp_path, ["a"], batch=0) == 1
    assert committed_values(tmp_path) == ["a"]


def test_at_least_once_appends_a_replay_again(tmp_path):
    """The control of the tests above: without the transaction and its marker, a
    replayed micro-batch is appended twice (Spark's Kafka sink's guarantee)."""
    write(tmp_path, ["a"], batch=0, exactly_once=False)
    write(tmp_path, ["a"], batch=0, exactly_once=False)
    assert committed_values(tmp_path) == ["a", "a"]


# -- in a streaming query -------------------------------------------------------------------


def _input(root, n: int, partitions: int = 2) -> list[str]:
    """Topic ``in``: records ``v<i>`` keyed ``k<i>``; returns their values."""
    with LogManager(str(root)) as manager:
        manager.create_topic("in", partitions)
    with Producer(str(root)) as producer:
        for i in range(n):
            producer.send("in", f"v{i}".encode(), key=f"k{i}".encode())
    return [f"v{i}" for i in range(n)]


def test_a_stream_from_pylog_through_a_transform_into_pylog(spark, tmp_path):
    """Keys, headers and the partition column go through as the batch writer takes them."""
    root = tmp_path / "root"
    values = _input(root, 30)
    q = (spark.readStream.format("pylog").option("subscribe", "in").option("startingOffsets", "earliest")
         .option("includeHeaders", "true").option("maxOffsetsPerTrigger", 10).load(str(root))
         .selectExpr("key", "upper(cast(value as string)) as value", "headers", "partition % 2 as partition")
         .writeStream.format("pylog").option("topic", "out").option("partitions", 2)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start(str(root)))
    q.awaitTermination()
    assert q.exception() is None
    assert committed_values(root) == sorted(v.upper() for v in values)
    with LogManager(str(root), read_only=True) as manager:
        assert manager.partitions("out") == [0, 1]
    with Log.open(root / "in-1", read_only=True) as log:
        keys_in_1 = {r.key for r in log.records()}
    with Log.open(root / "out-1", read_only=True) as log:
        assert {r.key for r in log.records(isolation="committed")} == keys_in_1
    assert batches_written(str(root), q.id, 0) == q.lastProgress["batchId"] + 1  # each micro-batch's marker


def test_a_bad_delivery_guarantee_names_the_option(spark, tmp_path):
    df = spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")
    with pytest.raises(Exception, match="deliveryGuarantee"):
        (df.writeStream.format("pylog").option("topic", "out").option("deliveryGuarantee", "twice")
         .option("checkpointLocation", str(tmp_path / "ckpt")).start(str(tmp_path / "root"))).awaitTermination(60)
