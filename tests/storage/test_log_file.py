"""``LogFile`` (pylog/segment/file.py): one ``.log`` file: appends at the logical end,
reads, truncation and the walk over batch headers (docs/format/segment.md)."""

from __future__ import annotations

import os

import pytest

import pylog.segment.file as file_module
from pylog.errors import CorruptRecordError, StorageError
from pylog.record.encode import encode_batch
from pylog.record.record import Record
from pylog.segment import BatchHeader, LogFile
from tests.conftest import needs_samples, sample_logs
from tests.record.expected import expected_rows

T0 = 1_700_000_000_000


def batch(base_offset: int, count: int = 1, ts: int = T0) -> bytes:
    return encode_batch([Record(b"value-%d" % i, timestamp=ts + i) for i in range(count)], base_offset=base_offset)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "00000000000000000000.log"


def test_append_returns_the_start_position_and_writes_at_the_end(path):
    f = LogFile(path, writable=True)
    a, b = batch(0, 2), batch(2, 3)
    assert f.append(a) == 0
    assert f.append(b) == len(a)
    assert f.size_bytes == len(a) + len(b)
    assert path.read_bytes() == a + b


def test_read_returns_the_bytes_at_a_position_and_fewer_at_the_end(path):
    f = LogFile(path, writable=True)
    a, b = batch(0, 2), batch(2, 3)
    f.append(a + b)
    assert f.read(len(a), len(b)) == b
    assert f.read(len(a), 10**6) == b
    assert f.read(len(a) + len(b), 10) == b""


def test_size_of_an_existing_file_is_its_length(path):
    path.write_bytes(batch(0) + batch(1))
    assert LogFile(path, writable=False).size_bytes == path.stat().st_size


def test_a_missing_file_has_size_zero(path):
    assert LogFile(path, writable=False).size_bytes == 0


def test_read_only_file_that_is_missing_cannot_be_read(path):
    with pytest.raises(StorageError):
        LogFile(path, writable=False).read(0, 10)


def test_truncate_to_cuts_the_file(path):
    f = LogFile(path, writable=True)
    a = batch(0)
    f.append(a + batch(1))
    f.truncate_to(len(a))
    f.flush()
    assert f.size_bytes == len(a) and path.read_bytes() == a


def test_a_read_only_file_reads_up_to_the_size_its_follower_measured(path):
    path.write_bytes(batch(0))
    reader = LogFile(path, writable=False)
    assert reader.size_bytes == len(batch(0))
    with open(path, "ab") as other:
        other.write(batch(1))
    assert [h.base_offset for h in reader.headers()] == [0]  # bytes appended since are not seen yet
    reader.size_bytes = os.stat(path).st_size  # what Segment.follow() does after its stat
    assert [h.base_offset for h in reader.headers()] == [0, 1]


# -- headers ---------------------------------------------------------------------------------
def test_headers_describe_each_batch(path):
    a, b = batch(0, 2), batch(2, 3, ts=T0 + 100)
    path.write_bytes(a + b)
    assert list(LogFile(path, writable=False).headers()) == [
        BatchHeader(0, len(a), 0, 1, 2, T0 + 1),
        BatchHeader(len(a), len(b), 2, 4, 2, T0 + 102),
    ]


def test_headers_start_and_end_bound_the_walk(path):
    a, b, c = batch(0), batch(1), batch(2)
    path.write_bytes(a + b + c)
    f = LogFile(path, writable=False)
    assert [h.base_offset for h in f.headers(len(a))] == [1, 2]
    assert [h.base_offset for h in f.headers(0, len(a) + len(b))] == [0, 1]
    assert [h.base_offset for h in f.headers(0, len(a) + len(b) - 1)] == [0]


@pytest.mark.parametrize("cut", [1, 11, 12, 17, 60, 61])
def test_headers_stop_before_a_torn_final_batch(path, cut):
    a, b = batch(0), batch(1, 5)
    path.write_bytes(a + b[:cut])
    assert [h.base_offset for h in LogFile(path, writable=False).headers()] == [0]


def test_headers_walk_past_the_scan_chunk(path):
    batches = [batch(i, 40) for i in range(0, 40 * 200, 40)]
    path.write_bytes(b"".join(batches))
    headers = list(LogFile(path, writable=False).headers())
    assert path.stat().st_size > 64 * 1024
    assert [h.base_offset for h in headers] == list(range(0, 40 * 200, 40))
    assert [h.size for h in headers] == [len(x) for x in batches]


def test_headers_fail_on_a_size_below_the_minimum(path):
    a = batch(0)
    bad = bytearray(batch(1))
    bad[8:12] = (3).to_bytes(4, "big")
    path.write_bytes(a + bad)
    with pytest.raises(CorruptRecordError) as e:
        list(LogFile(path, writable=False).headers())
    assert e.value.position == len(a) and e.value.path == str(path)


def test_headers_fail_on_an_unknown_magic(path):
    bad = bytearray(batch(0))
    bad[16] = 7
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptRecordError) as e:
        list(LogFile(path, writable=False).headers())
    assert e.value.position == 0 and e.value.path == str(path)


# -- files written by Kafka -------------------------------------------------------------------------
@needs_samples
@pytest.mark.parametrize("log_path", sample_logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_headers_of_a_kafka_file_match_kafkas_batches(log_path):
    rows = expected_rows(log_path)
    by_position = {}
    for r in rows:
        by_position.setdefault(r["position"], r)
    expected = [(r["position"], r["size"], r["last_offset"], r["magic"]) for r in by_position.values()]
    headers = list(LogFile(log_path, writable=False).headers())
    assert [(h.position, h.size, h.last_offset, h.magic) for h in headers] == expected
    assert all(h.max_timestamp == by_position[h.position]["max_timestamp"] for h in headers if h.magic == 2)


def test_a_read_keeps_its_descriptor_open_while_another_thread_releases_the_file(path, monkeypatch):
    """The bound on open files (and a segment's deletion) releases a file while another
    thread reads it: the read holds its handle, so its descriptor is neither closed under
    it (EBADF) nor reused by the next ``open`` (bytes of another file)."""
    f = LogFile(path, writable=True)
    f.append(batch(0, 3))
    f.flush()
    reader = LogFile(path, writable=False)
    real_pread_fully = file_module.pread_fully

    def released_first(fd, position, size):  # the interleaving: the release lands between open and read
        reader.release()
        return real_pread_fully(fd, position, size)

    monkeypatch.setattr(file_module, "pread_fully", released_first)
    assert reader.read(0, 20) == batch(0, 3)[:20]
    assert [h.base_offset for h in reader.headers()] == [0]
