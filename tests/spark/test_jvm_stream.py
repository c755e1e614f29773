"""``readStream.format("pylog")`` on the JVM reader (``PylogStream.java``): micro-batches of
appends, Spark's admission control (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` with
``maxTriggerDelay``, ``Trigger.AvailableNow``), read_committed, data loss, and checkpoints
that either reader restarts from (the Python source, ``reader=python``, being the fallback)."""

from __future__ import annotations

import datetime
import json
import re

import pytest

from pylog import Log, LogManager
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JVM, PYTHON = "pylog (JVM stream)", "PythonMicroBatchStream"


@pytest.fixture(autouse=True)
def jvm_reader(spark):
    from pylog.spark import jar_path
    if jar_path(build=False) is None:
        pytest.skip("no JVM reader: pylog's jar cannot be built here (no JDK)")


def _topic(root, records: int, partitions: int = 2, *, start: int = 0) -> None:
    """``records`` more records of topic ``s`` (created with ``partitions``), spread round robin."""
    with LogManager(root) as m:
        t = m.topic("s") if "s" in m.topics() else m.create_topic("s", partitions)
        for p in range(partitions):
            values = [b"v%d" % i for i in range(start, start + records) if i % partitions == p]
            if values:
                t.log(p).append(values)


def _stream(spark, root, reader="auto", **options):
    reader_options = {"startingOffsets": "earliest", "reader": reader, **options}
    return spark.readStream.format("pylog").options(**reader_options).load(str(root))


def _description(q) -> str:
    return q.recentProgress[-1]["sources"][0]["description"]


def _available_now(spark, root, ckpt, out, reader="auto", **options):
    """One ``Trigger.AvailableNow`` run into a parquet sink (exactly once) at ``out``; the query."""
    q = (_stream(spark, root, reader, **options).select("partition", "offset", "value").writeStream
         .format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    return q


def _written(spark, out) -> list[tuple[int, int]]:
    """(partition, offset) of every row a parquet sink holds, sorted (duplicates kept)."""
    return sorted((r.partition, r.offset) for r in spark.read.parquet(str(out)).collect())


def test_a_stream_reads_appends_across_micro_batches_on_the_jvm(spark, tmp_path):
    root = tmp_path / "root"
    _topic(root, 10)
    got = []
    q = (_stream(spark, root).writeStream
         .foreachBatch(lambda df, _: got.extend(sorted((r.partition, r.offset, r.value) for r in df.collect())))
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        wait_until(lambda: len(got) == 10, "the first 10 records", 120)
        _topic(root, 7, start=10)
        wait_until(lambda: len(got) == 17, "the 7 appended records", 120)
        wait_until(lambda: sum(p["numInputRows"] for p in q.recentProgress) == 17, "their progress reports", 60)
        assert _description(q).startswith(JVM), _description(q)
        assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 2
    finally:
        q.stop()
    assert sorted(v for _, _, v in got) == sorted(b"v%d" % i for i in range(17))
    assert len({(p, o) for p, o, _ in got}) == 17


def test_reader_jvm_refuses_a_stream_option_only_the_python_source_reads(spark, tmp_path):
    root = tmp_path / "root"
    _topic(root, 1)
    with pytest.raises(Exception, match="option groupId is read by the Python stream only: drop option reader=jvm"):
        q = (_stream(spark, root, "jvm", groupId="g").writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        q.awaitTermination(120)


@pytest.mark.parametrize("option, value, said", [
    ("maxTriggerDelay", "soon", "option maxTriggerDelay must be a duration such as 15m, 30s or 500ms, got 'soon'"),
    ("maxOffsetsPerTrigger", "0", "option maxOffsetsPerTrigger must be at least 1, got 0"),
])
def test_bad_admission_options_fail_the_jvm_stream_as_the_python_source_says(spark, tmp_path, option, value, said):
    root = tmp_path / "root"
    _topic(root, 1)
    with pytest.raises(Exception, match=re.escape(said)):
        q = (_stream(spark, root, "jvm", **{option: value}).writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        q.awaitTermination(120)


def test_max_offsets_per_trigger_splits_the_backlog_into_capped_micro_batches(spark, tmp_path):
    root = tmp_path / "root"
    _topic(root, 200)
    q = _available_now(spark, root, tmp_path / "ckpt", tmp_path / "out", maxOffsetsPerTrigger="60")
    rows = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert rows == [60, 60, 60, 20], rows
    assert _description(q).startswith(JVM)
    assert _written(spark, tmp_path / "out") == [(p, o) for p in (0, 1) for o in range(100)]


def test_available_now_stops_at_the_end_it_saw_at_its_start(spark, tmp_path):
    """Records appended while an AvailableNow query runs are left for the next run."""
    root = tmp_path / "root"
    _topic(root, 40)
    got = []

    def batch(df, batch_id):
        got.extend(r.offset for r in df.collect())
        if batch_id == 0:
            _topic(root, 30, start=40)

    q = (_stream(spark, root, maxOffsetsPerTrigger="10").writeStream.foreachBatch(batch)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    assert len(got) == 40 and sorted(got) == sorted(list(range(20)) * 2)
    with LogManager(root, read_only=True) as m:
        assert [m.log("s", p).log_end_offset for p in (0, 1)] == [35, 35]


def test_min_offsets_per_trigger_waits_for_enough_new_records(spark, tmp_path):
    """minOffsetsPerTrigger with a long maxTriggerDelay: the first trigger reads the backlog,
    then triggers skip while fewer new records exist (the idle progress reports see them at
    the latest offset, unread), and the trigger after the threshold is reached reads them all
    in one micro-batch."""
    root = tmp_path / "root"
    _topic(root, 10)
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    try:
        q = (_stream(spark, root, minOffsetsPerTrigger="100", maxTriggerDelay="1h").writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    try:
        wait_until(lambda: any(p["numInputRows"] == 10 for p in q.recentProgress), "the first micro-batch", 120)
        _topic(root, 60, start=10)

        def seen_unread():
            source = q.lastProgress["sources"][0]
            latest = source["latestOffset"]
            latest = json.loads(latest) if isinstance(latest, str) else latest
            return latest is not None and sum(latest["s"].values()) == 70
        wait_until(seen_unread, "a trigger that saw the 60 new records", 120)
        assert sum(p["numInputRows"] for p in q.recentProgress) == 10
        _topic(root, 40, start=70)
        wait_until(lambda: sum(p["numInputRows"] for p in q.recentProgress) == 110, "the 100 new records", 120)
        assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [10, 100]
    finally:
        q.stop()


def test_max_trigger_delay_fires_a_micro_batch_below_the_minimum(spark, tmp_path):
    """Fewer new records than the minimum are read once maxTriggerDelay (10 s) has passed
    since the last micro-batch, not before. The times are the triggers' starts in the
    progress reports: a trigger starts just before it asks for the latest offsets, which is
    when the delay is counted from and checked."""
    root = tmp_path / "root"
    _topic(root, 10)
    q = (_stream(spark, root, minOffsetsPerTrigger="1000", maxTriggerDelay="10s").writeStream.format("noop")
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in q.recentProgress) == 10, "the first micro-batch", 120)
        _topic(root, 5, start=10)
        wait_until(lambda: sum(p["numInputRows"] for p in q.recentProgress) == 15, "the 5 new records", 120)
        batches = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    assert [p["numInputRows"] for p in batches] == [10, 5]
    started = [datetime.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")) for p in batches]
    assert (started[1] - started[0]).total_seconds() >= 9.5  # held back (less a planner request) until 10 s


@pytest.mark.parametrize("first, second", [("jvm", "python"), ("python", "jvm")])
def test_a_checkpoint_written_by_one_reader_restarts_with_the_other(spark, tmp_path, first, second):
    """Each record once in the sink whichever reader wrote the checkpoint; the offsets are
    written in one format, so a restart with no new record runs no micro-batch."""
    root, ckpt, out = tmp_path / "root", tmp_path / "ckpt", tmp_path / "out"
    appended = 0
    for n, (reader, more) in enumerate([(first, 50), (second, 30), (first, 0)]):
        _topic(root, more, start=appended)
        appended += more
        q = _available_now(spark, root, ckpt, out, reader, maxOffsetsPerTrigger="40")
        if more:
            assert (JVM if reader == "jvm" else PYTHON) in _description(q), _description(q)
            assert sum(p["numInputRows"] for p in q.recentProgress) == more
        else:
            assert not [p for p in q.recentProgress if p["numInputRows"]], "a restart with nothing new read something"
    written = _written(spark, out)
    assert written == sorted(set(written)) and len(written) == 80
    for path in sorted(p for p in (ckpt / "offsets").iterdir() if p.name.isdigit()):
        line = path.read_text().splitlines()[-1]
        assert line == json.dumps(json.loads(line)), f"{path}: {line}"


def test_read_committed_leaves_out_aborted_transactions_and_stops_at_an_open_one(spark, tmp_path):
    root = tmp_path / "txn"
    with Log.open(root / "t-0") as log:
        log.append([b"plain"])
        log.append([b"aborted-1", b"aborted-2"], producer_id=9, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(9, 0, commit=False)
        log.append([b"kept"], producer_id=9, producer_epoch=0, base_sequence=2, is_transactional=True)
        log.append_txn_marker(9, 0, commit=True)
        log.append([b"open"], producer_id=10, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append([b"after"])
    got = []
    q = (_stream(spark, root, isolationLevel="read_committed").writeStream
         .foreachBatch(lambda df, _: got.extend(r.value for r in df.collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert _description(q).startswith(JVM)
    assert sorted(got) == [b"kept", b"plain"]


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_offsets_removed_under_a_stream_fail_it_naming_the_first_missing_one(spark, tmp_path, fail_on_data_loss):
    """A stream read offsets 0-9; then 30 more were appended, records before 25 deleted (their
    segments with them) and 10 more appended: the restart fails naming offsets 10 to 24, or
    with failOnDataLoss=false reads on from 25."""
    root, ckpt, out = tmp_path / "root", tmp_path / "ckpt", tmp_path / "out"
    with LogManager(root, segment_bytes=200) as m:
        log = m.create_topic("t", 1).log(0)
        for i in range(10):
            log.append([b"v%d" % i])

    _available_now(spark, root, ckpt, out, failOnDataLoss=fail_on_data_loss)
    with LogManager(root, segment_bytes=200) as m:
        log = m.log("t", 0)
        for i in range(10, 40):
            log.append([b"v%d" % i])
        log.delete_records(25)
        log.append([b"v%d" % i for i in range(40, 50)])
    assert min(int(f.name.split(".")[0]) for f in (root / "t-0").glob("*.log")) >= 20  # the segments went too
    if fail_on_data_loss == "true":
        message = _failing(spark, root, ckpt, out)
        assert "t-0: offsets 10 to 24 were removed before the stream read them" in message, message
        assert "the log now starts at 25" in message and "failOnDataLoss=false" in message, message
    else:
        _available_now(spark, root, ckpt, out, failOnDataLoss=fail_on_data_loss)
        assert [o for _, o in _written(spark, out)] == list(range(10)) + list(range(25, 50))


def _failing(spark, root, ckpt, out) -> str:
    """The error of an AvailableNow run of the JVM stream that must fail."""
    q = (_stream(spark, root).select("partition", "offset", "value").writeStream.format("parquet")
         .option("path", str(out)).option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    with pytest.raises(Exception) as failed:
        q.awaitTermination(300)
    return str(failed.value)
