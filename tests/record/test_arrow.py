"""``Log.read_arrow`` and ``Log.to_pandas``: the columnar decode as Arrow and pandas, the same
records as ``Log.records()``; without pyarrow a clear :class:`MissingDependencyError`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pylog import Log, Record

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (extra 'arrow')")

TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1, "NoTimestampType": -1}


def _rows(records) -> list[tuple]:
    return [(r.key, r.value, r.topic, r.partition, r.offset, r.timestamp, TIMESTAMP_TYPES[r.timestamp_type],
             list(r.headers)) for r in records]


def _table_rows(table) -> list[tuple]:
    d = table.to_pydict()
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()  # microseconds
    headers = d.get("headers") or [[]] * table.num_rows
    return [(d["key"][i], d["value"][i], d["topic"][i], d["partition"][i], d["offset"][i], stamps[i] // 1000,
             d["timestampType"][i], [(h["key"], h["value"]) for h in headers[i]]) for i in range(table.num_rows)]


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "events-2", segment_bytes=1000) as log:
        for i in range(40):
            log.append([Record(b"v%d" % i, key=None if i % 3 else b"k%d" % i, timestamp=1000 + i,
                               headers=(("h", b"x"), ("n", None)) if i % 5 == 0 else ()),
                        Record(None, key=b"tomb")], compression="gzip" if i % 2 else "none")
        yield log


def test_read_arrow_holds_what_records_holds_across_segments(log):
    assert len(log.segments) > 3
    table = log.read_arrow(include_headers=True)
    assert table.num_rows == 80
    assert _table_rows(table) == _rows(log.records())
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")


def test_read_arrow_bounds_and_small_fetches(log):
    table = log.read_arrow(7, 61, max_bytes=100)
    assert table.column("offset").to_pylist() == list(range(7, 61))
    assert _table_rows(table) == [row[:-1] + ([],) for row in _rows(log.records(7, 61))]
    assert "headers" not in table.column_names
    assert log.read_arrow(80).num_rows == 0


def test_committed_read_arrow_leaves_aborted_transactions_out(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"a"])
        log.append([b"gone1", b"gone2"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(7, 0, commit=False)
        log.append([b"kept"], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(8, 0, commit=True)
        log.append([b"open"], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
        committed = log.read_arrow(isolation="committed")
        assert committed.column("value").to_pylist() == [r.value for r in log.records(isolation="committed")]
        assert committed.column("value").to_pylist() == [b"a", b"kept"]
        assert log.read_arrow().column("value").to_pylist() == [b"a", b"gone1", b"gone2", b"kept", b"open"]


def test_to_pandas_has_a_row_per_record(log):
    pd = pytest.importorskip("pandas", reason="pandas is not installed (extra 'arrow')")
    df = log.to_pandas(0, 10)
    assert isinstance(df, pd.DataFrame)
    assert list(df["offset"]) == list(range(10))
    assert list(df["value"]) == [r.value for r in log.records(0, 10)]
    assert str(df["timestamp"].dt.tz) == "UTC" and df["timestamp"].iloc[0].value // 10**6 == 1000


def test_without_pyarrow_the_error_names_the_package_and_the_extra(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.modules["pyarrow"] = None   # an import of pyarrow now fails, as when it is not installed
        from pylog import Log, MissingDependencyError, PylogError
        with Log.open({str(tmp_path / "t-0")!r}) as log:
            log.append([b"x"])
            try:
                log.read_arrow()
            except MissingDependencyError as e:
                assert isinstance(e, PylogError) and isinstance(e, ImportError)
                print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Log.read_arrow needs the optional package 'pyarrow': pip install 'pylog-kafka[arrow]'"


@pytest.mark.parametrize("backend_name", ["c", "numpy"])
def test_read_arrow_without_headers_holds_what_records_holds(log, backend_name):
    """The C read (cache-sized chunks into Arrow buffers) and the numpy one give the same table."""
    from pylog.record import backend
    if backend_name not in backend.available():
        pytest.skip(f"backend {backend_name} is not built here")
    with backend.use(backend_name):
        table = log.read_arrow()
    assert _table_rows(table) == [row[:-1] + ([],) for row in _rows(log.records())]
    assert table.column("key").null_count == sum(r.key is None for r in log.records())


def test_batches_larger_than_a_read_chunk_and_log_append_time(tmp_path):
    from pylog.segment.fetch import READ_CHUNK_BYTES
    with Log.open(tmp_path / "big-0", message_timestamp_type="LogAppendTime") as log:
        for i in range(6):  # each batch two and a half read chunks
            log.append([(b"k%d" % i, bytes([i]) * (READ_CHUNK_BYTES // 4)) for _ in range(10)] + [None])
        table = log.read_arrow(3, 60, max_bytes=READ_CHUNK_BYTES)
        assert _table_rows(table) == [row[:-1] + ([],) for row in _rows(log.records(3, 60))]
        assert set(table.column("timestampType").to_pylist()) == {1}
        assert table.column("value").null_count == 5


def test_a_flipped_bit_in_a_record_is_a_corrupt_record_error_naming_the_batch(tmp_path):
    from pylog.errors import CorruptRecordError
    with Log.open(tmp_path / "c-0", segment_bytes=2000) as log:  # the bad batch in a closed segment
        log.append([b"a" * 100] * 10)
        second = log.append([b"b" * 100] * 5)
        log.append([b"c" * 100] * 10)
        position = log.read(second.first_offset, 100).position
    path = tmp_path / "c-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[position + 200] ^= 0x04
    path.write_bytes(bytes(data))
    with Log.open(tmp_path / "c-0", read_only=True) as log:
        with pytest.raises(CorruptRecordError) as e:
            log.read_arrow()
    assert e.value.position == position and e.value.path == str(path)


def test_a_batch_that_does_not_decode_despite_its_crc_is_an_invalid_record_error(tmp_path):
    import struct

    import crc32c

    from pylog.errors import InvalidRecordError
    with Log.open(tmp_path / "s-0", segment_bytes=2000) as log:  # the bad batch in a closed segment
        log.append([b"a"] * 40)
        second = log.append([b"b"] * 40)
        log.append([b"c" * 1500])
        position = log.read(second.first_offset, 100).position
    path = tmp_path / "s-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    batch = data[position:]
    batch[57:61] = struct.pack(">i", 39)  # one record fewer than the bytes hold, the CRC made to match
    batch[17:21] = struct.pack(">I", crc32c.crc32c(bytes(batch[21:])))
    data[position:] = batch
    path.write_bytes(bytes(data))
    with Log.open(tmp_path / "s-0", read_only=True) as log:
        with pytest.raises(InvalidRecordError) as e:
            log.read_arrow()
    assert e.value.position == position


def test_a_fetch_read_in_chunks_survives_the_deletion_of_its_segment(tmp_path):
    """Retention deleting the segment under a read: the fetch holds the file, so the read
    goes on to the end of what it fetched."""
    with Log.open(tmp_path / "d-0", segment_bytes=4096, file_delete_delay_ms=0) as log:
        for i in range(20):
            log.append([b"%03d" % i * 100])
        fetch = log.read(0, 1 << 20)
        chunks = fetch.data_batch_chunks(chunk_bytes=512)
        first = [b.base_offset for b in next(chunks)]
        log.delete_records(log.log_end_offset)  # the high watermark: every segment below goes
        assert not any(p.name.startswith("00000000000000000000.") for p in (tmp_path / "d-0").iterdir())
        rest = [b.base_offset for chunk in chunks for b in chunk]
        assert first + rest == list(range(fetch.next_offset)) and fetch.next_offset > 1


@pytest.mark.parametrize("sample", ["v0-none", "v1-lz4", "v2-gzip"])
def test_read_arrow_of_kafka_written_logs_legacy_entries_included(tmp_path, sample):
    """Kafka's own files: a fetch holding legacy (magic 0/1) entries goes through the
    columnar decode, one of v2 batches through the chunked one; both give the records."""
    import shutil

    from tests.conftest import SAMPLES, needs_samples
    if needs_samples.args[0]:
        pytest.skip("Kafka samples are not available")
    shutil.copytree(SAMPLES / "reference" / sample, tmp_path / "t-0")
    with Log.open(tmp_path / "t-0", read_only=True) as log:
        assert log.log_end_offset > 2
        for start, end in ((None, None), (1, log.log_end_offset - 1)):
            table = log.read_arrow(start, end)
            assert _table_rows(table) == [row[:-1] + ([],) for row in _rows(log.records(start, end))]
