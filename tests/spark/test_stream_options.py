"""The Python streaming source's Kafka options: ``minOffsetsPerTrigger`` and
``maxTriggerDelay`` (Spark's meaning), ``Trigger.AvailableNow`` with ``maxOffsetsPerTrigger``,
``startingOffsets="group"`` with ``groupId``, and ``commitOffsetsToGroup`` (each committed
micro-batch's end becomes the group's offsets, shown by ``pylog consumer-groups``).

The admission rules are pinned on the stream reader itself (real logs, no session); the
rest runs streams on the shared local SparkSession."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time

import pytest

from pylog import LogManager
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.errors import InvalidConfigError
from pylog.spark.options import parse_read_options
from pylog.spark.plan import capped_offsets
from tests.waiting import wait_until

pyspark = pytest.importorskip("pyspark")
from pylog.spark.source import PylogStreamReader  # noqa: E402  (needs pyspark)


def _log_dir(tmp_path, records: int, partitions: int = 1):
    root = tmp_path / "log"
    with LogManager(root) as m:
        t = m.create_topic("s", partitions)
        for p in range(partitions):
            t.log(p).append([b"v%d" % i for i in range(records)])
    return root


def _append(root, count: int, partition: int = 0) -> None:
    with LogManager(root) as m:
        m.topic("s").log(partition).append([b"late%d" % i for i in range(count)])


def _reader(root, **options) -> PylogStreamReader:
    return PylogStreamReader(parse_read_options({"path": str(root), **options}, streaming=True))


def test_min_offsets_per_trigger_skips_triggers_until_enough_are_new_then_max_caps(tmp_path):
    root = _log_dir(tmp_path, 30)
    reader = _reader(root, startingOffsets="earliest", minOffsetsPerTrigger="50", maxOffsetsPerTrigger="40",
                     maxTriggerDelay="1h")
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    assert start == {"s": {"0": 0}}
    first = reader.latestOffset(start, limit)
    assert first == {"s": {"0": 30}}  # the first trigger fires, as in Spark's Kafka source
    _append(root, 20)
    assert reader.latestOffset(first, limit) == first  # 20 new < 50: skipped
    _append(root, 40)
    assert reader.latestOffset(first, limit) == {"s": {"0": 70}}  # 60 new >= 50, capped at 40


def test_max_offsets_split_by_backlog_one_each_in_partition_number_order_while_the_budget_lasts():
    start = {"t": {str(p): 0 for p in range(12)}}
    one_each = {"t": {str(p): 1 for p in range(12)}}
    assert capped_offsets(start, one_each, 5) == {"t": {str(p): int(p < 5) for p in range(12)}}  # 0-4, not 0, 1, 10, 11, 2
    by_backlog = {"t": {"0": 0, "1": 30, "2": 10}}
    assert capped_offsets({}, by_backlog, 20) == {"t": {"0": 0, "1": 15, "2": 5}}
    assert capped_offsets({}, by_backlog, 40) == by_backlog  # within the budget: uncapped


def test_max_trigger_delay_fires_a_trigger_below_the_minimum_once_it_has_passed(tmp_path):
    root = _log_dir(tmp_path, 5)
    reader = _reader(root, startingOffsets="earliest", minOffsetsPerTrigger="1000", maxTriggerDelay="300ms")
    limit = reader.getDefaultReadLimit()
    start = reader.latestOffset(reader.initialOffset(), limit)  # the first trigger fires
    fired_at = time.monotonic()
    _append(root, 3)
    assert reader.latestOffset(start, limit) == start
    wait_until(lambda: reader.latestOffset(start, limit) != start, "the delayed trigger")
    assert time.monotonic() - fired_at >= 0.3
    assert reader.latestOffset(start, limit) == start  # it fired: the delay counts again from there


def test_available_now_ignores_the_minimum_caps_each_batch_and_ends_at_its_start(tmp_path):
    root = _log_dir(tmp_path, 25)
    reader = _reader(root, startingOffsets="earliest", minOffsetsPerTrigger="1000", maxOffsetsPerTrigger="10")
    reader.prepareForTriggerAvailableNow()
    _append(root, 50)  # after the query started: not for this run
    limit, offset, ends = reader.getDefaultReadLimit(), reader.initialOffset(), []
    while (nxt := reader.latestOffset(offset, limit)) != offset:
        ends.append(nxt["s"]["0"])
        offset = nxt
    assert ends == [10, 20, 25]


def test_group_and_duration_options_are_checked():
    with pytest.raises(InvalidConfigError, match='startingOffsets="group" needs option groupId'):
        parse_read_options({"path": "/x", "startingOffsets": "group"}, streaming=True)
    with pytest.raises(InvalidConfigError, match="startingOffsets=group is for streaming queries only"):
        parse_read_options({"path": "/x", "startingOffsets": "group", "groupId": "g"})
    with pytest.raises(InvalidConfigError, match="commitOffsetsToGroup is for streaming queries only"):
        parse_read_options({"path": "/x", "commitOffsetsToGroup": "g"})
    with pytest.raises(InvalidConfigError, match="maxTriggerDelay must be a duration such as 15m"):
        parse_read_options({"path": "/x", "maxTriggerDelay": "soon"}, streaming=True)
    with pytest.raises(InvalidConfigError, match="minOffsetsPerTrigger must be at least 1"):
        parse_read_options({"path": "/x", "minOffsetsPerTrigger": "0"}, streaming=True)
    assert parse_read_options({"path": "/x"}, streaming=True).max_trigger_delay_ms == 15 * 60_000


@pytest.mark.parametrize("options, named", [({"startingOffsets": "group", "groupId": "g"}, 'startingOffsets="group"'),
                                            ({"commitOffsetsToGroup": "g"}, "commitOffsetsToGroup")])
def test_a_stream_using_a_group_needs_a_local_log_dir(options, named):
    from pylog.spark.source import PylogDataSource
    source = PylogDataSource({"path": "s3://bucket/log", **options})
    with pytest.raises(InvalidConfigError, match=f"option {named} needs a local log dir"):
        source.streamReader(None)


# -- on a SparkSession -----------------------------------------------------------------------

def _stream(spark, root, **options):
    reader = spark.readStream.format("pylog").option("reader", "python")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(root))


def _run_available_now(spark, df, ckpt) -> list[list[int]]:
    """Run ``df`` with Trigger.AvailableNow to its end; the offsets of each micro-batch."""
    batches = []
    q = (df.writeStream.foreachBatch(lambda d, _: batches.append(sorted(r.offset for r in d.select("offset").collect())))
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    return [b for b in batches if b]


@pytest.mark.spark
def test_available_now_with_the_python_reader_splits_by_max_and_ignores_the_minimum(spark, tmp_path):
    root = _log_dir(tmp_path, 100)
    df = _stream(spark, root, startingOffsets="earliest", maxOffsetsPerTrigger="30", minOffsetsPerTrigger="1000")
    batches = _run_available_now(spark, df, tmp_path / "ckpt")
    assert [len(b) for b in batches] == [30, 30, 30, 10]
    assert sum(batches, []) == list(range(100))


@pytest.mark.spark
def test_a_trigger_below_min_offsets_waits_for_max_trigger_delay(spark, tmp_path):
    """The first trigger fires; 10 records appended after it are fewer than the minimum
    (25), so the next micro-batch waits for maxTriggerDelay (4 s) after the first fired;
    30 records appended then are enough, and fire without waiting."""
    root = _log_dir(tmp_path, 10)
    seen = []

    def on_batch(df, batch_id):
        offsets = sorted(r.offset for r in df.select("offset").collect())
        if offsets:
            seen.append((datetime.datetime.now(datetime.timezone.utc), offsets))
            _append(root, 10 if len(seen) == 1 else 30)

    q = (_stream(spark, root, startingOffsets="earliest", minOffsetsPerTrigger="25", maxTriggerDelay="4s")
         .writeStream.foreachBatch(on_batch).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="100 milliseconds").start())
    try:
        wait_until(lambda: len(seen) >= 3 or q.exception() is not None, "three micro-batches", timeout_s=300)
    finally:
        q.stop()
    assert q.exception() is None
    assert [o for _, o in seen[:3]] == [list(range(10)), list(range(10, 20)), list(range(20, 50))]
    first_trigger = datetime.datetime.fromisoformat(q.recentProgress[0]["timestamp"].replace("Z", "+00:00"))
    assert (seen[1][0] - first_trigger).total_seconds() >= 4  # it fired 4 s after the first, or later


def _describe(root, group: str) -> dict[int, tuple[int, int, int]]:
    """``pylog consumer-groups --describe``: ``{partition: (current, log end, lag)}`` of topic s."""
    out = subprocess.run([sys.executable, "-m", "pylog", "consumer-groups", str(root), "--describe", "--group", group],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[1] == "s":
            rows[int(cols[2])] = (int(cols[3]), int(cols[4]), int(cols[5]))
    return rows


@pytest.mark.spark
def test_commit_offsets_to_group_shows_the_querys_lag_and_a_group_start_resumes_there(spark, tmp_path):
    root = _log_dir(tmp_path, 40, partitions=2)
    df = _stream(spark, root, startingOffsets="earliest", maxOffsetsPerTrigger="25", commitOffsetsToGroup="orders-etl")
    batches = _run_available_now(spark, df, tmp_path / "ckpt")
    assert sum(len(b) for b in batches) == 80 and len(batches) >= 3
    assert _describe(root, "orders-etl") == {0: (40, 40, 0), 1: (40, 40, 0)}
    _append(root, 7, partition=1)
    assert _describe(root, "orders-etl") == {0: (40, 40, 0), 1: (40, 47, 7)}
    # a new query (a new checkpoint) starting from the group reads only what it had not
    df = _stream(spark, root, startingOffsets="group", groupId="orders-etl")
    assert _run_available_now(spark, df, tmp_path / "ckpt2") == [list(range(40, 47))]


@pytest.mark.spark
def test_a_group_start_takes_latest_where_the_group_committed_nothing(spark, tmp_path):
    root = _log_dir(tmp_path, 20, partitions=2)
    coordinator = GroupCoordinator.for_root(str(root))
    try:
        coordinator.commit_offsets("app", {("s", 0): 12})
    finally:
        coordinator.release()
    df = _stream(spark, root, startingOffsets="group", groupId="app")
    got = []
    q = (df.writeStream.foreachBatch(lambda d, _: got.extend((r.partition, r.offset) for r in d.collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert sorted(got) == [(0, o) for o in range(12, 20)]  # partition 1: latest (20), nothing to read
