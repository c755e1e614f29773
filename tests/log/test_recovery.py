"""Opening after an unclean stop: torn tails, garbage, SIGKILL mid-append."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pylog import Log, Record
from pylog.layout import CLEAN_SHUTDOWN_FILE


def _write(path, batches, **cfg):
    now = int(time.time() * 1000)
    with Log.open(path, **cfg) as log:
        for i in range(batches):
            log.append([Record(b"value-%d" % i, key=b"k%d" % i, timestamp=now + i)])
        return [s.log_path for s in log.segments]


def _crash_state(path):
    """Make the directory look like the writer died: no clean-shutdown marker in its log dir."""
    os.remove(os.path.join(os.path.dirname(path), CLEAN_SHUTDOWN_FILE))


def test_torn_tail_at_every_byte_keeps_complete_batches(tmp_path):
    src = tmp_path / "src-0"
    _write(src, 3)
    log_file = src / "00000000000000000000.log"
    data = log_file.read_bytes()
    with Log.open(src, read_only=True) as log:
        positions = [h.position for h in log.active_segment.headers()]
    last_start = positions[-1]
    for cut in range(last_start, len(data)):
        part = tmp_path / f"cut-{cut}"
        d = part / "t-0"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(data[:cut])
        with Log.open(d) as log:
            assert log.log_end_offset == 2, cut
            assert [r.value for r in log.records()] == [b"value-0", b"value-1"]
            assert log.append([b"next"]).first_offset == 2
        with Log.open(d, read_only=True) as log:
            assert [r.value for r in log.records()] == [b"value-0", b"value-1", b"next"]


def test_garbage_after_last_batch_is_cut(tmp_path):
    d = tmp_path / "t-0"
    _write(d, 5)
    _crash_state(d)
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(os.urandom(100))
    with Log.open(d) as log:
        assert log.log_end_offset == 5
        assert log.load_report.truncated_bytes == 100
        assert log.check() == []


def test_zeroed_tail_is_cut(tmp_path):
    d = tmp_path / "t-0"
    _write(d, 5)
    _crash_state(d)
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(b"\0" * 4096)
    with Log.open(d) as log:
        assert log.log_end_offset == 5


def test_bit_flip_in_last_segment_truncates_there_and_drops_later_segments(tmp_path):
    d = tmp_path / "t-0"
    _write(d, 60, segment_bytes=1024)
    with Log.open(d, read_only=True) as log:
        segs = log.segments
        target = segs[-2]
        header = list(target.headers())[1]
    _crash_state(d)
    # force recovery of everything from the start
    for name in ("recovery-point-offset-checkpoint",):
        p = tmp_path / name
        if p.exists():
            p.unlink()
    with open(target.log_path, "r+b") as f:
        f.seek(header.position + 40)
        b = f.read(1)
        f.seek(header.position + 40)
        f.write(bytes([b[0] ^ 0x10]))
    with Log.open(d) as log:
        assert log.log_end_offset == header.base_offset
        assert log.active_segment.base_offset == target.base_offset
        assert [r.offset for r in log.records()] == list(range(header.base_offset))


def test_missing_and_garbage_indexes_are_rebuilt(tmp_path):
    d = tmp_path / "t-0"
    _write(d, 200, segment_bytes=4096, index_interval_bytes=100)
    with Log.open(d, read_only=True) as log:
        segs = log.segments
        entries = [list(s.offset_index.entries()) for s in segs]
    os.remove(segs[0].offset_index.path)
    with open(segs[1].offset_index.path, "wb") as f:
        f.write(os.urandom(13))
    with Log.open(d, segment_bytes=4096, index_interval_bytes=100) as log:
        assert [list(s.offset_index.entries()) for s in log.segments][:2] == entries[:2]
        assert log.check() == []


WRITER = textwrap.dedent("""
    import sys
    from pylog import Log
    path, flush_every = sys.argv[1], int(sys.argv[2])
    log = Log.open(path, segment_bytes=64 * 1024, flush_messages=flush_every)
    i = 0
    while True:
        info = log.append([b"%08d" % i + b"." * 50])
        if info.last_offset + 1 <= log.recovery_point:
            print(info.last_offset, flush=True)   # acknowledged: flushed
        i += 1
""")


@pytest.mark.parametrize("trial", range(3))
def test_sigkill_mid_append_loses_nothing_flushed(tmp_path, trial):
    d = tmp_path / "t-0"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, str(script), str(d), "7"], stdout=subprocess.PIPE, env=env)
    first = proc.stdout.readline()  # wait for the first acknowledgement, however long the start takes
    assert first, "the writer exited before acknowledging anything"
    time.sleep(random.Random(trial).uniform(0.0, 0.5))  # then kill at a random moment of the appends
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    acked = [int(x) for x in (first + out).split()]
    with Log.open(d) as log:
        offsets = [r.offset for r in log.records()]
        assert offsets == list(range(len(offsets)))
        assert len(offsets) >= acked[-1] + 1
        for r in log.read(acked[-1]).records()[:1]:
            assert r.value.startswith(b"%08d" % acked[-1])
        assert log.append([b"after"]).first_offset == len(offsets)
        assert log.check() == []
