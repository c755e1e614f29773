"""The compact policy: latest value per key at its offset, tombstones, crash safety, bounded memory."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time

import pytest

from pylog import Log, Record
from pylog.record import decode_batches
from pylog.retention import compact

CFG = dict(segment_bytes=3000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
           file_delete_delay_ms=0, delete_retention_ms=1000)


def write_updates(log, n, keys, seed=0):
    rng = random.Random(seed)
    latest = {}
    now = int(time.time() * 1000)
    for i in range(n):
        k = b"key-%d" % rng.randrange(keys)
        info = log.append([Record(b"v%d" % i, key=k, timestamp=now)])
        latest[k] = (info.first_offset, b"v%d" % i)
    log.append([Record(b"tail", key=b"tail", timestamp=now)])  # leaves the rest cleanable
    log.roll()
    return latest


def contents(log):
    return {r.key: (r.offset, r.value) for r in log.records()}


def test_compaction_keeps_exactly_the_latest_value_per_key_at_its_offset(tmp_path):
    with Log.open(tmp_path / "t-0", **CFG) as log:
        latest = write_updates(log, 600, 40)
        before = log.size_bytes
        result = log.compact()
        assert result.records_removed > 0 and log.size_bytes < before
        got = [(r.offset, r.key, r.value) for r in log.records()]
        assert {k: (o, v) for o, k, v in got if k != b"tail"} == latest
        assert len(got) == len(latest) + 1
        assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
        assert log.check() == []


def test_read_in_a_gap_lands_on_the_next_retained_record(tmp_path):
    with Log.open(tmp_path / "t-0", **CFG) as log:
        latest = write_updates(log, 300, 10)
        log.compact()
        kept = sorted(o for o, _ in latest.values())
        gap = next(o for o in range(kept[-1]) if o not in kept)
        first = log.read(gap).records()[0]
        assert first.offset == min(o for o in kept if o > gap)


def test_tombstones_survive_until_the_delete_horizon_then_go(tmp_path):
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", **CFG) as log:
        for i in range(50):
            log.append([Record(b"x" * 80, key=b"a%d" % (i % 5), timestamp=now)])
        log.append([Record(None, key=b"a1", timestamp=now)])
        log.append([Record(b"z", key=b"tail", timestamp=now)])
        log.roll()
        log.compact(now_ms=now, force=True)
        assert contents(log)[b"a1"][1] is None  # kept: horizon not reached
        log.compact(now_ms=now + 5000, force=True)
        assert b"a1" not in contents(log)


def test_cleaned_segments_decode_with_kafka_python(tmp_path):
    from kafka.record.default_records import DefaultRecordBatch
    with Log.open(tmp_path / "t-0", compression="gzip", **CFG) as log:
        write_updates(log, 400, 20)
        log.compact()
        n = 0
        for seg in log.segments:
            for b in decode_batches(open(seg.log_path, "rb").read()):
                kb = DefaultRecordBatch(bytearray(b.raw()))
                assert kb.validate_crc()
                n += len(list(kb))
        assert n == len(list(log.records()))


def test_many_keys_with_a_tiny_memory_budget_compact_in_several_passes(tmp_path):
    with Log.open(tmp_path / "t-0", **CFG) as log:
        latest = write_updates(log, 1500, 400, seed=3)
        result = compact(log, budget_bytes=120 * 50, force=True)  # room for 50 keys
        assert result.passes > 1
        got = {r.key: (r.offset, r.value) for r in log.records() if r.key != b"tail"}
        assert got == latest


def test_active_segment_and_unstable_offsets_are_never_cleaned(tmp_path):
    with Log.open(tmp_path / "t-0", **CFG) as log:
        now = int(time.time() * 1000)
        for i in range(20):
            log.append([Record(b"v%d" % i, key=b"same", timestamp=now)])
        log.compact(force=True)
        assert len(list(log.records())) == 20  # all in the active segment


CRASHER = textwrap.dedent("""
    import sys, time
    from pylog import Log, Record
    log = Log.open(sys.argv[1], segment_bytes=3000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                   file_delete_delay_ms=0)
    log.compact()
    print("survived")
""")


@pytest.mark.parametrize("failpoint", ["compact.cleaned-written", "swap.renamed", "swap.old-deleted",
                                       "compact.swapped"])
def test_crash_at_each_step_of_a_swap_loses_nothing(tmp_path, failpoint):
    d = tmp_path / "t-0"
    with Log.open(d, **CFG) as log:
        latest = write_updates(log, 500, 30)
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "PYLOG_FAILPOINTS": failpoint}
    proc = subprocess.run([sys.executable, "-c", CRASHER, str(d)], env=env, capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    with Log.open(d, **CFG) as log:
        got = {}
        offsets = []
        for r in log.records():
            got[r.key] = (r.offset, r.value)
            offsets.append(r.offset)
        assert offsets == sorted(set(offsets))
        assert {k: v for k, v in got.items() if k != b"tail"} == latest
        assert log.check() == []


def _markers(log):
    """(offset, type, delete horizon) of every transaction marker on disk."""
    out = []
    for seg in log.segments:
        with open(seg.log_path, "rb") as f:
            for b in decode_batches(f.read()):
                if b.is_control and b.records():
                    out.append((b.base_offset, b.records()[0].control_type, b.delete_horizon_ms))
    return out


def test_transaction_markers_go_as_kafkas_cleaner_lets_them(tmp_path):
    """Aborted records go in the first pass; a marker stays while the pass met batches of
    its transaction, is then stamped with a delete horizon, and goes after it."""
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", **CFG) as log:
        def txn(pid, seq, keys, commit):
            log.append([Record(b"%s-txn" % k, key=k, timestamp=now) for k in keys], producer_id=pid,
                       producer_epoch=0, base_sequence=seq, is_transactional=True)
            return log.append_txn_marker(pid, 0, commit=commit).first_offset

        abort_at = txn(7, 0, [b"k1", b"k2", b"k3"], commit=False)
        commit_at = txn(8, 0, [b"c1", b"c2"], commit=True)
        for k in (b"c1", b"c2"):  # the committed transaction's records are superseded
            log.append([Record(k + b"-new", key=k, timestamp=now)])
        txn(7, 3, [b"k9"], commit=True)  # both producers go on, so neither marker is a last batch
        txn(8, 2, [b"d1"], commit=True)
        log.append([Record(b"tail", key=b"tail", timestamp=now)])
        log.roll()
        expected = {b"c1": b"c1-new", b"c2": b"c2-new", b"k9": b"k9-txn", b"d1": b"d1-txn", b"tail": b"tail"}

        def visible(isolation):
            return {r.key: r.value for r in log.records(isolation=isolation)}

        assert visible("committed") == expected
        log.compact(now_ms=now, force=True)
        assert visible("uncommitted") == visible("committed") == expected  # aborted records are gone
        first = {off: horizon for off, _, horizon in _markers(log)}
        assert first[abort_at] is None and first[commit_at] is None  # their batches were met this pass
        indexed = [t.last_offset for seg in log.segments for t in seg.txn_index.entries()]
        assert indexed == [abort_at]  # a kept ABORT marker keeps its .txnindex entry

        log.compact(now_ms=now, force=True)
        second = {off: horizon for off, _, horizon in _markers(log)}
        assert second[abort_at] == second[commit_at] == now + CFG["delete_retention_ms"]
        assert visible("committed") == expected
        assert [t for seg in log.segments for t in seg.txn_index.entries()] == []

        log.compact(now_ms=now + 5000, force=True)
        third = {off for off, _, _ in _markers(log)}
        assert abort_at not in third and commit_at not in third
        assert len(third) == 2  # the markers of the transactions whose records remain
        assert visible("committed") == expected
        assert log.check() == []
    with Log.open(tmp_path / "t-0", **CFG) as log:  # and the producers' state survives it
        assert log.append([Record(b"again", key=b"k9")], producer_id=7, producer_epoch=0,
                          base_sequence=4).first_offset > 0


def _txn(log, pid, seq, records, commit):
    """A transaction of ``pid`` (epoch 0) holding ``records``, ended by a marker."""
    log.append(records, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
    return log.append_txn_marker(pid, 0, commit=commit).first_offset


def test_an_aborted_record_never_supersedes_the_committed_value_of_its_key(tmp_path):
    with Log.open(tmp_path / "t-0", **CFG) as log:
        log.append([Record(b"v1-committed", key=b"K")])
        _txn(log, 7, 0, [Record(b"v2-aborted", key=b"K")], commit=False)
        log.append([Record(b"x", key=b"other")])
        log.roll()
        log.append([Record(b"y", key=b"y")])
        log.compact(force=True)
        for isolation in ("uncommitted", "committed"):
            values = [(r.offset, r.value) for r in log.records(isolation=isolation) if r.key == b"K"]
            assert values == [(0, b"v1-committed")], isolation
        assert log.check() == []


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_an_emptied_batch_kept_for_its_producer_is_kafkas_61_byte_header(tmp_path, compression):
    from kafka.record.default_records import DefaultRecordBatch
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", compression=compression, **CFG) as log:
        log.append([Record(b"a", key=b"K", timestamp=now - 5), Record(b"b", key=b"L", timestamp=now)],
                   producer_id=7, producer_epoch=3, base_sequence=0)
        log.append([Record(b"a2", key=b"K"), Record(b"b2", key=b"L")])
        log.roll()
        log.compact(force=True)
        first = next(iter(decode_batches(open(log.segments[0].log_path, "rb").read())))
        assert (first.base_offset, first.last_offset, first.size, len(first)) == (0, 1, 61, 0)
        assert first.attributes == 0 and first.base_timestamp == -1 and first.max_timestamp == now
        assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 3, 0)
        kb = DefaultRecordBatch(bytearray(first.raw()))
        assert kb.validate_crc() and list(kb) == []
        assert log.check() == []
    with Log.open(tmp_path / "t-0", **CFG) as log:  # the producer's sequence survived
        log.append([Record(b"c", key=b"K")], producer_id=7, producer_epoch=3, base_sequence=2)


def last_stable_offset_inside_a_segment(log) -> int:
    """Two rolled segments and an active one: the first (offsets 0-1) wholly below the last
    stable offset; the second (2-6) holding it, the first offset (5) of producer 8's open
    transaction, below which lie a superseded value (2) and producer 7's aborted record (4),
    whose ABORT marker (7) is in the active segment. Returns the last stable offset."""
    log.append([Record(b"old", key=b"K")])
    log.append([Record(b"new", key=b"K")])
    log.roll()
    log.append([Record(b"old2", key=b"K2")])
    log.append([Record(b"new2", key=b"K2")])
    log.append([Record(b"aborted", key=b"A")], producer_id=7, producer_epoch=0, base_sequence=0,
               is_transactional=True)
    log.append([Record(b"open", key=b"O")], producer_id=8, producer_epoch=0, base_sequence=0,
               is_transactional=True)
    log.append([Record(b"after", key=b"N")])
    log.roll()
    log.append_txn_marker(7, 0, commit=False)
    return log.last_stable_offset


def test_the_segment_holding_the_last_stable_offset_is_not_cleaned(tmp_path):
    """Kafka's first uncleanable offset is the base offset of the segment holding the last
    stable offset (LogCleanerManager.calculateCleanableBytes): only the segments wholly below
    it are cleaned, and the next pass starts at that segment."""
    with Log.open(tmp_path / "t-0", **CFG) as log:
        assert last_stable_offset_inside_a_segment(log) == 5
        log.compact(force=True)
        assert [(r.offset, r.value) for r in log.records()] == [
            (1, b"new"), (2, b"old2"), (3, b"new2"), (4, b"aborted"), (5, b"open"), (6, b"after")]
        assert log.cleaner_view.first_dirty_offset == 2
        log.append_txn_marker(8, 0, commit=True)  # the last stable offset moves on: all is cleanable
        log.roll()
        log.compact(force=True)
        assert [(r.offset, r.value) for r in log.records()] == [
            (1, b"new"), (3, b"new2"), (5, b"open"), (6, b"after")]
        assert log.check() == []


def abort_marker_in_the_active_segment(log) -> None:
    """A rolled segment holding producer 7's aborted records (offsets 1, 2) between two plain
    ones (0, 3); the ABORT marker (4) opens the active segment."""
    log.append([Record(b"v0", key=b"K0")])
    log.append([Record(b"a1", key=b"A1")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    log.append([Record(b"a2", key=b"A2")], producer_id=7, producer_epoch=0, base_sequence=1, is_transactional=True)
    log.append([Record(b"after", key=b"N")])
    log.roll()
    log.append_txn_marker(7, 0, commit=False)


def test_an_aborted_transaction_goes_when_its_abort_marker_is_in_the_active_segment(tmp_path):
    """The aborted transactions of a pass come from every segment's .txnindex, the active
    one's too (Kafka's collectAbortedTransactions): the records go, the producer's last batch
    stays as a 61-byte header."""
    with Log.open(tmp_path / "t-0", **CFG) as log:
        abort_marker_in_the_active_segment(log)
        log.compact(force=True)
        assert [(r.offset, r.value) for r in log.records()] == [(0, b"v0"), (3, b"after")]
        with open(log.segments[0].log_path, "rb") as f:
            assert [(b.base_offset, len(b), b.size) for b in decode_batches(f.read())][1] == (2, 0, 61)
        assert log.check() == []


def test_compaction_memory_is_bounded_by_the_walk_chunk_not_the_segment_size(tmp_path, monkeypatch):
    """A segment much larger than the batch walker's chunk is cleaned while peak memory
    stays a fraction of its size: compaction never holds a whole segment."""
    import tracemalloc

    import pylog.segment.file
    chunk_bytes = 64 * 1024
    monkeypatch.setattr(pylog.segment.file, "WALK_CHUNK_BYTES", chunk_bytes, raising=False)
    value = b"x" * 8000
    with Log.open(tmp_path / "t-0", **dict(CFG, segment_bytes=16 << 20)) as log:
        for i in range(500):
            log.append([Record(value, key=b"k%d" % (i % 10))])
        log.roll()
        segment_bytes = log.segments[0].size_bytes
        tracemalloc.start()
        try:
            result = compact(log, force=True)
            peak_bytes = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.cleaned_segments == [0] and result.records_removed == 490
        assert [r.key for r in log.records()] == [b"k%d" % i for i in range(10)]
    assert segment_bytes > 50 * chunk_bytes
    assert peak_bytes < segment_bytes / 8, (peak_bytes, segment_bytes)


def test_a_delete_retention_changed_on_an_open_log_applies_to_its_next_pass(tmp_path):
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", **dict(CFG, delete_retention_ms=86_400_000)) as log:
        for i in range(50):
            log.append([Record(b"x" * 80, key=b"a%d" % (i % 5), timestamp=now)])
        log.append([Record(None, key=b"a1", timestamp=now)])
        log.append([Record(b"z", key=b"tail", timestamp=now)])
        log.roll()
        log.update_config({"delete_retention_ms": 1000})
        log.compact(now_ms=now, force=True)  # stamps the tombstone's delete horizon: now + 1 s
        assert contents(log)[b"a1"][1] is None
        log.compact(now_ms=now + 5000, force=True)
        assert b"a1" not in contents(log)
