"""The delete policy: time, size, log start offset; idempotent; never past the high watermark."""

from __future__ import annotations

import time

from pylog import Log, LogManager, Record
from tests.waiting import wait_until


def fill(log, n, ts0, step_ms=1000, size=200):
    for i in range(n):
        log.append([Record(b"%06d" % i + b"." * size, key=b"k%d" % i, timestamp=ts0 + i * step_ms)])


def test_time_retention_deletes_exactly_the_expired_prefix_and_persists_log_start(tmp_path):
    d = tmp_path / "t-0"
    now = int(time.time() * 1000)
    with Log.open(d, segment_bytes=2000, retention_ms=30_000, file_delete_delay_ms=0) as log:
        fill(log, 100, now - 100_000)
        segs = log.segments
        expired = [s.base_offset for s in segs[:-1] if now - s.max_timestamp > 30_000]
        removed = log.enforce_retention(now)
        assert removed == expired and removed
        start = log.log_start_offset
        assert start == log.segments[0].base_offset
        for r in log.records():
            assert r.timestamp >= now - 100_000 + (start - 1) * 1000
        assert log.enforce_retention(now) == []  # idempotent
    with Log.open(d) as log:
        assert log.log_start_offset == start


def test_size_retention_keeps_the_newest_data_under_the_limit(tmp_path):
    with Log.open(tmp_path / "t-0", segment_bytes=2000, retention_bytes=5000, retention_ms=-1,
                  file_delete_delay_ms=0) as log:
        fill(log, 100, int(time.time() * 1000))
        log.enforce_retention()
        assert log.size_bytes <= 5000 + 2000
        assert log.size_bytes - log.segments[0].size_bytes < 5000
        assert [r.offset for r in log.records()][-1] == 99


def test_retention_never_passes_the_high_watermark(tmp_path):
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", segment_bytes=2000, retention_ms=1000, auto_high_watermark=False,
                  file_delete_delay_ms=0) as log:
        fill(log, 50, now - 100_000)
        log.high_watermark = 20
        log.enforce_retention(now)
        assert log.log_start_offset <= 20
        assert all(s.next_offset > 20 for s in log.segments)


def test_expired_active_segment_is_rolled_then_deleted(tmp_path):
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", retention_ms=1000, file_delete_delay_ms=0) as log:
        fill(log, 5, now - 100_000)
        removed = log.enforce_retention(now)
        assert removed == [0]
        assert log.log_start_offset == log.log_end_offset == 5
        assert log.append([b"new"]).first_offset == 5


def test_reader_holding_a_fetch_of_a_deleted_segment_still_reads_it(tmp_path):
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", segment_bytes=2000, retention_ms=1000, file_delete_delay_ms=0) as log:
        fill(log, 40, now - 100_000)
        log.append([b"fresh"])
        fetch = log.read(0)
        log.enforce_retention(now)
        assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
        assert [r.offset for r in fetch.records()][0] == 0


def test_deleted_segments_are_renamed_then_removed_after_the_delay(tmp_path):
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", segment_bytes=2000, retention_ms=1000, file_delete_delay_ms=300) as log:
        fill(log, 40, now - 100_000)
        log.append([b"fresh"])
        started = time.monotonic()
        log.enforce_retention(now)
        names = [p.name for p in (tmp_path / "t-0").iterdir()]
        assert "00000000000000000000.log" not in names
        assert any(n.endswith(".log.deleted") for n in names) or time.monotonic() - started >= 0.3
        wait_until(lambda: not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir()),
                   "the .deleted files removed")
        assert time.monotonic() - started >= 0.3  # never removed before the delay


def test_closing_removes_the_deleted_segments_still_waiting_for_their_delay(tmp_path):
    """``pylog retention`` (or any process) exits right after closing: the files of the
    segments it deleted, waiting out ``file_delete_delay_ms``, used to stay on disk until
    the log's next open. A fetch planned before still reads them: it holds them open."""
    now = int(time.time() * 1000)
    log = Log.open(tmp_path / "t-0", segment_bytes=2000, retention_ms=1000)  # the default delay: 60 s
    fill(log, 40, now - 100_000)
    log.append([b"fresh"])
    fetch = log.read(0)
    assert log.enforce_retention(now)
    assert any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())
    log.close()
    assert not [p.name for p in (tmp_path / "t-0").iterdir() if p.name.endswith(".deleted")]
    assert [r.offset for r in fetch.records()][0] == 0


def test_background_cleaner_applies_retention_to_every_log(tmp_path):
    now = int(time.time() * 1000)
    with LogManager(tmp_path, retention_ms=1000, segment_bytes=2000, file_delete_delay_ms=0) as m:
        t = m.create_topic("t", 2)
        for p in range(2):
            fill(t.log(p), 30, now - 100_000)
        cleaner = m.start_cleaner(interval_ms=50)
        wait_until(lambda: all(m.log("t", p).log_start_offset > 0 for p in range(2)), "retention on both logs")
        assert all(m.log("t", p).log_start_offset == 30 for p in range(2))
        assert cleaner.errors == []


def test_retention_settings_changed_on_an_open_log_apply_to_its_next_pass(tmp_path):
    """``update_config`` (what ``pylog configs --alter`` rings client processes to call)
    reaches retention, as a Kafka broker's altered topic config reaches its next pass."""
    now = int(time.time() * 1000)
    with Log.open(tmp_path / "t-0", segment_bytes=2000, file_delete_delay_ms=0) as log:
        fill(log, 100, now - 100_000)
        assert log.enforce_retention(now) == []  # retention.ms 7 days: nothing expired
        log.update_config({"retention_ms": 30_000})
        assert log.enforce_retention(now) and log.log_start_offset > 0
        log.update_config({"retention_ms": -1, "retention_bytes": 5000})
        log.enforce_retention(now)
        assert log.size_bytes - log.segments[0].size_bytes < 5000
