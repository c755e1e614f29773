"""One writer per partition; any number of readers, here and in other processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from pylog import Log, LogLockedError


def test_second_writer_in_same_process_is_refused(tmp_path):
    with Log.open(tmp_path / "t-0"):
        with pytest.raises(LogLockedError):
            Log.open(tmp_path / "t-0")


def test_second_writer_process_is_refused(tmp_path):
    code = textwrap.dedent("""
        import sys
        from pylog import Log, LogLockedError
        try:
            Log.open(sys.argv[1])
        except LogLockedError:
            sys.exit(3)
        sys.exit(0)
    """)
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"a"])
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t-0")],
                           env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert r.returncode == 3
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t-0")],
                       env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert r.returncode == 0


def test_reader_process_tails_while_appends_happen(tmp_path):
    reader = textwrap.dedent("""
        import sys, time
        from pylog import Log
        log = Log.open(sys.argv[1], read_only=True)
        want, offset, seen = int(sys.argv[2]), 0, []
        deadline = time.time() + 60
        while len(seen) < want and time.time() < deadline:
            f = log.read(offset)
            recs = f.records()
            seen += [r.offset for r in recs]
            offset = f.next_offset if recs else offset
            if not recs:
                time.sleep(0.01)
        assert seen == list(range(want)), seen[:20]
        print("ok")
    """)
    n = 400
    with Log.open(tmp_path / "t-0", segment_bytes=8192) as log:
        log.append([b"first"])
        proc = subprocess.Popen([sys.executable, "-c", reader, str(tmp_path / "t-0"), str(n)],
                                stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
        for i in range(1, n):
            log.append([b"v%d" % i * 10])
        out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0 and out.strip() == b"ok"


def test_reader_threads_never_see_partial_batches(tmp_path):
    errors = []
    with Log.open(tmp_path / "t-0", segment_bytes=16384) as log:
        stop = threading.Event()

        def read_loop():
            try:
                while not stop.is_set():
                    offset = log.log_start_offset
                    expected = offset
                    while True:
                        f = log.read(offset, max_bytes=4096)
                        recs = f.records()
                        if not recs:
                            break
                        for r in recs:
                            assert r.offset == expected and r.value == b"%d" % r.offset * 3
                            expected += 1
                        offset = f.next_offset
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=read_loop) for _ in range(3)]
        for t in threads:
            t.start()
        for i in range(1500):
            log.append([b"%d" % i * 3])
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
