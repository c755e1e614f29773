"""Real Kafka partition directories open, read like Kafka, and keep (or rebuild) their indexes."""

from __future__ import annotations

import hashlib
import os

import pytest

from pylog import Log
from tests.conftest import needs_samples, sample_partitions
from tests.record.expected import expected_rows

PARTITIONS = sample_partitions()


def _expected(part_dir):
    rows = []
    for name in sorted(os.listdir(part_dir)):
        if name.endswith(".log"):
            rows += expected_rows(part_dir / name)
    return rows


def _data_rows(rows):
    return [r for r in rows if r["control_type"] is None]


def _check_reads_like_kafka(log, part_dir):
    rows = _data_rows(_expected(part_dir))
    got = list(log.records())
    assert [r.offset for r in got] == [r["offset"] for r in rows]
    assert [r.timestamp for r in got] == [r["timestamp"] for r in rows]
    assert [None if r.value is None else hashlib.sha256(r.value).hexdigest() for r in got] == \
        [r["value_sha256"] for r in rows]
    if rows:
        mid = rows[len(rows) // 2]
        assert log.read(mid["offset"]).records()[0].offset == mid["offset"]
        # by timestamp: Kafka's answer is the first record in log order with ts >= target
        target = mid["timestamp"]
        want = next(r["offset"] for r in rows if r["timestamp"] >= target)
        assert log.offset_for_timestamp(target) == want


@needs_samples
@pytest.mark.parametrize("part_dir", PARTITIONS, ids=lambda p: p.name)
def test_kafka_partition_opens_read_only_and_reads_like_kafka(part_dir):
    before = {n: os.stat(part_dir / n).st_mtime_ns for n in os.listdir(part_dir)}
    with Log.open(part_dir, read_only=True) as log:
        _check_reads_like_kafka(log, part_dir)
        rows = _expected(part_dir)
        assert log.log_end_offset == (rows[-1]["last_offset"] + 1 if rows else 0)
    assert {n: os.stat(part_dir / n).st_mtime_ns for n in os.listdir(part_dir)} == before


@needs_samples
@pytest.mark.parametrize("part_dir", PARTITIONS, ids=lambda p: p.name)
def test_kafka_partition_copy_opens_writable_rebuilds_indexes_and_appends(part_dir, copy_sample):
    path = copy_sample(part_dir)
    with Log.open(path) as log:
        _check_reads_like_kafka(log, part_dir)
        end = log.log_end_offset
        info = log.append([b"after kafka"])
        assert info.first_offset == end
        assert log.check() == []
    for name in os.listdir(path):
        if name.endswith(".log"):
            assert os.path.exists(path / name.replace(".log", ".index"))
    with Log.open(path) as log:
        assert [r.value for r in log.records(end)] == [b"after kafka"]


@needs_samples
@pytest.mark.parametrize("part_dir", PARTITIONS, ids=lambda p: p.name)
def test_kafka_partition_last_stable_offset_from_its_snapshot_agrees_with_a_whole_replay(part_dir):
    """The reader's last stable offset starts from Kafka's newest producer snapshot; a
    committed read replays the whole log. Both give the same answer."""
    with Log.open(part_dir, read_only=True) as fresh, Log.open(part_dir, read_only=True) as whole:
        list(whole.records(isolation="committed"))
        assert fresh.last_stable_offset == whole.last_stable_offset


@needs_samples
@pytest.mark.parametrize("start, end", [(0, 8), (2, 4), (1, 2), (8, 9)])
def test_records_between_offsets_inside_legacy_compressed_wrappers(tmp_path, start, end):
    """A v1 lz4 wrapper of three records carries the offset of its last one; a range
    ending or starting inside one still yields each of its records."""
    import shutil
    from tests.conftest import SAMPLES
    shutil.copytree(SAMPLES / "reference" / "v1-lz4", tmp_path / "t-0")
    with Log.open(tmp_path / "t-0", read_only=True) as log:
        assert [r.offset for r in log.records(start, end)] == list(range(start, end))
