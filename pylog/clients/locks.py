"""Byte-range locks on one file, shared by the clients of a log dir (Linux open file
description locks, ``F_OFD_*``: held per open file, so two clients in one process exclude
each other as two processes do, and released by the kernel when the process dies, SIGKILL
included). Elsewhere POSIX process locks are used, which do not exclude within a process.

Cost: one ``fcntl`` system call per operation (about a microsecond).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import threading
import time

from pylog.errors import StorageError

_SETLK = getattr(fcntl, "F_OFD_SETLK", fcntl.F_SETLK)
_SETLKW = getattr(fcntl, "F_OFD_SETLKW", fcntl.F_SETLKW)
_GETLK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux: type, whence, start, len, pid


def name_byte(name: str) -> int:
    """A byte offset for ``name``: 62 bits of its BLAKE2b digest (collisions are negligible)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") >> 2


class LockFile:
    """One open lock file; ``byte`` arguments pick the range (one byte) locked."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise StorageError(e.errno, f"cannot open lock file {path}: {e.strerror}") from None

    def _fcntl(self, cmd: int, kind: int, byte: int) -> bytes:
        return fcntl.fcntl(self._fd, cmd, _FLOCK.pack(kind, os.SEEK_SET, byte, 1, 0))

    def try_lock(self, byte: int, *, shared: bool = False) -> bool:
        """Take the byte without waiting; False if another holder has it."""
        try:
            self._fcntl(_SETLK, fcntl.F_RDLCK if shared else fcntl.F_WRLCK, byte)
            return True
        except OSError as e:
            if e.errno in (13, 11):  # EACCES, EAGAIN
                return False
            raise StorageError(e.errno, f"cannot lock {self.path}: {e.strerror}") from None

    def lock(self, byte: int, *, timeout_ms: int | None = None) -> bool:
        """Take the byte exclusively, waiting (in the kernel when no ``timeout_ms``, else
        polling with a backoff capped at 5 ms). False if the timeout passed."""
        if timeout_ms is None:
            self._fcntl(_SETLKW, fcntl.F_WRLCK, byte)
            return True
        deadline = time.monotonic() + timeout_ms / 1000
        pause = 0.0002
        while not self.try_lock(byte):
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.005)
        return True

    def unlock(self, byte: int) -> None:
        self._fcntl(_SETLK, fcntl.F_UNLCK, byte)

    def is_locked(self, byte: int) -> bool:
        """Whether another open file holds the byte (read or write)."""
        out = self._fcntl(_GETLK, fcntl.F_WRLCK, byte)
        return _FLOCK.unpack(out)[0] != fcntl.F_UNLCK

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Mutex:
    """``with mutex:`` holds ``byte`` of ``lock_file`` exclusively for the block, against
    other processes and other open files, and against the other threads of this one."""

    def __init__(self, lock_file: LockFile, byte: int):
        self._file, self._byte = lock_file, byte
        self._threads = threading.Lock()

    def __enter__(self):
        self._threads.acquire()
        try:
            self._file.lock(self._byte)
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self._file.unlock(self._byte)
        finally:
            self._threads.release()
