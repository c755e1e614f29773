"""What the partitions of one log dir share: the writer locks and Kafka's clean-shutdown
marker (docs/format/checkpoints.md#the-clean-shutdown-marker).

**Locks.** A partition open for writing holds a one-byte lock in the log dir's ``.lock``
file (Kafka's lock file), at an offset derived from the partition directory's name. One
file descriptor per log dir and process serves all its partitions, so a process can
write to thousands of partitions without running out of descriptors. The locks are
open-file-description locks where the system has them (POSIX record locks otherwise),
so they conflict with another process, and a Kafka broker holding ``.lock`` excludes
every pylog writer. Within a process a registry refuses a second writer.

**The marker.** ``.kafka_cleanshutdown`` in the log dir means: no partition of it is open
for writing, and every one was closed cleanly, so opening may skip recovery. It is
removed when a writer opens while it is present and written back by the last writer's
clean close, but only when that is known to be true of every partition: the writers of
this process started from a present marker (or opened every partition of the log dir,
recovering each), no other process opened a writer since (each process that starts
writing stamps the ``.lock`` file with a fresh id), and no other process holds a lock.
Otherwise it stays absent and the next opens recover above their recovery points, which
is always safe. All of this runs under an ``flock`` of the log dir, the same lock the
checkpoint files are updated under.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import struct
import threading

from pylog.errors import LogLockedError, StorageError
from pylog.io import FileIO
from pylog.layout import CLEAN_SHUTDOWN_FILE, LOCK_FILE

#: What the marker holds, as Kafka's ``CleanShutdownFileHandler`` writes it (no broker epoch).
CLEAN_SHUTDOWN_CONTENT = json.dumps({"version": 0, "brokerEpoch": -1}, separators=(",", ":")).encode()
_SET_LOCK = getattr(fcntl, "F_OFD_SETLK", fcntl.F_SETLK)
_GET_LOCK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux: type, whence, start, len, pid
_ID_BYTES = 16

_registry: dict[tuple[int, int], "LogDirWriters"] = {}
_registry_lock = threading.Lock()


def _forget_parent_writers() -> None:
    """In a forked child: the parent's writers are not the child's. Its copy of the lock
    file's descriptor is closed (the parent's locks stay: they belong to the parent's
    descriptor too), so the child's own writers lock through a descriptor of their own."""
    global _registry_lock
    _registry_lock = threading.Lock()
    for entry in _registry.values():
        if entry._fd is not None:
            os.close(entry._fd)
        entry._fd = None
        entry._held.clear()  # an inherited Log's close then releases nothing of the parent's
    _registry.clear()


os.register_at_fork(after_in_child=_forget_parent_writers)


def lock_offset(partition_dir_name: str) -> int:
    """The byte of ``.lock`` a partition's writer locks: 62 bits of BLAKE2b of its name."""
    digest = hashlib.blake2b(partition_dir_name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


def lock_partition(log_dir: str, name: str, io: FileIO) -> "LogDirWriters":
    """Lock partition ``name`` of ``log_dir`` for writing; returns this process's writers of
    the log dir (one object per directory, however it is named). Raises
    :class:`LogLockedError` if a writer, here or in another process, has it."""
    st = os.stat(log_dir)
    key = (st.st_dev, st.st_ino)
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            entry = _registry[key] = LogDirWriters(log_dir, io, key)
        entry._lock(name)
        return entry


class LogDirWriters:
    """The partitions of one log dir this process has open for writing, and what it knows
    of the marker. Thread-safe."""

    def __init__(self, log_dir: str, io: FileIO, key: tuple[int, int]):
        self.log_dir = log_dir
        self.io = io
        self._key = key
        self._fd: int | None = None
        self._held: set[str] = set()
        self._opened: set[str] = set()  # partitions opened since this process's session began
        self._session_id = b""
        self._clean_start = False  # the session began with the marker present
        self._failed = False  # a writer of the session stopped without a clean close

    # -- locks ------------------------------------------------------------------------------
    def _lock(self, name: str) -> None:
        """Take the byte of ``name`` (the registry lock held)."""
        if name in self._held:
            raise LogLockedError(f"{self.log_dir}/{name} is open for writing in this process")
        if self._fd is None:
            self._fd = _open_lock_file(os.path.join(self.log_dir, LOCK_FILE))
        try:
            fcntl.fcntl(self._fd, _SET_LOCK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, lock_offset(name), 1, 0))
        except OSError as e:
            self._close_if_idle()
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise LogLockedError(f"{self.log_dir}/{name} is open for writing by another process "
                                     f"(or a Kafka broker holds {LOCK_FILE})") from None
            raise StorageError(e.errno, f"cannot lock {self.log_dir}/{LOCK_FILE}: {e.strerror}") from None
        self._held.add(name)

    def unlock(self, name: str, *, clean: bool) -> None:
        """Release ``name``. ``clean``: its log was flushed and closed, so the marker may be
        written back if this was the last writer of the log dir (see the module docstring).
        Without ``clean`` (a failed open or close) the marker stays away until a recovery."""
        with _registry_lock:
            if name not in self._held:
                return
            try:
                if clean:
                    self._close_session_cleanly(name)
                else:
                    self._failed = True
            finally:
                fcntl.fcntl(self._fd, _SET_LOCK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, lock_offset(name), 1, 0))
                self._held.discard(name)
                self._close_if_idle()

    def _close_if_idle(self) -> None:
        if not self._held and self._fd is not None:
            self.io.close(self._fd)
            self._fd = None
            if _registry.get(self._key) is self:
                del _registry[self._key]

    def _others_hold_locks(self) -> bool:
        """Whether another process (or a Kafka broker) holds any lock in ``.lock``."""
        probe = fcntl.fcntl(self._fd, _GET_LOCK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        return _FLOCK.unpack(probe)[0] != fcntl.F_UNLCK

    # -- the marker ------------------------------------------------------------------------------
    def take_marker(self, name: str) -> bool:
        """On opening ``name`` for writing (its lock held): True if it may skip recovery.
        Removes the marker (durably, before any write) and, if this process starts writing
        now, stamps ``.lock`` with a new session id."""
        marker = os.path.join(self.log_dir, CLEAN_SHUTDOWN_FILE)
        with _registry_lock, _LogDirMutex(self.log_dir):
            present = os.path.exists(marker)
            if present:
                self.io.remove(marker)
                self.io.fsync_dir(self.log_dir)
            if present or self._held == {name} or self._stamp() != self._session_id:
                self._begin_session(clean=present)
            self._opened.add(name)
            return self._clean_start and not self._failed

    def _begin_session(self, *, clean: bool) -> None:
        self._session_id = os.urandom(_ID_BYTES)
        self.io.truncate(self._fd, 0)
        self.io.pwrite(self._fd, self._session_id, 0)
        self._clean_start = clean
        self._failed = False
        self._opened = set()

    def _stamp(self) -> bytes:
        return os.pread(self._fd, _ID_BYTES, 0)

    def _close_session_cleanly(self, name: str) -> None:
        with _LogDirMutex(self.log_dir):
            if self._held != {name} or self._failed or self._stamp() != self._session_id:
                return
            if self._others_hold_locks():
                return
            if self._clean_start or set(_partition_dirs(self.log_dir)) <= self._opened:
                self.io.write_file(os.path.join(self.log_dir, CLEAN_SHUTDOWN_FILE), CLEAN_SHUTDOWN_CONTENT)


def has_marker(log_dir: str) -> bool:
    return os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))


class _LogDirMutex:
    """``flock`` of the log dir itself: what checkpoint updates and marker changes hold."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self._fd = -1

    def __enter__(self) -> "_LogDirMutex":
        try:
            self._fd = os.open(self.log_dir, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError as e:
            self.__exit__()
            raise StorageError(e.errno, f"cannot lock the log dir {self.log_dir}: {e.strerror}") from None
        return self

    def __exit__(self, *exc) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the flock
            self._fd = -1


def _open_lock_file(path: str) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as e:
        raise StorageError(e.errno, f"cannot open {path}: {e.strerror}") from None


def _partition_dirs(log_dir: str) -> list[str]:
    """Names of the ``<topic>-<partition>`` directories of the log dir (Kafka's rule: the
    partition is the digits after the last ``-``; ``-delete``/``-future`` ones are not partitions)."""
    out = []
    for entry in os.scandir(log_dir):
        topic, sep, partition = entry.name.rpartition("-")
        if sep and topic and partition.isdigit() and entry.is_dir():
            out.append(entry.name)
    return out
