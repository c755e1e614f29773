"""spark.read / df.write / readStream with format("pylog"), on a real local SparkSession."""

from __future__ import annotations

import json

import pytest

from pylog import LogManager, Record
from tests.conftest import needs_samples, sample_logs
from tests.record.expected import expected_rows

from tests.spark.conftest import read_with

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("spark-root")
    with LogManager(path, segment_bytes=20_000) as m:
        for topic, n in (("alpha", 3), ("beta", 2)):
            t = m.create_topic(topic, n)
            for p in range(n):
                log = t.log(p)
                for b in range(10):
                    log.append([Record(b"%s-%d-%d" % (topic.encode(), p, b * 50 + i), key=b"k%d" % i,
                                       timestamp=1_000_000 + b * 50 + i) for i in range(50)])
    return path


def test_reading_a_root_returns_every_record_once_with_kafkas_schema(spark, reader, root):
    df = read_with(spark, reader).load(str(root))
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType"]
    rows = df.select("topic", "partition", "offset", "value").collect()
    assert len(rows) == 5 * 500
    assert len({(r.topic, r.partition, r.offset) for r in rows}) == 2500
    for r in rows:
        assert r.value == b"%s-%d-%d" % (r.topic.encode(), r.partition, r.offset)
    assert df.rdd.getNumPartitions() >= 5


def test_subscribe_assign_and_offset_bounds(spark, reader, root):
    df = (read_with(spark, reader).option("subscribe", "beta")
          .option("startingOffsets", json.dumps({"beta": {"0": 100, "1": -2}}))
          .option("endingOffsets", json.dumps({"beta": {"0": 200, "1": -1}})).load(str(root)))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(100, 200)] + [(1, o) for o in range(500)]
    df = read_with(spark, reader).option("assign", '{"alpha":[2]}').load(str(root))
    assert {r.partition for r in df.select("partition").collect()} == {2}


def test_timestamp_bounds(spark, reader, root):
    df = (read_with(spark, reader).option("subscribe", "alpha").option("startingTimestamp", "1000450")
          .option("endingTimestamp", "1000460").load(str(root)))
    assert sorted(r.offset for r in df.collect() if r.partition == 0) == list(range(450, 460))


def test_min_partitions_splits_large_partitions(spark, reader, root):
    df = read_with(spark, reader).option("subscribe", "alpha").option("minPartitions", "9").load(str(root))
    assert df.rdd.getNumPartitions() >= 9
    assert df.count() == 1500
    df = read_with(spark, reader).option("subscribe", "alpha").option("maxRecordsPerPartition", "100").load(str(root))
    assert df.rdd.getNumPartitions() == 15 and df.count() == 1500


def test_bad_options_name_the_option(spark, reader, root):
    with pytest.raises(Exception, match="startingOffsets"):
        read_with(spark, reader).option("startingOffsets", "{not json").load(str(root)).count()
    with pytest.raises(Exception, match="bogusOption|bogusoption"):
        read_with(spark, reader).option("bogusOption", "1").load(str(root)).count()
    with pytest.raises(Exception, match="endingOffsets=earliest"):
        read_with(spark, reader).option("endingOffsets", "earliest").load(str(root)).count()
    with pytest.raises(Exception, match="no log dir"):
        read_with(spark, reader).load(str(root / "missing"))
    with pytest.raises(Exception, match=r"option subscribe names topics \['typo'\]"):  # not zero rows
        read_with(spark, reader).option("subscribe", "typo").load(str(root)).count()


def test_a_partition_directory_or_a_replica_set_root_fails_at_load_saying_what_to_load(spark, reader, tmp_path):
    """Not zero rows: a path that is a partition directory, or a directory of log dirs
    holding no partition, fails when the DataFrame is created, naming the log dir to load."""
    from pylog.replication import ReplicaSet
    with ReplicaSet(tmp_path / "rs", "orders-0", replicas=2) as rs:
        rs.append([b"a", b"b"], acks="all")
    with pytest.raises(Exception, match=r"holds no partitions but the log dirs broker-0, broker-1 .*broker-0\)"):
        read_with(spark, reader).load(str(tmp_path / "rs"))
    with pytest.raises(Exception, match=r"is a partition directory.*assign.*orders.*\[0\]"):
        read_with(spark, reader).load(str(tmp_path / "rs" / "broker-1" / "orders-0"))
    assert read_with(spark, reader).load(str(tmp_path / "rs" / "broker-1")).count() == 2
    (tmp_path / "empty").mkdir()
    assert read_with(spark, reader).load(str(tmp_path / "empty")).count() == 0  # a log dir with no topic yet


def test_the_log_dir_rule_holds_for_the_python_source_without_the_jar(tmp_path):
    """The rule both readers ask at load() (plan.require_log_dir), as the Python source
    applies it in a session without pylog's jar."""
    from pylog.errors import InvalidConfigError
    from pylog.spark.plan import require_log_dir
    with LogManager(tmp_path / "root") as m:
        m.create_topic("orders", 1).log(0).append([b"a"])
    require_log_dir(str(tmp_path / "root"))
    with pytest.raises(InvalidConfigError, match="is a partition directory"):
        require_log_dir(str(tmp_path / "root" / "orders-0"))
    with pytest.raises(InvalidConfigError, match="holds no partitions but the log dirs root"):
        require_log_dir(str(tmp_path))
    with pytest.raises(InvalidConfigError, match="no log dir at"):
        require_log_dir(str(tmp_path / "missing"))


@pytest.fixture(scope="module")
def root_with_internal_topics(tmp_path_factory):
    """A topic written in a transaction and read by a group that committed its offsets, so
    the log dir also holds __transaction_state and __consumer_offsets records."""
    from pylog.clients import Consumer, Producer, TopicPartition
    path = tmp_path_factory.mktemp("internal")
    with LogManager(path) as m:
        m.create_topic("orders", 1)
    with Producer(str(path), transactional_id="t") as producer:
        producer.begin_transaction()
        producer.send("orders", b"o1")
        producer.commit_transaction()
    with Consumer(str(path), "g", auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.poll(1000)
        consumer.commit()
    return path


def test_internal_topics_are_read_only_when_named_or_asked_for(spark, reader, root_with_internal_topics):
    """Kafka's exclude.internal.topics: all topics, or a pattern, means the user's topics."""
    root = str(root_with_internal_topics)

    def topics(**options):
        df = read_with(spark, reader)
        for k, v in options.items():
            df = df.option(k, v)
        return {r.topic for r in df.load(root).select("topic").distinct().collect()}
    assert topics() == {"orders"}
    assert topics(subscribePattern=".*") == {"orders"}
    assert topics(**{"kafka.exclude.internal.topics": "false"}) == {"orders", "__consumer_offsets",
                                                                      "__transaction_state"}
    assert topics(subscribe="__consumer_offsets") == {"__consumer_offsets"}
    with pytest.raises(Exception, match="kafka.exclude.internal.topics must be true or false"):
        read_with(spark, reader).option("kafka.exclude.internal.topics", "maybe").load(root).count()


@pytest.fixture(scope="module")
def samples_root(tmp_path_factory):
    """Every sample .log with an expected decoding, each as the only segment of its own
    topic ``s<n>`` in one root, so one query per reader reads them all; with the rows
    Kafka's decoder read from each (read once for both readers: 146,000 rows of JSON)."""
    import shutil
    root = tmp_path_factory.mktemp("samples")
    logs, wanted = [], []
    for log in sample_logs():
        rows = expected_rows(log)
        if not _offsets_rise(rows):
            continue
        (root / f"s{len(logs)}-0").mkdir()
        shutil.copy(log, root / f"s{len(logs)}-0" / log.name)
        logs.append(log)
        wanted.append([(e["offset"], e["key"], e["value_sha256"], e["timestamp"], e["headers"])
                       for e in rows if e["control_type"] is None])
    return root, logs, wanted


def _offsets_rise(rows) -> bool:
    """False for a fixture whose batches go back in offset (sessions concatenated into one
    file): not a segment, and pylog refuses to read it (``CorruptRecordError``)."""
    offsets = [e["offset"] for e in rows]
    return all(a < b for a, b in zip(offsets, offsets[1:]))


def _as_consumed(rows, start, end):
    """Expected rows as a consumer of offsets [start, end) gets them: in range and rising
    (a few fixtures hold offsets below their segment's base or going backwards)."""
    out = []
    for r in rows:
        if start <= r[0] < end and (not out or r[0] > out[-1][0]):
            out.append(r)
    return out


@needs_samples
def test_every_kafka_sample_read_through_spark_matches_kafkas_decoder(spark, reader, samples_root):
    from pylog.spark.jvm.plan import plan_request
    root, logs, wanted = samples_root
    ranges = {r[0]: r[2:4] for r in plan_request({"options": {"path": str(root)}})["ranges"]}
    df = read_with(spark, reader).option("includeHeaders", "true").load(str(root))
    got = {}
    table = df.selectExpr("topic", "offset", "base64(key) as key", "sha2(value, 256) as sha",
                          "unix_millis(timestamp) as ms",
                          "transform(headers, h -> array(h.key, base64(h.value))) as headers").toArrow()
    for topic, *row in zip(*(table.column(c).to_pylist() for c in table.column_names)):  # Arrow: 2x collect()'s speed
        got.setdefault(topic, []).append(tuple(row))
    for n, log in enumerate(logs):
        want = _as_consumed(wanted[n], *ranges.get(f"s{n}", (0, 0)))
        assert want or f"s{n}" not in ranges
        assert sorted(got.get(f"s{n}", [])) == want, log
    assert df.count() == sum(map(len, got.values()))  # no record column: batch headers only
    table = df.select("topic", "offset").toArrow()
    offsets = sorted(zip(table.column("topic").to_pylist(), table.column("offset").to_pylist()))
    assert offsets == sorted((t, row[0]) for t, rows in got.items() for row in rows)


def test_write_then_read_back(spark, tmp_path):
    root = tmp_path / "out"
    data = [(b"key-%d" % i, b"value-%d" % i) for i in range(300)]
    df = spark.createDataFrame(data, "key binary, value binary").repartition(3)
    df.write.format("pylog").mode("append").option("topic", "written").option("partitions", "4").save(str(root))
    back = spark.read.format("pylog").load(str(root)).collect()
    assert sorted((r.key, r.value) for r in back) == sorted(data)
    from pylog.partitioner import partition_for_key
    assert all(r.partition == partition_for_key(r.key, 4) for r in back)
    assert not list((root / ".pylog-staging").glob("*/*"))


def test_a_write_naming_a_partition_the_topic_lacks_fails_before_commit(spark, tmp_path):
    root = tmp_path / "out"
    with LogManager(root) as m:
        m.create_topic("two", 2).append([(None, b"before")])
    df = spark.createDataFrame([(b"v%d" % i, (0, 1, 4)[i % 3]) for i in range(30)], "value binary, partition int")
    with pytest.raises(Exception, match="names partition 4 of topic 'two'"):
        df.write.format("pylog").mode("append").option("topic", "two").save(str(root))
    assert spark.read.format("pylog").load(str(root)).count() == 1
    assert not list((root / ".pylog-staging").glob("*/*"))


def test_a_write_creating_a_topic_makes_it_with_a_partition_for_every_row(spark, tmp_path):
    """Rows naming partitions 0 and 3 of a topic the log dir lacks: the topic is created
    with 4 partitions (it was created with 1 from the first staged part, that part
    appended, then the commit failed on partition 3 leaving it behind)."""
    root = tmp_path / "out"
    root.mkdir()
    df = spark.createDataFrame([("t", "v0", 0), ("t", "v3", 3)], "topic string, value string, partition int")
    df.coalesce(1).write.format("pylog").mode("append").save(str(root))
    back = sorted((r.partition, r.value) for r in spark.read.format("pylog").load(str(root)).collect())
    assert back == [(0, b"v0"), (3, b"v3")]
    with LogManager(root, read_only=True) as m:
        assert m.partitions("t") == [0, 1, 2, 3]


@pytest.mark.parametrize("option, value", [("startingTimestamp", "1700000000005"),
                                           ("startingOffsetsByTimestamp", '{"s": {"0": 1700000000005}}')])
def test_a_new_stream_starts_at_its_starting_timestamp(spark, tmp_path, option, value):
    """As in Spark's Kafka source, a starting timestamp takes precedence over
    startingOffsets (latest by default) for a new stream."""
    root = tmp_path / "stream"
    with LogManager(root) as m:
        m.create_topic("s", 1).append([Record(b"v%d" % i, timestamp=1_700_000_000_000 + i) for i in range(10)])
    got = []
    q = (spark.readStream.format("pylog").option(option, value).load(str(root))
         .writeStream.foreachBatch(lambda df, _: got.extend(r.offset for r in df.select("offset").collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert sorted(got) == [5, 6, 7, 8, 9]


def test_streaming_available_now_consumes_appends_in_micro_batches(spark, tmp_path):
    root = tmp_path / "stream"
    with LogManager(root) as m:
        t = m.create_topic("s", 2)
        for i in range(10):
            t.append([(b"k%d" % j, b"a%d-%d" % (i, j)) for j in range(20)])
    ckpt, out = str(tmp_path / "ckpt"), str(tmp_path / "out")

    def run_once():  # a file sink, so the second run resumes from the checkpoint
        q = (spark.readStream.format("pylog").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "60").load(str(root))
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
             .outputMode("append").trigger(availableNow=True).start())
        q.awaitTermination(120)
        return q

    q = run_once()
    assert len(q.recentProgress) >= 3  # admission control split the backlog
    with LogManager(root) as m:  # another writer appends after the first run
        m.topic("s").append([(b"late", b"late-%d" % i) for i in range(15)])
    run_once()
    rows = spark.read.parquet(out).select("topic", "partition", "offset", "value").collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == 215
    assert sum(1 for r in rows if r.value.startswith(b"late")) == 15


def test_filter_pushdown_prunes_and_results_stay_exact(spark, reader, root):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read_with(spark, reader).load(str(root))
        rows = df.where("topic = 'alpha' and partition = 1 and offset >= 490").select("offset").collect()
        assert sorted(r.offset for r in rows) == list(range(490, 500))
        rows = df.where("partition in (0, 1) and offset < 3 and topic = 'beta'").select("partition", "offset").collect()
        assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in (0, 1) for o in range(3)]
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def test_python_source_pushes_filters_exactly_when_spark_enables_it(spark, root):
    """Pins ``_pushdown_enabled`` (which reads the calling frame of PySpark's planning worker)
    to the installed PySpark: pruned partitions show as fewer scan tasks."""
    def tasks():
        df = spark.read.format("pylog").option("reader", "python").load(str(root))
        return df.where("topic = 'alpha'").rdd.getNumPartitions()
    assert tasks() == 5
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        assert tasks() == 3
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


@pytest.fixture(scope="module")
def unordered_times(tmp_path_factory):
    """One partition, 20 batches of 10 records; timestamps rise by batch, but batch 12 holds
    records from long ago and batch 3 one far in the future (real logs are like that)."""
    path = tmp_path_factory.mktemp("spark-times")
    with LogManager(path, segment_bytes=2_000) as m:
        log = m.create_topic("t", 1).log(0)
        for b in range(20):
            stamps = [10_000 * b + i for i in range(10)]
            if b == 12:
                stamps = [5 + i for i in range(10)]
            if b == 3:
                stamps[4] = 10_000 * 15
            log.append([Record(b"v%d" % (10 * b + i), timestamp=ts) for i, ts in enumerate(stamps)])
    return path


def _expected_at_or_after(timestamp_ms):
    out = []
    for b in range(20):
        stamps = [10_000 * b + i for i in range(10)] if b != 12 else [5 + i for i in range(10)]
        if b == 3:
            stamps[4] = 150_000
        out += [10 * b + i for i, ts in enumerate(stamps) if ts >= timestamp_ms]
    return out


def test_timestamp_pushdown_seeks_without_losing_late_or_early_records(spark, reader, unordered_times):
    from pylog.spark.options import parse_read_options
    from pylog.spark.source import PylogPushdownReader, _timestamp_ms
    import datetime
    bound = datetime.datetime.fromtimestamp(140, tz=datetime.timezone.utc)  # 140,000 ms
    assert _timestamp_ms(bound) == 140_000
    pushdown = PylogPushdownReader(parse_read_options({"path": str(unordered_times)}))
    pushdown.pruned["timestamp_min_ms"] = 140_000
    (part,) = pushdown.partitions()
    assert 0 < part.range.start <= min(_expected_at_or_after(140_000))  # seeked, nothing matching skipped
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read_with(spark, reader).load(str(unordered_times))
        for where, ms in (("timestamp >= timestamp'1970-01-01 00:02:20'", 140_000),
                          ("timestamp > timestamp'1970-01-01 00:00:00.009'", 10),
                          ("timestamp >= timestamp'1970-01-01 00:03:10.009'", 190_009),
                          ("timestamp >= timestamp'1971-01-01 00:00:00'", 10 ** 12)):
            got = sorted(r.offset for r in df.where(where).select("offset").collect())
            assert got == _expected_at_or_after(ms), where
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


@needs_samples
def test_a_timestamp_bound_below_zero_keeps_the_records_without_a_timestamp(spark, reader, tmp_path):
    """Magic-0 messages have no timestamp (-1): a filter ``timestamp >= <before 1970>`` keeps
    them, pushed down or not."""
    import shutil
    from tests.conftest import SAMPLES
    shutil.copytree(SAMPLES / "reference" / "v0-gzip", tmp_path / "old-0")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read_with(spark, reader).load(str(tmp_path))
        total = df.count()
        assert total > 0
        assert df.where("timestamp >= timestamp_millis(-86400000)").count() == total
        assert df.where("timestamp >= timestamp_millis(0)").count() == 0
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


@needs_samples
@pytest.mark.parametrize("cuts", [[0, 8], [0, 2, 4, 6, 8, 9], [1, 4, 9]], ids=str)
def test_ranges_cutting_a_legacy_compressed_wrapper_read_each_record_once(tmp_path, cuts):
    """A v1 lz4 wrapper of three records carries the offset of its last one: ranges ending
    or starting inside it (endingOffsets, maxRecordsPerPartition, a stream's micro-batches)
    still read every record of theirs, once."""
    import shutil
    from pylog.spark.plan import OffsetRange, read_range
    from tests.conftest import SAMPLES
    shutil.copytree(SAMPLES / "reference" / "v1-lz4", tmp_path / "t-0")
    got = [offset for start, end in zip(cuts, cuts[1:])
           for batch in read_range(OffsetRange(str(tmp_path), "t", 0, start, end))
           for offset in batch.column("offset").to_pylist()]
    assert got == list(range(cuts[0], cuts[-1]))


def test_reader_and_partitions_pickle_for_shipping_to_workers(root):
    import pickle
    from pylog.spark.options import parse_read_options
    from pylog.spark.source import PylogPushdownReader
    reader = PylogPushdownReader(parse_read_options({"path": str(root), "minPartitions": "7"}))
    parts = reader.partitions()
    assert len(parts) >= 7
    again = pickle.loads(pickle.dumps((reader, parts)))
    batches = list(again[0].read(again[1][0]))
    assert sum(b.num_rows for b in batches) == parts[0].range.size


def test_auto_discovery_module_names_the_format():
    import pyspark_pylog
    assert pyspark_pylog.DefaultSource.name() == "pylog"


def _transactions(root, *, left_open: bool) -> None:
    """t-0 under ``root``: a plain record, an aborted transaction of two, a committed one of
    one, and with ``left_open`` a transaction of another producer still open."""
    from pylog import Log
    with Log.open(root / "t-0") as log:
        log.append([b"plain"])
        log.append([b"aborted-1", b"aborted-2"], producer_id=9, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(9, 0, commit=False)
        log.append([b"kept"], producer_id=9, producer_epoch=0, base_sequence=2, is_transactional=True)
        log.append_txn_marker(9, 0, commit=True)
        if left_open:
            log.append([b"open"], producer_id=10, producer_epoch=0, base_sequence=0, is_transactional=True)


def test_read_committed_leaves_out_aborted_transactions(spark, reader, tmp_path):
    root = tmp_path / "txn"
    _transactions(root, left_open=True)
    df = read_with(spark, reader).option("isolationLevel", "read_committed").load(str(root))
    assert sorted(r.value for r in df.collect()) == [b"kept", b"plain"]
    df = read_with(spark, reader).load(str(root))
    assert len(df.collect()) == 5


def test_read_committed_leaves_out_aborted_transactions_of_a_segment_without_its_txnindex(spark, reader, tmp_path):
    """A segment copied without its ``.txnindex`` (or whose index lost entries): the aborted
    transactions come from the log's ABORT markers, with either reader, as Kafka's recovery
    rebuilds the index."""
    import os
    root = tmp_path / "txn"
    _transactions(root, left_open=False)
    os.remove(root / "t-0" / "00000000000000000000.txnindex")
    df = read_with(spark, reader).option("isolationLevel", "read_committed").load(str(root))
    assert sorted(r.value for r in df.collect()) == [b"kept", b"plain"] and df.count() == 2


def test_session_takes_a_builder_a_master_url_or_nothing_and_registers_the_format(spark, root):
    """``pylog.spark.session("local[2]")`` is what a user types first; it used to fail
    with AttributeError. With a session running, each form returns it, format registered."""
    import pylog.spark
    from pyspark.sql import SparkSession
    from pylog.errors import InvalidArgumentError
    for builder in ("local[2]", None, SparkSession.builder):
        assert pylog.spark.session(builder) is spark
    assert spark.read.format("pylog").load(str(root)).count() > 0
    with pytest.raises(InvalidArgumentError, match="master URL"):
        pylog.spark.session(2)
