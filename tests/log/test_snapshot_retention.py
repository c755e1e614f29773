"""Which producer snapshots a log keeps: Kafka's rule, at load, on roll and on retention."""

from __future__ import annotations

import os
import time

from pylog import Log, Record
from pylog.producer_state import encode_snapshot


def snapshots(d) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".snapshot"))


def send(log, seq, pid=7):
    return log.append([Record(b"v%d" % seq)], producer_id=pid, producer_epoch=0, base_sequence=seq)


def kafka_kept(log) -> list[int]:
    """What Kafka keeps after a close: the last two segments' snapshots and the one at the log end."""
    bases = [s.base_offset for s in log.segments]
    return sorted({b for b in bases[-2:] if b > log.log_start_offset} | {log.log_end_offset})


def test_open_append_close_cycles_keep_a_bounded_number_of_snapshots(tmp_path):
    d = tmp_path / "t-0"
    for seq in range(200):
        with Log.open(d) as log:
            send(log, seq)
    assert snapshots(d) == [199, 200]  # the last close's, and the one before it (a stray newer than every segment)
    with Log.open(d) as log:
        assert snapshots(d) == [200]  # strays go at load, the newest past every segment stays
        assert send(log, 199).duplicate  # and the state it holds is the right one


def test_rolls_and_retention_keep_only_what_kafka_keeps(tmp_path):
    d = tmp_path / "t-0"
    now = int(time.time() * 1000)
    cfg = dict(segment_bytes=400, retention_bytes=2000, retention_ms=-1, file_delete_delay_ms=0)
    for cycle in range(20):
        with Log.open(d, **cfg) as log:
            for i in range(15):
                seq = cycle * 15 + i
                log.append([Record(b"x" * 50, timestamp=now)], producer_id=7, producer_epoch=0, base_sequence=seq)
            log.enforce_retention(now)
            assert len(log.segments) > 3
            expected = kafka_kept(log)
            below = {s for s in snapshots(d) if s < log.segments[-2].base_offset}
            assert not below, below  # pruned at every recovery-point checkpoint, as Kafka does
        assert snapshots(d) == expected
    with Log.open(d, **cfg) as log:
        assert send(log, 20 * 15 - 1).duplicate


def test_stray_snapshots_of_no_segment_are_removed_at_load(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, segment_bytes=300) as log:
        for seq in range(30):
            send(log, seq)
        bases = [s.base_offset for s in log.segments]
        leo = log.log_end_offset
    stray = [bases[1] + 1, bases[2] + 1, leo + 5]
    for off in stray:
        (d / f"{off:020d}.snapshot").write_bytes(encode_snapshot([]))
    with Log.open(d, read_only=True):
        pass
    assert set(stray) <= set(snapshots(d))  # a read-only open deletes nothing
    with Log.open(d, segment_bytes=300) as log:
        left = snapshots(d)
        assert not set(stray) & set(left)
        assert set(left) <= set(bases) | {leo}
        assert send(log, 29).duplicate
