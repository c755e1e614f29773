"""Readers in other processes hold maps of a log's indexes while the writer truncates,
recovers and compacts it: no reader is ever killed by SIGBUS (an index is never cut in
place below a page a map covers: the writer renames a new file over it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from pylog import Log, Record

ROOT = Path(__file__).resolve().parents[2]

READER = textwrap.dedent("""
    import os, sys, time
    from pylog import Log
    log = Log.open(sys.argv[1], read_only=True)
    indexes = []
    for seg in log.segments:
        seg.translate_offset(seg.base_offset)
        indexes += [seg.offset_index, seg.time_index]
    assert all(i.is_mapped for i in indexes if len(i))
    print("mapped", sum(len(i) for i in indexes), flush=True)
    rounds = 0
    while not os.path.exists(sys.argv[2]):  # read every entry of every map, again and again
        for index in indexes:
            index.entries()
        rounds += 1
    print("rounds", rounds, flush=True)
""")

CONFIG = dict(segment_bytes=64 * 1024, index_interval_bytes=0, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)


def _start_readers(path, stop, count=3):
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(path), str(stop)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
               for _ in range(count)]
    for p in readers:
        line = p.stdout.readline()
        assert line.startswith("mapped"), (line, p.stderr.read() if p.poll() is not None else "")
        assert int(line.split()[1]) > 2048  # more than a page of entries in each process's maps
    return readers


def _stop(readers, stop):
    stop.touch()
    outcomes = []
    for p in readers:
        out, err = p.communicate(timeout=120)
        outcomes.append((p.returncode, err[-2000:]))
    for code, err in outcomes:
        assert code != -signal.SIGBUS, f"a reader was killed by SIGBUS:\n{err}"
        assert code == 0, err


def test_truncation_recovery_and_compaction_under_readers_holding_maps(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, **CONFIG) as log:
        for i in range(3000):  # an index entry every append: indexes of several pages
            log.append([Record(b"v%d" % i, key=b"k%d" % (i % 50), timestamp=1_000_000 + i)])

        stop = tmp_path / "stop-truncate"
        readers = _start_readers(d, stop)
        log.truncate_to(log.active_segment.base_offset + 3)  # the active segment's indexes lose pages
        log.truncate_to(log.segments[1].base_offset + 1)  # closed segments go, one is cut
        log.flush()
        _stop(readers, stop)
        assert log.check() == []

        for i in range(3000):
            log.append([Record(b"w%d" % i, key=b"k%d" % (i % 50), timestamp=2_000_000 + i)])
        log.flush()

        stop = tmp_path / "stop-recover"
        readers = _start_readers(d, stop)
        for seg in log.segments:  # as after an unclean shutdown: every index rebuilt from its log
            seg.recover()
        log.flush()
        _stop(readers, stop)

        stop = tmp_path / "stop-compact"
        readers = _start_readers(d, stop)
        log.roll()
        assert not log.compact().skipped
        _stop(readers, stop)
        end = log.log_end_offset
    with Log.open(d, read_only=True) as log:
        assert log.check() == []
        assert log.log_end_offset == end
        assert {r.key: r.value for r in log.records()} == {b"k%d" % k: b"w%d" % (2950 + k) for k in range(50)}
