"""Damaged side files (indexes, snapshots, checkpoints) and bit flips in closed segments:
detected, rebuilt or ignored as Kafka does; data is never returned wrong."""

from __future__ import annotations

import os
import random
import shutil
import struct

import pytest

from pylog import CorruptRecordError, Log, PylogError, Record
from tests.conftest import needs_samples, sample_partitions


def _make(d, n=300, **cfg):
    with Log.open(d, segment_bytes=3000, index_interval_bytes=200, **cfg) as log:
        for i in range(n):
            log.append([Record(b"value-%05d" % i, key=b"k%d" % (i % 10), timestamp=1_700_000_000_000 + i)],
                       producer_id=1, producer_epoch=0, base_sequence=i)
    return [(r.offset, r.value) for r in Log.open(d, read_only=True).records()]


DAMAGE = {
    "garbage": lambda data: os.urandom(len(data) or 17),
    "zeroed": lambda data: b"\0" * len(data),
    "truncated": lambda data: data[: len(data) // 2 + 1],
    "missing": None,
}


@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".snapshot"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_side_files_never_change_what_is_read(tmp_path, suffix, damage):
    d = tmp_path / "t-0"
    before = _make(d)
    victims = sorted(p for p in d.iterdir() if p.name.endswith(suffix))
    assert victims
    for p in dict.fromkeys(victims[:3] + victims[-1:]):  # a log keeps only a few snapshots
        if DAMAGE[damage] is None:
            p.unlink()
        else:
            p.write_bytes(DAMAGE[damage](p.read_bytes()))
    for read_only in (True, False):
        with Log.open(d, read_only=read_only, segment_bytes=3000, index_interval_bytes=200) as log:
            assert [(r.offset, r.value) for r in log.records()] == before
            mid = before[len(before) // 2][0]
            assert log.read(mid).records()[0].offset == mid
            assert log.offset_for_timestamp(1_700_000_000_000 + mid) == mid
    with Log.open(d, segment_bytes=3000, index_interval_bytes=200) as log:
        assert log.append([b"more"], producer_id=1, producer_epoch=0, base_sequence=300).first_offset == 300


@pytest.mark.parametrize("which", ["active", "closed"])
def test_a_plausible_time_index_naming_offsets_past_the_log_is_rebuilt(tmp_path, which):
    """Garbage can pass Kafka's time-index sanity check (last timestamp >= first, offset >=
    base); an entry past the segment's last offset must still not be trusted."""
    d = tmp_path / "t-0"
    before = _make(d)
    victims = sorted(p for p in d.iterdir() if p.name.endswith(".timeindex"))
    victim = victims[-1] if which == "active" else victims[0]
    victim.write_bytes(struct.pack(">qi", 1_700_000_000_000, 1_000_000))
    with Log.open(d, segment_bytes=3000, index_interval_bytes=200) as log:
        assert [(r.offset, r.value) for r in log.records()] == before
        assert log.offset_for_timestamp(1_700_000_000_000 + 7) == 7
        assert log.append([b"more"], producer_id=1, producer_epoch=0, base_sequence=300).first_offset == 300
    with Log.open(d, read_only=True) as log:
        assert log.check() == []
        assert [r.offset for r in log.records()][-1] == 300


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                  "replication-offset-checkpoint"])
def test_damaged_checkpoints_fall_back_safely(tmp_path, name):
    d = tmp_path / "t-0"
    before = _make(d)
    (tmp_path / name).write_bytes(b"0\n7\ngarbage here\n")
    with Log.open(d) as log:
        assert [(r.offset, r.value) for r in log.records()] == before


def test_bit_flip_in_a_closed_segment_is_reported_with_segment_and_position(tmp_path):
    d = tmp_path / "t-0"
    _make(d)
    with Log.open(d, read_only=True) as log:
        seg = log.segments[1]
        h = list(seg.headers())[2]
    with open(seg.log_path, "r+b") as f:
        f.seek(h.position + 70)
        b = f.read(1)
        f.seek(h.position + 70)
        f.write(bytes([b[0] ^ 0x08]))
    with Log.open(d, read_only=True) as log:
        with pytest.raises(CorruptRecordError) as e:
            list(log.records())
        assert e.value.path == seg.log_path and e.value.position == h.position
        problems = log.check()
        assert any(seg.log_path in p and str(h.position) in p for p in problems)


@needs_samples
@pytest.mark.parametrize("part", sample_partitions(), ids=lambda p: p.name)
def test_mutated_kafka_samples_raise_only_pylog_errors(tmp_path, part):
    rng = random.Random(part.name)
    for trial in range(3):
        d = tmp_path / f"m{trial}" / part.name
        shutil.copytree(part, d)
        files = sorted(p for p in d.iterdir() if p.is_file() and p.stat().st_size)
        for _ in range(5):
            p = rng.choice(files)
            data = bytearray(p.read_bytes())
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= rng.randint(1, 255)
            p.write_bytes(bytes(data))
        for read_only in (True, False):
            try:
                with Log.open(d, read_only=read_only) as log:
                    for _ in log.records():
                        pass
                    log.check()
            except PylogError:
                pass


@pytest.mark.parametrize("bit", [0, 3, 17, 40, 63])
@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writable"])
def test_a_flipped_base_offset_in_a_closed_segment_is_refused(tmp_path, bit, read_only):
    """The base offset lies outside the CRC: a flipped bit there must not move records to
    other offsets. Reads refuse the batch, naming the file and where."""
    d = tmp_path / "t-0"
    with Log.open(d, segment_bytes=3000) as log:
        for i in range(300):
            log.append([Record(b"%08d" % i)])
    with Log.open(d, read_only=True) as log:
        seg = log.segments[2]
        headers = list(seg.headers())
        victim = headers[3]
    with open(seg.log_path, "r+b") as f:  # bit 0 is the lowest of the big-endian int64
        f.seek(victim.position + 7 - bit // 8)
        b = f.read(1)
        f.seek(victim.position + 7 - bit // 8)
        f.write(bytes([b[0] ^ (1 << bit % 8)]))
    with Log.open(d, read_only=read_only) as log:
        with pytest.raises(CorruptRecordError) as e:
            list(log.records())
        assert e.value.path == seg.log_path and e.value.position in (victim.position, headers[4].position)
        refused = 0
        for offset in range(300):
            try:
                records = log.read(offset).records()
            except CorruptRecordError:
                refused += 1
                continue
            assert all(r.value == b"%08d" % r.offset for r in records), offset
        assert refused
