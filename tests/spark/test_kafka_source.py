"""Spark's own Kafka source (``spark-sql-kafka-0-10`` from Maven Central, with the Kafka Java
client it brings) reads topics through ``pylog serve`` and returns exactly what
``format("pylog")`` reads from the same log dir's files: keys, values, headers, offsets,
timestamps, every partition; and with ``read_committed``, what the files hold committed."""

from __future__ import annotations

import pytest

from pylog import Producer, Record
from pylog.manager import LogManager

pytest.importorskip("kafka.protocol.api_message", reason="pylog serve needs kafka-python 3")

from pylog.serve import Server  # noqa: E402
from tests.s3_endpoint import _unavailable  # noqa: E402

COLUMNS = ["topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers"]


@pytest.fixture
def kafka_source_spark(spark):
    """The shared session with Spark's Kafka source on its classpath (tests/spark/conftest.py
    adds the jars of interop/spark-kafka for this fixture)."""
    loaded = spark.sparkContext._jsc.sc().listJars().mkString(",")
    if "spark-sql-kafka" not in loaded:
        _unavailable("Spark's Kafka source is missing: interop/spark-kafka/prepare (needs Maven) did not resolve it")
    return spark


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A log dir with ``orders`` (3 partitions of several segments: keys, headers, null values,
    rising timestamps) and ``txn`` (an aborted transaction between committed records), served."""
    root = tmp_path_factory.mktemp("served")
    with LogManager(str(root), segment_bytes=4096) as manager:
        orders = manager.create_topic("orders", 3)
        for p in range(3):
            orders.log(p).append([(f"k{p}-{i}".encode(), None if i % 17 == 0 else b"v" * (i % 50))
                                  for i in range(120)], timestamp=1_700_000_000_000 + p)
        orders.log(1).append([Record(b"with-headers", b"h", 1_700_000_100_000, [("trace", b"1"), ("empty", b"")])])
        manager.create_topic("txn", 1).log(0).append([(b"a", b"committed-1")])
    with Producer(str(root), transactional_id="t1") as producer:
        producer.begin_transaction()
        producer.send("txn", b"aborted", key=b"b", partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send("txn", b"committed-2", key=b"c", partition=0)
        producer.commit_transaction()
    with Server(str(root), listen=("127.0.0.1", 0)) as server:
        yield root, server


def _rows(df) -> list[tuple]:
    rows = df.select(*COLUMNS).orderBy("topic", "partition", "offset").collect()
    return [tuple(r[c] if c != "headers" else [(h.key, bytes(h.value)) for h in (r[c] or [])] for c in COLUMNS)
            for r in rows]


def _through_kafka(spark, server, topic: str, **options):
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", server.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest").option("endingOffsets", "latest")
              .option("includeHeaders", "true"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _from_files(spark, root, topic: str, **options):
    reader = spark.read.format("pylog").option("subscribe", topic).option("includeHeaders", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(str(root))


def test_sparks_kafka_source_through_the_server_reads_what_format_pylog_reads(kafka_source_spark, served):
    root, server = served
    through_kafka = _rows(_through_kafka(kafka_source_spark, server, "orders"))
    from_files = _rows(_from_files(kafka_source_spark, root, "orders"))
    assert len(through_kafka) == 3 * 120 + 1
    assert through_kafka == from_files


def test_read_committed_through_the_server_leaves_the_aborted_records_out_as_the_files_do(kafka_source_spark,
                                                                                         served):
    root, server = served
    through_kafka = _rows(_through_kafka(kafka_source_spark, server, "txn", **{"kafka.isolation.level": "read_committed"}))
    from_files = _rows(_from_files(kafka_source_spark, root, "txn", isolationLevel="read_committed"))
    assert [r[4] for r in through_kafka] == [b"committed-1", b"committed-2"]
    assert through_kafka == from_files
