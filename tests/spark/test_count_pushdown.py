"""``count()`` pushed down to the JVM reader (``SupportsPushDownAggregates``): each task counts
its range from batch headers and Spark adds the counts up. The pushed count must be exactly the
number of rows the same scan returns, under every option, and corruption must still fail it."""

from __future__ import annotations

import json
import shutil

import pytest

from pylog import Log, LogManager, Record
from pylog.spark import jar_path
from tests.conftest import needs_samples, sample_partitions
from tests.spark.conftest import read_with

pytestmark = pytest.mark.spark


@pytest.fixture
def jvm(spark):
    if jar_path(build=False) is None:
        pytest.skip("no JVM reader: pylog's jar cannot be built here (no JDK)")
    return lambda: read_with(spark, "jvm")


def _pushed(query) -> bool:
    """Whether Spark's physical plan of ``query`` (a DataFrame: its ``count()``) has the
    scan answer the count."""
    if not hasattr(query, "groupBy") or query.columns != ["count"]:
        query = query.groupBy().count()
    return "and count()" in query._jdf.queryExecution().sparkPlan().toString()


def _assert_count_is_the_rows(df) -> int:
    """The pushed count equals the rows the scan returns (collected, no aggregate to push)."""
    assert _pushed(df)
    rows = df.select("offset", "value").toArrow().num_rows
    assert df.count() == rows
    assert df.selectExpr("count(*)", "count(offset)", "count(partition)").first() == (rows, rows, rows)
    return rows


def _transactions(root) -> None:
    with Log.open(root / "t-0") as log:
        log.append([b"plain"])
        log.append([b"aborted-1", b"aborted-2"], producer_id=9, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(9, 0, commit=False)
        log.append([b"kept-1", b"kept-2", b"kept-3"], producer_id=9, producer_epoch=0, base_sequence=2,
                   is_transactional=True)
        log.append_txn_marker(9, 0, commit=True)
        log.append([b"open"], producer_id=10, producer_epoch=0, base_sequence=0, is_transactional=True)


def test_count_is_pushed_and_equals_the_rows_under_both_isolation_levels(jvm, tmp_path):
    _transactions(tmp_path)
    assert _assert_count_is_the_rows(jvm().load(str(tmp_path))) == 7
    assert _assert_count_is_the_rows(jvm().option("isolationLevel", "read_committed").load(str(tmp_path))) == 4


def test_count_of_a_compacted_log_counts_the_records_kept_not_the_offset_span(jvm, tmp_path):
    with LogManager(tmp_path, segment_bytes=2_000, cleanup_policy="compact") as m:
        log = m.create_topic("c", 1).log(0)
        for i in range(60):
            log.append([Record(b"v%d" % i, key=b"k%d" % (i % 5)) for _ in range(3)])
        log.compact()
        kept = sum(1 for _ in log.records())
    df = jvm().load(str(tmp_path))
    assert _assert_count_is_the_rows(df) == kept
    assert kept < 180


def test_count_inside_offset_bounds_and_split_in_many_tasks(jvm, tmp_path):
    with LogManager(tmp_path) as m:
        t = m.create_topic("b", 2)
        for p in range(2):
            for b in range(20):
                t.log(p).append([b"%d-%d" % (b, i) for i in range(25)])
    df = (jvm().option("startingOffsets", json.dumps({"b": {"0": 37, "1": 0}}))
          .option("endingOffsets", json.dumps({"b": {"0": 412, "1": -1}})).option("minPartitions", "7")
          .load(str(tmp_path)))
    assert _assert_count_is_the_rows(df) == (412 - 37) + 500


def test_counts_of_columns_that_may_be_null_are_not_pushed(jvm, tmp_path):
    with Log.open(tmp_path / "n-0") as log:
        log.append([Record(b"v", key=None if i % 2 else b"k") for i in range(10)])
    df = jvm().load(str(tmp_path))
    assert df.selectExpr("count(key)", "count(*)").first() == (5, 10)
    assert not _pushed(df.selectExpr("count(key)").withColumnRenamed("count(key)", "count"))


def test_a_filtered_count_is_not_pushed_and_stays_exact(jvm, tmp_path):
    _transactions(tmp_path)
    df = jvm().load(str(tmp_path)).where("offset >= 2")
    assert not _pushed(df)
    assert df.count() == len(df.collect()) == 5  # aborted-2, kept-1..3 and open


def test_a_pushed_count_over_a_corrupt_batch_fails_naming_file_and_position(jvm, tmp_path):
    with Log.open(tmp_path / "c-0") as log:
        for b in range(10):
            log.append([b"x%d-%d" % (b, i) for i in range(10)])
    seg = sorted((tmp_path / "c-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0xFF
    seg.write_bytes(bytes(data))
    df = jvm().load(str(tmp_path))
    assert _pushed(df)
    with pytest.raises(Exception, match=f"corrupt batch in .*{seg.name} at position"):
        df.count()


@needs_samples
def test_pushed_counts_of_real_kafka_directories_equal_their_rows(jvm, tmp_path):
    for n, part in enumerate(sample_partitions()):
        root = tmp_path / f"r{n}"
        root.mkdir()
        shutil.copytree(part, root / f"s{n}-0")
        for isolation in ("read_uncommitted", "read_committed"):
            df = jvm().option("isolationLevel", isolation).load(str(root))
            _assert_count_is_the_rows(df)
