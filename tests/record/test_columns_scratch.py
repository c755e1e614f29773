"""The columnar decode of fetch after fetch through one reused read buffer (what
``Consumer.poll_columns`` reads with): the same columns as ``FetchData.columns``, none of
them a view of the buffer, every CRC checked; and ``scan_columns_exact``, which must give
what ``scan_columns`` gives, key and value data at their exact size."""

from __future__ import annotations

import glob
import os
import random
import struct

import crc32c
import pytest

from pylog import CorruptRecordError, InvalidRecordError, Log, decode_batches, encode_batch
from pylog.record import backend
from pylog.record.columns_scratch import ColumnsScratch

BIG = 10**18


def _log(path, batches):
    log = Log.open(str(path))
    for records in batches:
        log.append(records)
    return log


def test_a_fetch_decodes_to_the_columns_fetch_columns_gives_with_the_last_rows_leader_epoch(tmp_path, impl):
    log = _log(tmp_path / "t-0", [[(b"k%d" % i, b"v" * i) for i in range(30)], [None, b"", (b"k", None)]])
    fetch = log.read(0, 1 << 20)
    cols, epoch = ColumnsScratch().decode(fetch, 0, BIG)
    want = log.read(0, 1 << 20).columns()
    assert cols.offsets.tolist() == want.offsets.tolist() == list(range(33))
    assert cols.keys() == want.keys() and cols.values() == want.values()
    assert cols.timestamps.tolist() == want.timestamps.tolist()
    assert cols.timestamp_types.tolist() == want.timestamp_types.tolist()
    assert isinstance(cols.key_data, bytes) and isinstance(cols.value_data, bytes)
    assert epoch == log.read(0, 1 << 20).batches()[-1].partition_leader_epoch


def test_offsets_outside_the_range_are_cut_inside_a_batch(tmp_path, impl):
    log = _log(tmp_path / "t-0", [[b"%d" % i for i in range(10)], [b"%d" % i for i in range(10, 20)]])
    cols, _ = ColumnsScratch().decode(log.read(3, 1 << 20), 3, 14)
    assert cols.offsets.tolist() == list(range(3, 14)) and cols.values() == [b"%d" % i for i in range(3, 14)]
    empty, epoch = ColumnsScratch().decode(log.read(0, 1 << 20), 20, BIG)
    assert empty.num_rows == 0 and epoch is None


def test_columns_stay_whole_after_the_buffer_reads_the_next_fetch(tmp_path, impl):
    log = _log(tmp_path / "t-0", [[b"a%04d" % i for i in range(100)], [b"b%04d" % i for i in range(100)]])
    scratch = ColumnsScratch()
    first, _ = scratch.decode(log.read(0, 1 << 20), 0, 100)
    second, _ = scratch.decode(log.read(100, 1 << 20), 100, BIG)
    assert first.values() == [b"a%04d" % i for i in range(100)]
    assert second.values() == [b"b%04d" % i for i in range(100)]


def test_a_flipped_byte_raises_a_corrupt_record_error_naming_its_batch(tmp_path, impl):
    log = _log(tmp_path / "t-0", [[b"x" * 50] * 10, [b"y" * 50] * 10, [b"w" * 50] * 10])
    second = log.read(0, 1 << 20).batches()[1].position
    log.close()
    segment = glob.glob(os.path.join(tmp_path, "t-0", "*.log"))[0]
    with open(segment, "r+b") as f:  # a value byte of the second batch (a bad last one is cut off at open)
        f.seek(second + 600)
        assert f.read(1) == b"y"
        f.seek(second + 600)
        f.write(b"z")
    with Log.open(str(tmp_path / "t-0"), read_only=True) as log, pytest.raises(CorruptRecordError) as e:
        ColumnsScratch().decode(log.read(0, 1 << 20), 0, BIG)
    assert e.value.position == second


def _scan(name: str, data: bytes):
    """``pylog._speedups``' function ``name`` on the batches of ``data``."""
    from pylog import _speedups
    return getattr(_speedups, name)([(b.raw()[61:], b.record_count, b.base_offset, b.base_timestamp, None)
                                     for b in decode_batches(data)])


needs_c = pytest.mark.skipif("c" not in backend.available(), reason="pylog._speedups is not built")


@needs_c
def test_scan_columns_exact_gives_scan_columns_result_with_data_at_its_exact_size():
    data = encode_batch([(b"k%d" % i, b"v" * i) for i in range(40)] + [None, (b"", b""), (None, b"w" * 300)],
                        base_offset=7, timestamp=5)
    exact, cut = _scan("scan_columns_exact", data), _scan("scan_columns", data)
    assert exact == cut
    assert len(exact[2]) == sum(len(b"k%d" % i) for i in range(40)) and len(exact[5]) == sum(range(40)) + 300


@needs_c
def test_scan_columns_exact_accepts_and_refuses_what_scan_columns_does():
    data = encode_batch([(b"k%d" % i, b"v" * (i * 7 % 200)) for i in range(60)], timestamp=1)
    rng = random.Random(1)
    for _ in range(2000):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            buf[rng.randrange(61, len(buf))] ^= rng.randrange(1, 256)
        outcomes = []
        for name in ("scan_columns_exact", "scan_columns"):
            try:
                outcomes.append(_scan(name, bytes(buf)))
            except ValueError:
                outcomes.append(ValueError)
        assert outcomes[0] == outcomes[1]


def test_a_structure_fault_raises_an_invalid_record_error_naming_the_batch(tmp_path, impl):
    log = _log(tmp_path / "t-0", [[b"a"] * 40])
    log.close()
    bad = bytearray(encode_batch([b"b"] * 40, base_offset=40, timestamp=1))
    bad[57:61] = struct.pack(">i", 39)  # one record fewer than the bytes hold
    bad[17:21] = struct.pack(">I", crc32c.crc32c(bytes(bad[21:])))
    segment = glob.glob(os.path.join(tmp_path, "t-0", "*.log"))[0]
    first_bytes = os.path.getsize(segment)
    with open(segment, "ab") as f:  # then a valid last batch: a read-only open keeps the bad one
        f.write(bad + encode_batch([b"c"], base_offset=80, timestamp=1))
    with Log.open(str(tmp_path / "t-0"), read_only=True) as log, pytest.raises(InvalidRecordError) as e:
        ColumnsScratch().decode(log.read(0, 1 << 20), 0, BIG)
    assert e.value.position == first_bytes
