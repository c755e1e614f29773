"""``format("pylog")`` over a log dir in object storage (docs/spark.md, "Object storage"): a
log dir written by pylog, copied to a bucket of the loopback S3 endpoint, reads with both
readers exactly as the local copy does, configured once by the session's S3A settings."""

from __future__ import annotations

import json

import pytest

from pylog import LogManager, Record
from tests.s3_endpoint import SECRET_KEY
from tests.spark.conftest import read_with

pytestmark = pytest.mark.spark

ORDERS, TXN = "orders", "txn"


@pytest.fixture(scope="module")
def s3a_spark(spark, s3):
    """The shared session with Hadoop's S3A jars (tests/spark/conftest.py adds them for this
    fixture) and the endpoint's ``fs.s3a.*`` settings (``spark.hadoop.fs.s3a.*`` of a session
    being built), as a user configures one session for both readers."""
    from pylog.spark import jar_path
    if jar_path(build=False) is not None:
        loaded = spark.sparkContext._jsc.sc().listJars().mkString(",")
        if "hadoop-aws" not in loaded:
            from tests.s3_endpoint import _unavailable
            _unavailable("Hadoop's S3A jars are missing: interop/spark-s3/prepare (needs Maven) did not make them")
    settings = {key.removeprefix("spark.hadoop."): value for key, value in s3.hadoop_conf.items()}
    for key, value in settings.items():  # a running session's Hadoop settings, as Spark's file sources read them
        spark.conf.set(key, value)
    yield spark
    for key in settings:
        spark.conf.unset(key)


@pytest.fixture(scope="module")
def copied(tmp_path_factory, s3):
    """(local log dir, its copy's s3a:// URL): ``orders`` (2 partitions of several segments;
    keys, headers, rising timestamps) and ``txn`` (an aborted transaction between committed
    records)."""
    root = tmp_path_factory.mktemp("object-storage")
    with LogManager(root, segment_bytes=4_000) as m:
        topic = m.create_topic(ORDERS, 2)
        for p in range(2):
            log = topic.log(p)
            for b in range(12):
                log.append([Record(b"v%d-%d-%d" % (p, b, i), key=None if i % 3 else b"k%d" % i,
                                   timestamp=10_000 + 10 * b + i, headers=[("h", b"%d" % i)] if i % 2 else [])
                            for i in range(10)])
        log = m.create_topic(TXN, 1).log(0)
        log.append([b"plain"])
        log.append([b"aborted-1", b"aborted-2"], producer_id=9, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(9, 0, commit=False)
        log.append([b"kept"], producer_id=9, producer_epoch=0, base_sequence=2, is_transactional=True)
        log.append_txn_marker(9, 0, commit=True)
    url = s3.url(s3.bucket(), "logs")
    s3.upload_dir(root, url)
    return root, "s3a" + url[len("s3"):]


#: option sets read from both copies: each selection and bound the Kafka source takes
OPTION_SETS = [
    {},
    {"subscribe": ORDERS, "startingOffsets": json.dumps({ORDERS: {"0": 7, "1": -2}}),
     "endingOffsets": json.dumps({ORDERS: {"0": 95, "1": -1}})},
    {"assign": json.dumps({ORDERS: [1]}), "startingTimestamp": "10055"},
    {"subscribePattern": "ord.*", "startingOffsetsByTimestamp": json.dumps({ORDERS: {"0": 10_031, "1": 10_100}}),
     "minPartitions": "7"},
    {"subscribe": TXN, "isolationLevel": "read_committed"},
]


def _rows(df):
    return sorted(df.collect(), key=lambda r: (r.topic, r.partition, r.offset))


def _read(spark, reader, options, path):
    df = read_with(spark, reader).option("includeHeaders", "true")
    for key, value in options.items():
        df = df.option(key, value)
    return df.load(path)


def test_both_readers_read_a_log_dir_in_a_bucket_as_its_local_copy(s3a_spark, reader, copied):
    root, url = copied
    for options in OPTION_SETS:
        local, remote = _read(s3a_spark, reader, options, str(root)), _read(s3a_spark, reader, options, url)
        expected = _rows(local)
        assert expected, options
        assert _rows(remote) == expected, options
        assert remote.rdd.getNumPartitions() == local.rdd.getNumPartitions(), options
    committed = _rows(_read(s3a_spark, reader, OPTION_SETS[-1], url))
    assert [r.value for r in committed] == [b"plain", b"kept"]


def test_counts_and_pruned_scans_of_a_bucket_match_the_local_copy(s3a_spark, reader, copied):
    root, url = copied
    for path in (str(root), url):
        df = read_with(s3a_spark, reader).option("subscribe", ORDERS).load(path)
        assert df.count() == 240
        assert df.where("partition = 1 and offset >= 30 and offset < 70").count() == 40
        assert df.where("timestamp >= cast(10.1 as timestamp)").count() == 2 * 20
        assert df.selectExpr("sum(length(value))").first()[0] == sum(
            len(b"v%d-%d-%d" % (p, b, i)) for p in range(2) for b in range(12) for i in range(10))


def test_s3_and_s3a_urls_name_the_same_log_dir(s3a_spark, reader, copied):
    _, url = copied
    s3_url = "s3" + url[len("s3a"):]
    assert _rows(_read(s3a_spark, reader, {}, s3_url)) == _rows(_read(s3a_spark, reader, {}, url))


def test_storage_options_given_as_an_option_win_over_the_session_s_s3a_settings(s3a_spark, s3, copied):
    _, url = copied
    nowhere = {**s3.storage_options, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"},
               "config_kwargs": {"retries": {"total_max_attempts": 1}}}
    df = read_with(s3a_spark, "python").option("storage_options", json.dumps(nowhere))
    with pytest.raises(Exception) as failed:
        df.load(url).collect()
    assert "127.0.0.1:9" in str(failed.value) or url.replace("s3a://", "") in str(failed.value)
    assert SECRET_KEY not in str(failed.value)
    df = read_with(s3a_spark, "python").option("storage_options", json.dumps(s3.storage_options))
    assert len(df.load(url).collect()) == 240 + 4  # orders, and txn's records (its markers are no rows)


def test_a_missing_bucket_fails_at_load_naming_the_url_without_credentials(s3a_spark, reader):
    url = "s3a://pylog-no-such-bucket/logs"
    with pytest.raises(Exception) as failed:
        read_with(s3a_spark, reader).load(url).collect()
    message = str(failed.value)
    assert url.replace("s3a://", "") in message
    assert SECRET_KEY not in message


def test_a_stream_with_available_now_reads_a_log_dir_in_a_bucket(s3a_spark, copied, tmp_path):
    root, url = copied
    query = (s3a_spark.readStream.format("pylog").option("startingOffsets", "earliest").option("subscribe", ORDERS)
             .load(url).writeStream.format("memory").queryName("orders_from_s3")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        query.awaitTermination()
        streamed = _rows(s3a_spark.table("orders_from_s3"))
    finally:
        query.stop()
    expected = _rows(read_with(s3a_spark, "python").option("subscribe", ORDERS).load(str(root)))
    assert streamed == expected


def test_the_session_s_s3a_settings_become_s3fs_storage_options():
    from pylog.spark.options import parse_read_options
    opts = parse_read_options({"path": "s3a://b/logs", "fs.s3a.endpoint": "127.0.0.1:9000",
                               "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": "eu-west-1",
                               "fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK",
                               "fs.s3a.path.style.access": "true", "fs.s3a.connection.maximum": "96"})
    assert opts.storage_options == {"key": "AK", "secret": "SK",
                                    "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000",
                                                      "region_name": "eu-west-1"},
                                    "config_kwargs": {"s3": {"addressing_style": "path"}}}
    assert "SK" not in repr(opts)
    given = parse_read_options({"path": "s3://b/logs", "storage_options": '{"anon": true}', "fs.s3a.access.key": "AK"})
    assert given.storage_options == {"anon": True}
    assert parse_read_options({"path": "/data/logs"}).storage_options is None


@pytest.fixture(scope="module")
def tiered(tmp_path_factory, s3):
    """(local log dir, the URL of its tiered part, every record as (offset, value)): ``events-0``
    of 6 segments whose first 3 are in the bucket and deleted locally."""
    import shutil
    from pylog import Log
    root = tmp_path_factory.mktemp("tiered")
    with Log.open(root / "events-0", segment_bytes=2048, index_interval_bytes=128) as log:
        for i in range(120):
            log.append([Record(b"value-%03d" % i * 4, key=b"k%d" % i, timestamp=10_000 + i)])
        upload = tmp_path_factory.mktemp("upload") / "events-0"
        upload.mkdir()
        for seg in log.segments[:3]:
            for path in seg.paths():
                shutil.copy(path, upload)
        local_start = log.segments[3].base_offset
        log.delete_records(local_start)
    url = s3.url(s3.bucket(), "tiered")
    s3.upload_dir(upload.parent, url)
    return root, url, local_start


def test_local_and_tiered_segments_of_a_partition_read_as_one_with_no_gap_or_duplicate(s3a_spark, s3, tiered):
    root, url, local_start = tiered
    df = (read_with(s3a_spark, "python").option("remote_storage", url)
          .option("storage_options", json.dumps(s3.storage_options)).option("minPartitions", "4"))
    rows = _rows(df.load(str(root)))
    assert local_start > 0
    assert [(r.offset, r.value) for r in rows] == [(i, b"value-%03d" % i * 4) for i in range(120)]
    assert _rows(read_with(s3a_spark, "python").load(str(root)))[0].offset == local_start  # without it: local only
    from pylog.spark import jar_path
    if jar_path(build=False) is not None:
        with pytest.raises(Exception, match="reader=python"):
            read_with(s3a_spark, "jvm").option("remote_storage", url).load(str(root)).collect()


def test_a_tiered_layout_in_a_bucket_is_read_by_the_python_source_and_refused_by_the_jvm_reader(s3a_spark, s3,
                                                                                                tmp_path):
    import uuid
    from pylog import Log
    from pylog.remote.aiven import upload_segment
    from pylog.remote.store import ObjectStore
    with Log.open(tmp_path / "events-0", segment_bytes=2048) as log:
        for i in range(60):
            log.append([Record(b"value-%03d" % i * 4, key=b"k%d" % i, timestamp=10_000 + i)])
        closed = log.segments[:2]
        end = closed[-1].next_offset
        url = s3.url(s3.bucket(), "tiered")
        store = ObjectStore.from_url(url, s3.storage_options)
        for n, seg in enumerate(closed, 1):
            indexes = {"offset": open(seg.offset_index.path, "rb").read()[: len(seg.offset_index) * 8],
                       "timestamp": open(seg.time_index.path, "rb").read()[: len(seg.time_index) * 12],
                       "producer_snapshot": b"", "leader_epoch": b"0\n0\n"}
            upload_segment(store, "", "events", "qzlyGCIgTyKgUcZK-A7vdQ", 0, uuid.UUID(int=n).bytes, seg.log_path,
                           indexes, start_offset=seg.base_offset)
    rows = _rows(read_with(s3a_spark, "python").option("storage_options", json.dumps(s3.storage_options)).load(url))
    assert [(r.offset, r.value) for r in rows] == [(i, b"value-%03d" % i * 4) for i in range(end)]
    from pylog.spark import jar_path
    if jar_path(build=False) is not None:
        with pytest.raises(Exception, match="tiered layout.*reader=python"):
            read_with(s3a_spark, "jvm").load("s3a" + url[len("s3"):])
