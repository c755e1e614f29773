"""The columnar decode of fetch after fetch through one reused read buffer (what
``Consumer.poll_columns`` reads with): the same columns as ``FetchData.columns``, none of
them a view of the buffer, every CRC checked; and ``scan_columns``, which must give what the
pure-Python decode gives, key and value data at their exact size."""

from __future__ import annotations

import glob
import os
import random
import struct

import crc32c
import pytest

from pylog import CorruptRecordError, InvalidRecordError, Log, decode_batches, encode_batch
from pylog.record import backend
from pylog.record.batch import decode_v2_records
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
def test_scan_columns_gives_each_records_key_and_value_with_data_at_its_exact_size():
    records = [(b"k%d" % i, b"v" * i) for i in range(40)] + [None, (b"", b""), (None, b"w" * 300)]
    data = encode_batch(records, base_offset=7, timestamp=5)
    offsets, stamps, kd, ko, kv, vd, vo, vv = _scan("scan_columns", data)
    want = list(decode_batches(data))[0].records()
    keys = [kd[a:b] if valid else None for a, b, valid in zip(_ints(ko), _ints(ko)[1:], kv)]
    values = [vd[a:b] if valid else None for a, b, valid in zip(_ints(vo), _ints(vo)[1:], vv)]
    assert keys == [r.key for r in want] and values == [r.value for r in want]
    assert struct.unpack(f"<{len(want)}q", offsets) == tuple(range(7, 7 + len(want)))
    assert len(kd) == sum(len(b"k%d" % i) for i in range(40)) and len(vd) == sum(range(40)) + 300


def _ints(raw: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(raw) // 4}i", raw))


@needs_c
def test_scan_columns_accepts_and_refuses_what_the_pure_python_decode_does():
    data = encode_batch([(b"k%d" % i, b"v" * (i * 7 % 200)) for i in range(60)], timestamp=1)
    rng = random.Random(1)
    for _ in range(2000):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            buf[rng.randrange(61, len(buf))] ^= rng.randrange(1, 256)
        try:
            with backend.use("python"):
                values = [r.value for r in decode_v2_records(bytes(buf[61:]), 60, 0, 1, None)]
        except InvalidRecordError:
            values = ValueError
        try:
            _, _, _, _, _, vd, vo, vv = _scan("scan_columns", bytes(buf))
            scanned = [vd[a:b] if valid else None for a, b, valid in zip(_ints(vo), _ints(vo)[1:], vv)]
        except ValueError:
            scanned = ValueError
        assert scanned == values


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


@needs_c
def test_batch_parts_walks_plain_batches_in_c_and_leaves_a_compressed_one_to_the_general_path(tmp_path):
    from pylog import _speedups
    log = _log(tmp_path / "t-0", [[b"a"] * 3, [b"b"] * 2])
    log.append([b"t"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append_txn_marker(7, 0, commit=True)
    fetch = log.read(1, 1 << 20)
    parts = [p for chunk in fetch.batch_parts(_speedups.scan_batches) for p in chunk]
    # (count, base offset, append time, last offset) of each data batch: the commit marker left out
    assert [(p[1], p[2], p[4], p[5]) for p in parts] == [(3, 0, None, 2), (2, 3, None, 4), (1, 5, None, 5)]
    assert [bytes(p[0]) for p in parts] == [bytes(b.raw()[61:]) for b in log.read(1, 1 << 20).batches()
                                            if not b.is_control]
    assert fetch.next_offset == 7 == log.log_end_offset
    log.append([b"z"] * 5, compression="gzip")
    assert list(log.read(0, 1 << 20).batch_parts(_speedups.scan_batches))[-1] is None
