"""Appending and reading one partition: offsets, bounds, rolls, limits."""

from __future__ import annotations

import os

import pytest

from pylog import (
    InvalidArgumentError, InvalidOffsetError, InvalidRecordError, Log, LogClosedError, OffsetOutOfRangeError, Record,
    RecordTooLargeError, encode_batch,
)
from pylog.record import decode_batches


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "t-0", segment_bytes=4096, index_interval_bytes=256) as lg:
        yield lg


def values(records):
    return [r.value for r in records]


def test_append_assigns_consecutive_offsets(log):
    a = log.append([b"a", b"b"])
    b = log.append([b"c"])
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 1, 2, 2)
    assert log.log_end_offset == 3
    assert [(r.offset, r.value) for r in log.records()] == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_read_from_middle_of_batch_skips_earlier_records(log):
    log.append([b"a", b"b", b"c"])
    assert values(log.read(1).records()) == [b"b", b"c"]


def test_read_at_log_end_is_empty_and_past_it_raises(log):
    log.append([b"a"])
    assert log.read(1).size_bytes == 0
    assert log.read(1).records() == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2)


def test_read_below_log_start_raises(log):
    for i in range(50):
        log.append([b"x" * 200])
    log.delete_records(30)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(29)
    assert log.read(30).records()[0].offset == 30


def test_keys_headers_timestamps_round_trip(log):
    log.append([Record(b"v", key=b"k", timestamp=1234, headers=[("h", b"x"), ("n", None)]), (b"k2", None)])
    r0, r1 = log.records()
    assert (r0.key, r0.value, r0.timestamp, tuple(r0.headers)) == (b"k", b"v", 1234, (("h", b"x"), ("n", None)))
    assert (r1.key, r1.value) == (b"k2", None)


@pytest.mark.parametrize("records", [[b"a", b"b", b"c"], [(b"k", b"a"), (None, b"b"), (b"k", None)],
                                     [Record(b"a"), Record(b"b", timestamp=7), b"c"]], ids=["values", "pairs", "mixed"])
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_list_of_create_times_stamps_each_record_without_its_own(log, records, compression):
    log.append(records, timestamp=[100, 105, 103], compression=compression)
    own = [r.timestamp if isinstance(r, Record) and r.timestamp is not None else None for r in records]
    assert [r.timestamp for r in log.records()] == [o if o is not None else t for o, t in zip(own, [100, 105, 103])]
    (batch,) = log.read(0).batches()
    assert batch.max_timestamp == max(o if o is not None else t for o, t in zip(own, [100, 105, 103]))


def test_segments_roll_on_size_and_reads_cross_them(log):
    for i in range(100):
        log.append([b"%03d" % i + b"x" * 100])
    assert len(log.segments) > 3
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert values(log.records(95)) == [b"%03d" % i + b"x" * 100 for i in range(95, 100)]
    assert len(list(log.records())) == 100


def test_max_bytes_bounds_the_fetch_but_one_batch_always_comes(log):
    for i in range(10):
        log.append([b"y" * 100])
    small = log.read(0, max_bytes=10)
    assert len(small.batches()) == 1
    none = log.read(0, max_bytes=10, min_one_message=False)
    assert none.batches() == [] and none.next_offset == 0
    big = log.read(0, max_bytes=1 << 20)
    assert big.next_offset == log.active_segment.base_offset or big.next_offset == 10


def test_fetch_next_offset_continues_the_scan(log):
    for i in range(30):
        log.append([b"%d" % i])
    seen, offset = [], 0
    while offset < log.log_end_offset:
        f = log.read(offset, max_bytes=200)
        seen += [r.offset for r in f.records()]
        offset = f.next_offset
    assert seen == list(range(30))


def test_oversized_record_is_refused_and_nothing_written(tmp_path):
    with Log.open(tmp_path / "t-0", max_message_bytes=1000) as log:
        with pytest.raises(RecordTooLargeError):
            log.append([b"z" * 2000])
        assert log.log_end_offset == 0 and log.size_bytes == 0


def test_append_larger_than_max_message_bytes_splits_into_batches(tmp_path):
    with Log.open(tmp_path / "t-0", max_message_bytes=1000) as log:
        info = log.append([b"z" * 100 for _ in range(30)])
        assert (info.first_offset, info.last_offset, info.num_records) == (0, 29, 30)
        assert len(log.read(0).batches()) > 1
        assert all(b.size <= 1000 for b in log.read(0).batches())


def test_bad_input_is_refused_with_clear_errors(log):
    with pytest.raises(InvalidArgumentError):
        log.append(b"not a list")
    with pytest.raises(InvalidArgumentError):
        log.append([])
    with pytest.raises(InvalidArgumentError):
        log.append([12345])
    with pytest.raises(InvalidOffsetError):
        log.read(-1)
    with pytest.raises(InvalidOffsetError):
        log.read("0")
    with pytest.raises(InvalidArgumentError):
        log.read(0, isolation="dirty")
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_append_batches_assigns_offsets_from_log_end(log):
    log.append([b"first"])
    raw = encode_batch([b"a", b"b"], base_offset=0) + encode_batch([b"c"], base_offset=0)
    info = log.append_batches(raw)
    assert (info.first_offset, info.last_offset) == (1, 3)
    assert [(r.offset, r.value) for r in log.records()] == [(0, b"first"), (1, b"a"), (2, b"b"), (3, b"c")]


def test_append_batches_refuses_corrupt_bytes_and_changes_nothing(log):
    raw = bytearray(encode_batch([b"a"]))
    raw[-1] ^= 0xFF
    with pytest.raises(Exception) as e:
        log.append_batches(bytes(raw))
    assert "crc" in str(e.value).lower()
    assert log.size_bytes == 0


def test_follower_append_keeps_offsets_and_refuses_going_back(log):
    log.append_as_follower(encode_batch([b"a", b"b"], base_offset=10))
    assert log.log_end_offset == 12
    assert [r.offset for r in log.records(10)] == [10, 11]
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(encode_batch([b"c"], base_offset=5))


def test_log_append_time_stamps_every_record(tmp_path):
    with Log.open(tmp_path / "t-0", message_timestamp_type="LogAppendTime") as log:
        info = log.append([Record(b"a", timestamp=5), Record(b"b", timestamp=6)])
        assert info.log_append_time > 1_600_000_000_000
        assert {r.timestamp for r in log.records()} == {info.log_append_time}


def test_offset_for_timestamp_finds_earliest_offset_at_or_after(log):
    for i, ts in enumerate([100, 300, 200, 400, 500]):
        log.append([Record(b"%d" % i, timestamp=ts)] + [Record(b"pad" * 50, timestamp=ts)])
    assert log.offset_for_timestamp(250) == 2  # first record with ts >= 250 (log order)
    assert log.offset_for_timestamp(100) == 0
    assert log.offset_for_timestamp(401) == 8
    assert log.offset_for_timestamp(501) is None
    assert log.offset_for_timestamp(-2) == 0
    assert log.offset_for_timestamp(-1) == log.log_end_offset


def test_max_timestamp_names_the_largest_timestamps_first_offset_even_below_the_log_start(log):
    """Kafka's ListOffsets MAX_TIMESTAMP (UnifiedLog): the first record with the largest
    timestamp in the first segment holding it, never compared with the log start."""
    log.append([Record(b"a", timestamp=300), Record(b"b", timestamp=100), Record(b"c", timestamp=200)])
    log.append([Record(b"d", timestamp=300)])
    assert log.offset_for_timestamp(-3) == 0
    log.delete_records(1)
    assert log.offset_for_timestamp(-3) == 0
    assert log.offset_for_timestamp(300) == 3  # a timestamp search starts at the log start


def test_truncate_to_removes_whole_batches_and_appends_continue(log):
    for i in range(40):
        log.append([b"a%d" % i, b"b%d" % i])
    log.truncate_to(31)  # inside the batch 30..31: the whole batch goes
    assert log.log_end_offset == 30
    info = log.append([b"new"])
    assert info.first_offset == 30
    assert [r.offset for r in log.records()] == list(range(31))


def test_high_watermark_bounds_reads_when_managed_by_hand(tmp_path):
    with Log.open(tmp_path / "t-0", auto_high_watermark=False) as log:
        log.append([b"a"])
        log.append([b"b"])
        assert log.high_watermark == 0
        assert log.read(0, isolation="high_watermark").records() == []
        log.high_watermark = 1
        assert values(log.read(0, isolation="high_watermark").records()) == [b"a"]
        assert values(log.read(0).records()) == [b"a", b"b"]
    with Log.open(tmp_path / "t-0", auto_high_watermark=False) as log:
        assert log.high_watermark == 1


def test_closed_log_refuses_use(tmp_path):
    log = Log.open(tmp_path / "t-0")
    log.close()
    with pytest.raises(LogClosedError):
        log.append([b"a"])
    log.close()  # idempotent


def test_files_follow_kafka_naming(log):
    for i in range(60):
        log.append([b"q" * 100])
    names = sorted(os.listdir(log.path))
    assert "00000000000000000000.log" in names
    for s in log.segments:
        assert os.path.basename(s.log_path) == f"{s.base_offset:020d}.log"


def test_written_batches_decode_with_kafka_python(log):
    from kafka.record.default_records import DefaultRecordBatch
    for i in range(40):
        log.append([(b"k%d" % i, b"v" * (i + 1))], compression=["none", "gzip", "snappy", "lz4", "zstd"][i % 5])
    n = 0
    for seg in log.segments:
        data = open(seg.log_path, "rb").read()
        for b in decode_batches(data):
            kb = DefaultRecordBatch(bytearray(b.raw()))
            assert kb.validate_crc()
            recs = list(kb)
            assert [r.offset for r in recs] == list(range(b.base_offset, b.last_offset + 1))
            n += len(recs)
    assert n == 40


def test_index_entries_point_at_batch_starts_holding_their_offsets(log):
    for i in range(300):
        log.append([b"r" * 40] * 3)
    log.roll()
    assert log.check() == []
    for seg in log.segments:
        starts = {h.position: h for h in seg.headers()}
        for off, pos in seg.offset_index.entries():
            assert pos in starts and starts[pos].last_offset >= off
        ts = [t for t, _ in seg.time_index.entries()]
        assert ts == sorted(ts)


def test_update_config_takes_new_settings_from_the_next_append_and_refuses_a_bad_one_whole(tmp_path):
    from pylog import InvalidConfigError, Log
    with Log.open(tmp_path / "t-0", segment_bytes=100_000) as log:
        for _ in range(20):
            log.append([b"x" * 200])
        assert len(log.segments) == 1
        log.update_config({"segment_bytes": 1000, "retention_ms": 5000})
        for _ in range(20):
            log.append([b"x" * 200])
        assert len(log.segments) > 3 and log.config.retention_ms == 5000
        with pytest.raises(InvalidConfigError, match="segment_bytes"):
            log.update_config({"retention_ms": 7, "segment_bytes": 1})
        assert (log.config.segment_bytes, log.config.retention_ms) == (1000, 5000)
