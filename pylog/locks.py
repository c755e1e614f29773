"""The locks the processes sharing a log dir take, and the backoff of those that poll.

- :class:`ByteLockFile`: one-byte ranges of one file, locked with Linux open file
  description locks (``F_OFD_*``): held per open file, so two holders in one process
  exclude each other as two processes do, and released by the kernel when the process
  dies, SIGKILL included. Where the system has none, POSIX process locks, which do not
  exclude within a process. Kafka's ``.lock`` (a partition's writer, pylog/log_dir.py) and
  ``.pylog-clients.lock`` (the clients' hand-offs, groups, transactional ids, producer ids,
  ``topic-configs.json``) are such files; :func:`name_byte` picks a name's byte.
- :class:`ByteMutex`: ``with`` one byte of a :class:`ByteLockFile`, against other
  processes and the other threads of this one.
- :class:`DirMutex`: the ``flock`` of a directory (or of a lock file): what the log dir's
  checkpoint and marker updates and a partition state's compare-and-set hold.
- :func:`backoff`: the pause of a loop that polls until a deadline, doubling from 0.2 ms
  to 5 ms.

Cost: one system call per lock operation (about a microsecond); nothing is written.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
import threading
import time
from contextlib import contextmanager

from pylog.errors import StorageError
from pylog.platform import require_posix

_SETLK = getattr(fcntl, "F_OFD_SETLK", fcntl.F_SETLK)
_SETLKW = getattr(fcntl, "F_OFD_SETLKW", fcntl.F_SETLKW)
_GETLK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux: type, whence, start, len, pid
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: The first pause of :func:`backoff` and the longest, in seconds.
FIRST_PAUSE_S, MAX_PAUSE_S = 0.0002, 0.005


def name_byte(name: str) -> int:
    """The byte of a lock file that stands for ``name``: 62 bits of its BLAKE2b digest
    (collisions are negligible).

    >>> name_byte("events-0") == name_byte("events-0") != name_byte("events-1")
    True
    """
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") >> 2


class ByteLockFile:
    """One open lock file; ``byte`` arguments pick the range (one byte) locked. Created if
    absent, unless ``read_only`` (then ``FileNotFoundError`` for a missing file: a
    probe with :meth:`is_locked` needs no write access)."""

    def __init__(self, path: str, *, read_only: bool = False):
        self.path = path
        flags = os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT
        try:
            self.fd = os.open(path, flags | _CLOEXEC, 0o644)
        except OSError as e:
            if read_only and isinstance(e, FileNotFoundError):
                raise
            raise StorageError(e.errno, f"cannot open the lock file {path}: {e.strerror}") from None

    def _fcntl(self, cmd: int, kind: int, byte: int, length: int = 1) -> bytes:
        return fcntl.fcntl(self.fd, cmd, _FLOCK.pack(kind, os.SEEK_SET, byte, length, 0))

    def try_lock(self, byte: int, *, shared: bool = False) -> bool:
        """Take the byte without waiting; False if another holder has it."""
        try:
            self._fcntl(_SETLK, fcntl.F_RDLCK if shared else fcntl.F_WRLCK, byte)
            return True
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN):
                return False
            raise StorageError(e.errno, f"cannot lock {self.path}: {e.strerror}") from None

    def lock(self, byte: int, *, timeout_ms: int | None = None) -> bool:
        """Take the byte exclusively, waiting (in the kernel when no ``timeout_ms``, else
        polling with :func:`backoff`). False if the timeout passed."""
        if timeout_ms is None:
            self._fcntl(_SETLKW, fcntl.F_WRLCK, byte)
            return True
        pauses = backoff(time.monotonic() + timeout_ms / 1000)
        while not self.try_lock(byte):
            if not pauses.sleep():
                return False
        return True

    def unlock(self, byte: int) -> None:
        self._fcntl(_SETLK, fcntl.F_UNLCK, byte)

    def is_locked(self, byte: int) -> bool:
        """Whether another open file holds the byte (read or write)."""
        return _FLOCK.unpack(self._fcntl(_GETLK, fcntl.F_WRLCK, byte))[0] != fcntl.F_UNLCK

    def others_hold_any(self) -> bool:
        """Whether another open file holds any byte of the file."""
        return _FLOCK.unpack(self._fcntl(_GETLK, fcntl.F_WRLCK, 0, 0))[0] != fcntl.F_UNLCK

    def close(self) -> None:
        """Close the file, releasing every byte this open file holds."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "ByteLockFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ByteMutex:
    """``with mutex:`` holds ``byte`` of ``lock_file`` exclusively for the block, against
    other processes and other open files, and against the other threads of this one.
    Not reentrant."""

    def __init__(self, lock_file: ByteLockFile, byte: int):
        self._file, self._byte = lock_file, byte
        self._threads = threading.Lock()

    def __enter__(self) -> "ByteMutex":
        self._threads.acquire()
        try:
            self._file.lock(self._byte)
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._file.unlock(self._byte)
        finally:
            self._threads.release()


@contextmanager
def name_lock(path: str, name: str):
    """``with name_lock(path, name):`` holds ``name``'s byte of the lock file ``path``
    (opened for the block) exclusively, as :class:`ByteMutex` does."""
    with ByteLockFile(path) as lock_file, ByteMutex(lock_file, name_byte(name)):
        yield


class DirMutex:
    """``with DirMutex(path):`` holds the exclusive ``flock`` of the directory ``path`` for
    the block, waiting for another holder; with ``create``, ``path`` is a lock file,
    created if absent. Released by closing (so by the kernel when the process dies).
    Not reentrant: a second holder in this process waits as another process would.
    ``what`` names the lock in errors."""

    def __init__(self, path: str, *, create: bool = False, what: str = "the directory lock"):
        self.path, self.what = path, what
        self._flags = (os.O_RDWR | os.O_CREAT if create else os.O_RDONLY) | _CLOEXEC
        self._fd = -1

    def __enter__(self) -> "DirMutex":
        require_posix(self.what)
        try:
            self._fd = os.open(self.path, self._flags, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError as e:
            self.__exit__()
            raise StorageError(e.errno, f"cannot take {self.what} on {self.path}: {e.strerror}") from None
        return self

    def __exit__(self, *exc) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the flock
            self._fd = -1


class Backoff:
    """The pauses of one polling loop (:func:`backoff`)."""

    def __init__(self, deadline: float | None):
        self.deadline = deadline
        self._pause = FIRST_PAUSE_S

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def sleep(self, at_most_s: float | None = None) -> bool:
        """Sleep the next pause (each twice the last, up to ``MAX_PAUSE_S``), ending at the
        deadline or after ``at_most_s`` at the latest; False, at once, if the deadline has
        passed."""
        pause = self._pause if at_most_s is None else min(self._pause, at_most_s)
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                return False
            pause = min(pause, left)
        time.sleep(pause)
        self._pause = min(self._pause * 2, MAX_PAUSE_S)
        return True

    def reset(self) -> None:
        """The next pause is the first again (the polled condition changed)."""
        self._pause = FIRST_PAUSE_S


def backoff(deadline: float | None = None) -> Backoff:
    """The pauses of a loop that polls until ``deadline`` (``time.monotonic()`` seconds;
    None: no end), from 0.2 ms doubling to 5 ms: short waits cost little latency, long ones
    little CPU.

    >>> pauses = backoff(time.monotonic() + 0.05)
    >>> while pauses.sleep():
    ...     pass  # try something; stop when it worked
    >>> pauses.expired
    True
    """
    return Backoff(deadline)
