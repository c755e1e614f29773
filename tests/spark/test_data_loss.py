"""Data loss and offset gaps of the Spark source, reported exactly (pylog/spark/gaps.py):
offsets deleted by retention or past a truncated log's end fail the read naming the first
(``failOnDataLoss=true``) or are skipped and logged once (``false``); the gaps a log holds
by design (compaction, transaction markers, aborted transactions) are skipped and logged
once, never failing a read. Real logs, real retention, compaction and transactions."""

from __future__ import annotations

import contextlib
import logging
import re

import pytest

from pylog import Log, LogManager, Record
from pylog.errors import DataLossError
from pylog.spark import plan

GAPS_LOGGER = "pylog.spark.gaps"


def _read(root, topic, start, end, **kwargs) -> list[int]:
    """The offsets ``plan.read_range`` returns for ``[start, end)`` of ``topic``-0."""
    r = plan.OffsetRange(str(root), topic, 0, start, end)
    return [o for b in plan.read_range(r, **kwargs) for o in b.column("offset").to_pylist()]


def _skipped(caplog) -> list[tuple[str, int, int, str]]:
    """``(level, a, b, reason)`` of each skipped range logged."""
    out = []
    for rec in caplog.records:
        if rec.name == GAPS_LOGGER:
            m = re.fullmatch(r"(\S+)-(\d+): skipped offsets \[(\d+), (\d+)\): (.*)", rec.getMessage())
            out.append((rec.levelname, int(m[3]), int(m[4]), m[5]))
    return out


@pytest.fixture
def retained(tmp_path):
    """Topic ``r``: 100 records, 10 a segment, then records below 40 deleted by retention."""
    root = tmp_path / "log"
    with LogManager(root, segment_bytes=600) as m:
        log = m.create_topic("r", 1).log(0)
        for i in range(10):
            log.append([Record(b"v%02d-%d" % (i, j)) for j in range(10)])
            log.roll()
        log.delete_records(40)
        assert log.log_start_offset == 40
    return root


def test_offsets_deleted_by_retention_fail_the_read_naming_the_first_and_why(retained):
    with pytest.raises(DataLossError) as e:
        _read(retained, "r", 10, 60)
    assert (e.value.topic, e.value.partition, e.value.offset) == ("r", 0, 10)
    assert "r-0: offset 10 is missing: deleted by retention or delete_records (the log now starts at 40)" in str(e.value)


def test_without_fail_on_data_loss_the_deleted_range_is_skipped_and_logged_once(retained, caplog):
    caplog.set_level(logging.INFO, logger=GAPS_LOGGER)
    assert _read(retained, "r", 10, 60, fail_on_data_loss=False) == list(range(40, 60))
    assert _skipped(caplog) == [("WARNING", 10, 40, "deleted by retention or delete_records (the log now starts at 40)")]


def test_offsets_past_a_truncated_log_end_are_data_loss(tmp_path, caplog):
    root = tmp_path / "log"
    with LogManager(root) as m:
        log = m.create_topic("t", 1).log(0)
        for i in range(30):
            log.append([b"x%d" % i])
        log.truncate_to(20)
    with pytest.raises(DataLossError, match=r"t-0: offset 20 is missing: past the log end 20 \(the partition was "
                                            r"truncated or recreated\)"):
        _read(root, "t", 5, 30)
    caplog.set_level(logging.INFO, logger=GAPS_LOGGER)
    assert _read(root, "t", 5, 30, fail_on_data_loss=False) == list(range(5, 20))
    assert _skipped(caplog) == [("WARNING", 20, 30, "past the log end 20 (the partition was truncated or recreated)")]


def test_compacted_gaps_are_skipped_and_logged_once_never_data_loss(tmp_path, caplog):
    root = tmp_path / "log"
    config = dict(segment_bytes=2000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                  file_delete_delay_ms=0, delete_retention_ms=1000)
    with LogManager(root) as m:
        log = m.create_topic("c", 1, config=config).log(0)
        for i in range(60):  # keys 0..4 over and over: compaction keeps the last of each
            log.append([Record(b"v%d" % i, key=b"k%d" % (i % 5))])
        log.append([Record(b"tail", key=b"tail")])
        log.roll()
        log.compact()
        kept = [r.offset for r in log.records()]
    assert len(kept) == 6
    caplog.set_level(logging.INFO, logger=GAPS_LOGGER)
    assert _read(root, "c", 0, 61) == kept  # failOnDataLoss=true: compaction is no loss
    holes, previous = [], -1
    for o in kept:
        if o > previous + 1:
            holes.append(("INFO", previous + 1, o, "compacted away"))
        previous = o
    assert _skipped(caplog) == holes and holes[0] == ("INFO", 0, 55, "compacted away")


def test_transaction_markers_and_aborted_records_are_gaps_with_their_reason(tmp_path, caplog):
    root = tmp_path / "log"
    with LogManager(root) as m:
        log = m.create_topic("x", 1).log(0)
        log.append([b"plain"])                                                       # 0
        log.append([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0,
                   is_transactional=True)                                            # 1-2
        log.append_txn_marker(7, 0, commit=False)                                    # 3
        log.append([b"kept"], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True)  # 4
        log.append_txn_marker(8, 0, commit=True)                                     # 5
        log.append([b"last"])                                                        # 6
    caplog.set_level(logging.INFO, logger=GAPS_LOGGER)
    assert _read(root, "x", 0, 7, isolation="committed") == [0, 4, 6]
    assert _skipped(caplog) == [("INFO", 1, 3, "records of an aborted transaction (read_committed)"),
                                ("INFO", 3, 4, "transaction markers"), ("INFO", 5, 6, "transaction markers")]
    caplog.clear()
    assert _read(root, "x", 0, 7) == [0, 1, 2, 4, 6]  # read_uncommitted: only the markers are gaps
    assert _skipped(caplog) == [("INFO", 3, 4, "transaction markers"), ("INFO", 5, 6, "transaction markers")]


def test_a_batch_query_starting_below_the_log_start_is_data_loss(retained, caplog):
    from pylog.spark.options import parse_read_options
    options = {"path": str(retained), "startingOffsets": '{"r": {"0": 5}}'}
    with pytest.raises(DataLossError, match=r"r-0: offset 5 is missing: deleted by retention"):
        plan.plan_ranges(parse_read_options(options))
    caplog.set_level(logging.INFO, logger=GAPS_LOGGER)
    ranges = plan.plan_ranges(parse_read_options({**options, "failOnDataLoss": "false"}))
    assert [(r.start, r.end) for r in ranges] == [(40, 100)]
    assert _skipped(caplog) == [("WARNING", 5, 40, "deleted by retention or delete_records (the log now starts at 40)")]


def _segments_of_ten(root, topic: str, count: int) -> None:
    with LogManager(root, segment_bytes=600) as m:
        log = m.create_topic(topic, 1).log(0)
        for i in range(count // 10):
            log.append([Record(b"v%02d-%d" % (i, j)) for j in range(10)])
            log.roll()


TOPIC = "retained-between-batches"


@pytest.mark.spark
@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_retention_between_micro_batches_is_reported_exactly(spark, tmp_path, fail_on_data_loss):
    """Micro-batches of 20 offsets; after the first, retention deletes the offsets below
    50: the second micro-batch ([20, 40)) is all gone and the third ([40, 60)) half. The
    query fails naming offset 20, or reads on from 50 (each skipped range is logged once by
    the task reading it, as the tests of ``read_range`` above pin down)."""
    root = tmp_path / "log"
    _segments_of_ten(root, TOPIC, 100)
    seen = []

    def on_batch(df, batch_id):
        seen.extend(r.offset for r in df.select("offset").collect())
        if batch_id == 0:
            with LogManager(root) as m:
                m.topic(TOPIC).log(0).delete_records(50)

    q = (spark.readStream.format("pylog").option("reader", "python").option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "20").option("failOnDataLoss", str(fail_on_data_loss).lower())
         .load(str(root)).writeStream.foreachBatch(on_batch)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    with pytest.raises(Exception) if fail_on_data_loss else contextlib.nullcontext():
        q.awaitTermination(300)
    if fail_on_data_loss:
        assert f"{TOPIC}-0: offset 20 is missing: deleted by retention or delete_records (the log now starts at 50)" \
            in str(q.exception())
        assert sorted(seen) == list(range(20))
    else:
        assert q.exception() is None
        assert sorted(seen) == list(range(20)) + list(range(50, 100))


@pytest.mark.spark
def test_a_stream_over_a_compacted_transactional_topic_is_never_data_loss(spark, tmp_path):
    """Compaction gaps, markers and an aborted transaction in every micro-batch of a
    ``read_committed`` stream with ``failOnDataLoss=true``: the committed records, all of them."""
    root = tmp_path / "log"
    config = dict(segment_bytes=2000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                  file_delete_delay_ms=0, delete_retention_ms=1000)
    with LogManager(root) as m:
        log = m.create_topic("ct", 1, config=config).log(0)
        for i in range(40):
            log.append([Record(b"v%d" % i, key=b"k%d" % (i % 4))])
        log.append([Record(b"aborted", key=b"a")], producer_id=3, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(3, 0, commit=False)
        log.append([Record(b"committed", key=b"c")], producer_id=4, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(4, 0, commit=True)
        log.roll()
        log.compact()
        expected = sorted(r.offset for r in log.records() if r.value != b"aborted")
    assert len(expected) == 5  # the last value of each of the 4 keys, and the committed one
    got = []
    q = (spark.readStream.format("pylog").option("reader", "python").option("startingOffsets", "earliest")
         .option("isolationLevel", "read_committed").option("maxOffsetsPerTrigger", "7").load(str(root))
         .writeStream.foreachBatch(lambda df, _: got.extend(r.offset for r in df.select("offset").collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    assert sorted(got) == expected
