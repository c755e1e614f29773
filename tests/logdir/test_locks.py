"""pylog/locks.py between real processes: a byte of a lock file and the flock of a directory
each admit one holder at a time across processes, a process killed holding one releases
it, and a poll with ``backoff`` ends at its deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pylog.locks import ByteLockFile, ByteMutex, DirMutex, backoff, name_byte
from tests.waiting import wait_until

INCREMENTS = 200

# Read-modify-write of a counter file, INCREMENTS times, each under the lock named by argv[2]:
# without mutual exclusion two processes lose increments.
_COUNTER = textwrap.dedent("""
    import os, sys
    from pylog.locks import DirMutex, name_lock
    root, kind = sys.argv[1], sys.argv[2]
    counter = os.path.join(root, "counter")
    open(os.path.join(root, "ready-" + sys.argv[3]), "w").close()
    sys.stdin.read()  # the go
    for _ in range(%d):
        lock = name_lock(os.path.join(root, "clients.lock"), "counter") if kind == "byte" else DirMutex(root)
        with lock:
            with open(counter) as f:
                n = int(f.read())
            with open(counter + ".tmp", "w") as f:
                f.write(str(n + 1))
            os.replace(counter + ".tmp", counter)
""" % INCREMENTS)

# Takes the lock named by argv[2], says so on stdout, then holds it until killed or its stdin closes.
_HOLDER = textwrap.dedent("""
    import os, sys
    from pylog.locks import ByteLockFile, DirMutex, name_byte
    root, kind = sys.argv[1], sys.argv[2]
    if kind == "byte":
        f = ByteLockFile(os.path.join(root, "clients.lock"))
        f.lock(name_byte("x"))
    else:
        DirMutex(root).__enter__()
    print("held", flush=True)
    sys.stdin.read()
""")


def _python(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _holder(root, kind: str) -> subprocess.Popen:
    proc = _python(_HOLDER, root, kind)
    assert proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.parametrize("kind", ["byte", "dir"])
def test_two_processes_incrementing_under_the_lock_lose_no_increment(tmp_path, kind):
    (tmp_path / "counter").write_text("0")
    procs = [_python(_COUNTER, tmp_path, kind, me) for me in range(2)]
    try:
        wait_until(lambda: all((tmp_path / f"ready-{me}").exists() for me in range(2))
                   or any(p.poll() is not None for p in procs), "both processes to be ready", timeout_s=60)
        for p in procs:
            p.stdin.close()
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert int((tmp_path / "counter").read_text()) == 2 * INCREMENTS


def test_a_byte_another_process_holds_is_seen_refused_and_freed_when_it_is_killed(tmp_path):
    holder = _holder(tmp_path, "byte")
    with ByteLockFile(str(tmp_path / "clients.lock")) as mine:
        try:
            assert mine.is_locked(name_byte("x")) and mine.others_hold_any()
            assert not mine.is_locked(name_byte("y"))
            assert not mine.try_lock(name_byte("x"))
            started = time.monotonic()
            assert not mine.lock(name_byte("x"), timeout_ms=50)
            assert time.monotonic() - started >= 0.05
            assert mine.try_lock(name_byte("y"))  # another byte of the same file is free
        finally:
            holder.kill()
            holder.wait()
        assert mine.lock(name_byte("x"), timeout_ms=10_000)  # the kernel released the dead holder's byte


def test_two_open_files_of_one_process_exclude_each_other(tmp_path):
    path = str(tmp_path / "clients.lock")
    with ByteLockFile(path) as a, ByteLockFile(path) as b:
        assert a.try_lock(7)
        assert not b.try_lock(7) and b.is_locked(7)
        a.unlock(7)
        with ByteMutex(b, 7):
            assert a.is_locked(7)
        assert not a.is_locked(7)


def test_a_read_only_probe_of_a_missing_lock_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        ByteLockFile(str(tmp_path / "absent.lock"), read_only=True)


def test_the_dir_mutex_waits_for_another_process_and_is_freed_when_it_dies(tmp_path):
    holder = _holder(tmp_path, "dir")
    entered = []
    try:
        waiter = threading.Thread(target=lambda: entered.append(DirMutex(str(tmp_path)).__enter__()))
        waiter.start()
        waiter.join(0.2)
        assert not entered  # still waiting for the other process
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        waiter.join(30)
        assert entered
    finally:
        if holder.poll() is None:
            holder.kill()
        for mutex in entered:
            mutex.__exit__()


def test_a_dir_mutex_on_a_missing_directory_is_a_storage_error_naming_it(tmp_path):
    from pylog.errors import StorageError
    with pytest.raises(StorageError, match="the log dir's lock on .*absent"):
        with DirMutex(str(tmp_path / "absent"), what="the log dir's lock"):
            pass


def test_a_dir_mutex_with_create_locks_a_lock_file(tmp_path):
    with DirMutex(str(tmp_path / "state.lock"), create=True):
        assert (tmp_path / "state.lock").exists()


def test_backoff_doubles_its_pause_and_stops_at_the_deadline():
    started = time.monotonic()
    pauses = backoff(started + 0.03)
    count = 0
    while pauses.sleep():
        count += 1
    elapsed = time.monotonic() - started
    assert pauses.expired and 0.03 <= elapsed < 1
    assert 3 <= count < 30  # 0.2 + 0.4 + ... ms: not one long sleep, not a spin
    assert not pauses.sleep()  # at once, past the deadline


def test_backoff_without_a_deadline_never_expires_and_sleeps_at_most_what_it_is_given():
    pauses = backoff()
    started = time.monotonic()
    assert pauses.sleep(at_most_s=0.0001) and not pauses.expired
    assert time.monotonic() - started < 0.5
