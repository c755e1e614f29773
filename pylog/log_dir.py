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
for writing, and every one was closed cleanly, so opening may skip recovery. The first
writer to open while it is present removes it (before any write) and starts a
*generation*, recorded in ``.lock``: an id, whether it began clean, whether a writer of it
stopped without a clean close (tainted), and how many processes write in it. A process
that starts writing while another process's writers are alive joins the generation;
otherwise, with no marker, it starts a new one that is not clean. A writer skips recovery
only if its generation began clean, is untainted, and this process is its only member
(no other process, perhaps killed since, has written in it). When the last process
leaves, it writes the marker back if the generation began clean (or that process opened,
and so recovered, every partition of the log dir) and nothing tainted it. A process
killed never leaves, so its generation never writes the marker: the next writer starts a
new generation, and the opens recover above their recovery points until every partition
was recovered, which is always safe. All of this runs under an ``flock`` of the log dir,
the same lock the checkpoint files are updated under.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from typing import NamedTuple

from pylog.errors import LogLockedError
from pylog.io import FileIO
from pylog.layout import CLEAN_SHUTDOWN_CONTENT, CLEAN_SHUTDOWN_FILE, LOCK_FILE
from pylog.locks import ByteLockFile, DirMutex, name_byte

_ID_BYTES = 16
_GENERATION = struct.Struct(">16s??iq")  # id, clean, tainted, members, broker epoch

_registry: dict[tuple[int, int], "LogDirWriters"] = {}
_registry_lock = threading.Lock()


def _forget_parent_writers() -> None:
    """In a forked child: the parent's writers are not the child's. Its copy of the lock
    file's descriptor is closed (the parent's locks stay: they belong to the parent's
    descriptor too), so the child's own writers lock through a descriptor of their own."""
    global _registry_lock
    _registry_lock = threading.Lock()
    for entry in _registry.values():
        if entry._file is not None:
            entry._file.close()
        entry._file = None
        entry._held.clear()  # an inherited Log's close then releases nothing of the parent's
    _registry.clear()


os.register_at_fork(after_in_child=_forget_parent_writers)


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
        self._file: ByteLockFile | None = None
        self._held: set[str] = set()
        self._generation: bytes | None = None  # id of the generation this process writes in
        self._opened: set[str] = set()  # partitions this process opened in it

    # -- locks ------------------------------------------------------------------------------
    def _lock(self, name: str) -> None:
        """Take the byte of ``name`` (the registry lock held)."""
        if name in self._held:
            raise LogLockedError(f"{self.log_dir}/{name} is open for writing in this process")
        if self._file is None:
            self._file = ByteLockFile(os.path.join(self.log_dir, LOCK_FILE))
        try:
            locked = self._file.try_lock(name_byte(name))
        except BaseException:
            self._close_if_idle()
            raise
        if not locked:
            self._close_if_idle()
            raise LogLockedError(f"{self.log_dir}/{name} is open for writing by another process "
                                 f"(or a Kafka broker holds {LOCK_FILE})")
        self._held.add(name)

    def unlock(self, name: str, *, clean: bool) -> None:
        """Release ``name``. ``clean``: its log was flushed and closed. The last writer of
        the log dir writes the marker back if every partition is known clean (see the module
        docstring); an unclean release (a failed open or close) keeps it away until the
        partitions were recovered."""
        with _registry_lock:
            if name not in self._held:
                return
            try:
                if self._generation is not None and (not clean or self._held == {name}):
                    with log_dir_mutex(self.log_dir):
                        self._leave(name, clean=clean)
            finally:
                self._file.unlock(name_byte(name))
                self._held.discard(name)
                self._close_if_idle()

    def _close_if_idle(self) -> None:
        if not self._held and self._file is not None:
            self.io.close(self._file.fd)  # through the io, which may fail it on purpose
            self._file.fd = -1
            self._file = None
            if _registry.get(self._key) is self:
                del _registry[self._key]

    def _others_hold_locks(self) -> bool:
        """Whether another process (or a Kafka broker) holds any lock in ``.lock``."""
        return self._file.others_hold_any()

    # -- the marker ------------------------------------------------------------------------------
    def take_marker(self, name: str) -> bool:
        """On opening ``name`` for writing (its lock held): True if it may skip recovery.
        Removes the marker (durably, before any write) and joins or starts the log dir's
        writing generation."""
        marker = os.path.join(self.log_dir, CLEAN_SHUTDOWN_FILE)
        with _registry_lock, log_dir_mutex(self.log_dir):
            present = os.path.exists(marker)
            broker_epoch = _broker_epoch(marker) if present else -1
            if present:
                self.io.remove(marker)
                self.io.fsync_dir(self.log_dir)
            gen = self._read_generation()
            if not present and gen is not None and gen.id == self._generation:
                pass  # this process writes in it already
            elif not present and gen is not None and self._others_hold_locks():
                gen = gen._replace(members=gen.members + 1)  # writers of another process are alive: join
                self._join(gen)
            else:  # nobody writes: a new generation, clean if the marker was there
                gen = Generation(os.urandom(_ID_BYTES), clean=present, tainted=False, members=1,
                                 broker_epoch=broker_epoch)
                self._join(gen)
            self._opened.add(name)
            return gen.clean and not gen.tainted and gen.members == 1

    def _join(self, gen: "Generation") -> None:
        self._write_generation(gen)
        self._generation = gen.id
        self._opened = set()

    def _leave(self, name: str, *, clean: bool) -> None:
        """``name`` is released (the mutex held): an unclean release taints the generation;
        the last one of this process leaves it, and the last member writes the marker back
        when the generation began clean (or this process opened, and so recovered, every
        partition) and nothing tainted it."""
        gen = self._read_generation()
        if gen is None or gen.id != self._generation:
            self._generation = None
            return
        if not clean:
            gen = gen._replace(tainted=True)
        if self._held == {name}:
            gen = gen._replace(members=gen.members - 1)
            self._generation = None
            if gen.members == 0 and not gen.tainted and not self._others_hold_locks() and \
                    (gen.clean or set(_partition_dirs(self.log_dir)) <= self._opened):
                self.io.write_file(os.path.join(self.log_dir, CLEAN_SHUTDOWN_FILE),
                                   CLEAN_SHUTDOWN_CONTENT % gen.broker_epoch)
        self._write_generation(gen)

    def _read_generation(self) -> "Generation | None":
        raw = os.pread(self._file.fd, _GENERATION.size, 0)
        return Generation(*_GENERATION.unpack(raw)) if len(raw) == _GENERATION.size else None

    def _write_generation(self, gen: "Generation") -> None:
        self.io.pwrite(self._file.fd, _GENERATION.pack(*gen), 0)


class Generation(NamedTuple):
    """What ``.lock`` holds: the writing generation of the log dir (one per run of writers
    from a moment nobody wrote). ``clean``: it began with the marker present; ``tainted``: a
    writer stopped without a clean close; ``members``: processes writing in it that have not
    left (a killed one never leaves, so its generation never writes the marker);
    ``broker_epoch``: the one the marker it took held, written back with the marker, so that a
    Kafka broker's next start stays clean (-1: none, as outside a broker)."""

    id: bytes
    clean: bool
    tainted: bool
    members: int
    broker_epoch: int


def _broker_epoch(marker: str) -> int:
    """The broker epoch in a marker (Kafka's ``CleanShutdownFileHandler`` JSON); -1 where it
    holds none that Kafka would read."""
    try:
        with open(marker, "rb") as f:
            epoch = json.loads(f.read(4096)).get("brokerEpoch", -1)
    except (OSError, ValueError, AttributeError):
        return -1
    return epoch if type(epoch) is int and -1 <= epoch < 2 ** 63 else -1


def has_marker(log_dir: str) -> bool:
    return os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))


def has_writer(log_dir: str, name: str) -> bool:
    """Whether partition ``name`` of ``log_dir`` is open for writing, in this process or
    another (or a Kafka broker holds ``.lock``). A writer recovered its partition when it
    opened it; with none alive and no marker, the last one may have crashed. Cost: one
    ``stat``, an ``open`` and a lock probe; takes no lock."""
    try:
        st = os.stat(log_dir)
    except OSError:
        return False
    with _registry_lock:
        entry = _registry.get((st.st_dev, st.st_ino))
        if entry is not None and name in entry._held:
            return True
    try:
        probe = ByteLockFile(os.path.join(log_dir, LOCK_FILE), read_only=True)
    except OSError:
        return False  # no lock file: nothing ever wrote here, or it was removed with no writer
    with probe:
        return probe.is_locked(name_byte(name))


def log_dir_mutex(log_dir: str) -> DirMutex:
    """The ``flock`` of the log dir itself: what checkpoint updates and marker changes hold."""
    return DirMutex(log_dir, what="the log dir's lock")


def _partition_dirs(log_dir: str) -> list[str]:
    """Names of the ``<topic>-<partition>`` directories of the log dir (Kafka's rule: the
    partition is the digits after the last ``-``; ``-delete``/``-future`` ones are not partitions)."""
    out = []
    for entry in os.scandir(log_dir):
        topic, sep, partition = entry.name.rpartition("-")
        if sep and topic and partition.isdigit() and entry.is_dir():
            out.append(entry.name)
    return out
