"""``WriterPool``: the writable partition logs of a log dir that this process's clients
(producers, group and transaction coordinators, ``pylog serve``) append to, shared with
other processes.

A partition has one writer at a time (the writer lock of :class:`~pylog.log.Log`). A
client process keeps the logs it writes open, so an append costs what ``Log.append``
costs; when another process wants one of them, it hands it over: the waiting process
takes a shared lock on the partition's byte of ``.pylog-clients.lock`` (and on byte 0,
"someone waits"), rings (writes a byte to ``.pylog-clients.bell``) and retries
``Log.open`` with a backoff capped at 5 ms; the holding process's hand-off thread sleeps
on an inotify watch of the bell (without inotify: looks every ``HANDOFF_CHECK_MS``), and
closes the wanted logs that no append is using. A process that just handed a log over
lets the waiting one take it first (``YIELD_MS``). A hand-off costs a close (which
flushes: tens of milliseconds on a disk) and an open of the log. A writer that dies
releases everything with it (kernel locks).

:meth:`WriterPool.append` avoids the hand-off: the process holding the partition's log appends the
records for the others, one round trip on a socket (pylog/logdir/append_service.py); it
is what the coordinators write their records with, so the members of a group in several
processes commit through the one that holds their offsets partition.

The pool's hand-off thread also watches the log dir's ``topic-configs.json``: when it
changes (``pylog configs --alter`` rings the bell), the held logs take their topic's new
settings (``Log.update_config``), as a Kafka broker applies altered topic configs.

While it holds logs, the pool's cleaner thread applies retention and compaction to them, each
every ``retention_check_interval_ms`` of its config (the first time ``INITIAL_DELAY_MS`` after it
first held it), holding it for the round
(:class:`~pylog.retention.cleaner.Cleaner`); a pool made with ``clean=False`` (the CLI's) has none.

A log this process opened for writing outside the pool (a ``LogManager``, ``Log.open``)
is not handed over: a client waits ``max_block_ms`` for it and then gets
:class:`LogLockedError`.

Durability is ``Log``'s: an append reaches the operating system at once (it survives
the process, SIGKILL included) and the disk at the log's flush policy or close.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

from pylog.closing import close_all
from pylog.errors import LogLockedError, PylogError, UnknownTopicError
from pylog.layout import CLIENTS_LOCK_FILE, TOPIC_CONFIGS_FILE
from pylog.locks import ByteLockFile, backoff, name_byte
from pylog.log import Log
from pylog.logdir.append_service import AppendClient, AppendServer
from pylog.logdir.metadata import LogDirMetadata
from pylog.logdir.per_root import PerRoot
from pylog.logdir.wakeup import DirWatch
from pylog.partition_dir import partition_dir_name
from pylog.retention.cleaner import INITIAL_DELAY_MS, Cleaner
from pylog.segment.open_files import OpenFiles
from pylog.stat_watch import StatWatch

BELL_FILE = ".pylog-clients.bell"
#: Without inotify, how often a holder looks for waiting processes.
HANDOFF_CHECK_MS = 5
#: How long a process that handed a log over lets a waiting process take it first.
YIELD_MS = 20
_WAITING = 0  # byte held shared by every process waiting for a log


class _Held:
    __slots__ = ("log", "busy", "byte")

    def __init__(self, log: Log, byte: int):
        self.log, self.byte, self.busy = log, byte, threading.Lock()


class WriterPool(PerRoot):
    """The writable logs of ``root`` held by this process; one pool per log dir per
    process (:meth:`for_root`)."""

    def __init__(self, root: str, *, clean: bool = True):
        self.root = os.path.abspath(root)
        self._cleaner = Cleaner(self.held_logs, initial_delay_ms=INITIAL_DELAY_MS) if clean else None
        self._lock = threading.Lock()
        self._held: dict[tuple[str, int], _Held] = {}
        self._open_files = OpenFiles()  # one descriptor budget for the segments of every log held
        self._opening: dict[tuple[str, int], threading.Lock] = {}
        self._locks = ByteLockFile(os.path.join(self.root, CLIENTS_LOCK_FILE))
        self._handed_off: dict[str, float] = {}  # partition dir name -> when this process handed it over
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.metadata = LogDirMetadata.for_root(self.root)
        self._configs = StatWatch([os.path.join(self.root, TOPIC_CONFIGS_FILE)])
        self._configs.mark()  # logs opened from now on read the settings at their open
        self._server = AppendServer(self.root, self._append_held)
        self._client = AppendClient(self.root)
        #: Logs this process closed because another process waited for them.
        self.hand_offs = 0

    @property
    def served_appends(self) -> int:
        """Appends this process made for other processes (:meth:`append`)."""
        return self._server.served

    def _close(self) -> None:
        """Close every log held (each flushes): the last user's release. A log whose close
        fails (a full disk) does not keep the others or the locks held (``close_all``)."""
        self._server.close()
        self._client.close()
        if self._cleaner is not None:
            self._cleaner.stop()
        self._stop.set()
        self._ring()  # wakes the hand-off thread to stop
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            held, self._held = list(self._held.values()), {}
        close_all([h.log.close for h in held] + [self._locks.close])

    @contextmanager
    def writer(self, topic: str, partition: int, *, max_block_ms: int = 60_000, create: bool = True):
        """``with pool.writer(topic, p) as log:`` the partition's writable log, held for
        the block (no hand-off meanwhile). Waits up to ``max_block_ms`` for another
        process to hand it over, then raises :class:`LogLockedError`. With
        ``create=False`` a partition whose directory is missing is
        :class:`UnknownTopicError` instead of created (one ``stat`` at each open, none
        while the log is held). Cost held: two uncontended thread locks, no system call."""
        held = self._acquire(topic, partition, max_block_ms, create)
        try:
            yield held.log
        finally:
            held.busy.release()

    def append(self, topic: str, partition: int, records: list, *, max_block_ms: int = 60_000) -> None:
        """Append ``records`` (``(key, value)`` pairs) to the partition: to the log if this
        process holds it, else through the process that holds it (one round trip), else by
        taking the log (waiting up to ``max_block_ms`` for a hand-off); this process then
        appends for the others. For records a repetition does not change: if the holder
        dies while answering, they are appended again here. Durability: ``Log.append``'s
        (in the page cache on return)."""
        key = (topic, partition)
        deadline = time.monotonic() + max_block_ms / 1000
        with self._lock:
            held_here = key in self._held
        if not held_here and self._client.append(key, records, deadline):
            return
        with self.writer(topic, partition, max_block_ms=max(int((deadline - time.monotonic()) * 1000), 0)) as log:
            log.append(records)
            self._server.listen(key)  # while no hand-off can close the log

    def _append_held(self, key: tuple[str, int], records: list) -> bool:
        """The server's append for another process: False if this process does not hold
        ``key``'s log (any more)."""
        with self._lock:
            held = self._held.get(key)
        if held is None:
            return False
        with held.busy:
            if self._held.get(key) is not held:
                return False
            held.log.append(records)
        return True

    def _acquire(self, topic: str, partition: int, max_block_ms: int, create: bool = True) -> _Held:
        key = (topic, partition)
        deadline = time.monotonic() + max_block_ms / 1000
        while True:
            with self._lock:
                held = self._held.get(key)
            if held is not None:
                held.busy.acquire()
                if self._held.get(key) is held:
                    return held
                held.busy.release()  # handed over meanwhile
                continue
            with self._opening_lock(key):
                if key in self._held:
                    continue  # another thread of this process opened it meanwhile
                held = self._open(topic, partition, deadline, create)
                held.busy.acquire()
                with self._lock:
                    self._held[key] = held
                    self._start_thread()
            return held

    def _opening_lock(self, key) -> threading.Lock:
        """The lock that lets one thread of this process open ``key``'s log while the
        others wait for it (a second ``Log.open`` here would find the writer lock held)."""
        with self._lock:
            return self._opening.setdefault(key, threading.Lock())

    def _open(self, topic: str, partition: int, deadline: float, create: bool = True) -> _Held:
        name = partition_dir_name(topic, partition)
        path = os.path.join(self.root, name)
        if not create and not os.path.isdir(path):
            raise UnknownTopicError(f"no partition {topic}-{partition} in {self.root}")
        config = self.metadata.topic_config(topic)
        byte = name_byte(name)
        waiting = False
        pauses = backoff(deadline)
        try:
            while True:
                if pauses.expired or not self._yielding(name, byte):
                    try:
                        return _Held(Log.open(path, config, open_files=self._open_files), byte)
                    except LogLockedError:
                        if pauses.expired:
                            raise
                if not waiting:
                    self._locks.try_lock(byte, shared=True)
                    self._locks.try_lock(_WAITING, shared=True)
                    waiting = True
                self._ring()
                pauses.sleep()
        finally:
            if waiting:
                self._locks.unlock(_WAITING)
                self._locks.unlock(byte)

    def _yielding(self, name: str, byte: int) -> bool:
        """Whether to let another waiting process have a log this one handed over a
        moment ago (else the one that released it would take it back at once)."""
        handed = self._handed_off.get(name)
        if handed is None or time.monotonic() - handed > YIELD_MS / 1000:
            return False
        return self._locks.is_locked(byte)

    def _ring(self) -> None:
        ring(self.root)

    def _start_thread(self) -> None:
        if self._cleaner is not None:
            self._cleaner.start()
        if self._thread is None:
            self._thread = threading.Thread(target=self._hand_off_loop, name="pylog-writer-handoff", daemon=True)
            self._thread.start()

    def _hand_off_loop(self) -> None:
        """Sleep until a waiting process rings (inotify on the bell file), or at most
        ``HANDOFF_CHECK_MS`` (the look that also covers a missed ring)."""
        bell = DirWatch()
        self._ring()  # the file exists before it is watched
        bell.add(os.path.join(self.root, BELL_FILE))
        timeout_s = HANDOFF_CHECK_MS / 1000 if not bell.uses_events else 1.0
        try:
            while not self._stop.is_set():
                bell.wait(timeout_s)
                if self._locks.is_locked(_WAITING):
                    self.hand_off()
                if self._configs.changed():
                    self.take_topic_configs()
        finally:
            bell.close()

    def hand_off(self) -> list[str]:
        """Close the held logs another process waits for and no append uses; returns
        their paths."""
        closed = []
        with self._lock:
            for key, held in list(self._held.items()):
                if not self._locks.is_locked(held.byte) or not held.busy.acquire(blocking=False):
                    continue
                try:
                    del self._held[key]
                    self._server.unlisten(key)  # before the log is free for the next holder
                    self._handed_off[os.path.basename(held.log.path)] = time.monotonic()
                    self.hand_offs += 1
                    held.log.close()
                    closed.append(held.log.path)
                finally:
                    held.busy.release()
        return closed

    def take_topic_configs(self) -> None:
        """The held logs take their topic's settings as ``topic-configs.json`` holds them
        now (run by the hand-off thread when the file changed)."""
        self._configs.mark()
        try:
            for log in self.held_logs():
                log.update_config(self.metadata.topic_config(log.topic))
        except (PylogError, OSError):
            pass  # a file edited by hand that does not parse: the logs keep their settings (the next open says why)

    def held_logs(self):
        """Yield each held log under the lock its appends take (no append or hand-off until
        the caller asks for the next one)."""
        with self._lock:
            helds = list(self._held.items())
        for key, held in helds:
            with held.busy:
                if self._held.get(key) is held:
                    yield held.log

    def close_log(self, topic: str, partition: int) -> None:
        """Close the partition's log if held (after the append using it); the next writer,
        here or in another process, opens it again."""
        with self._lock:
            held = self._held.pop((topic, partition), None)
        if held is not None:
            with held.busy:
                self._server.unlisten((topic, partition))  # before the log is free for the next holder
                held.log.close()


def ring(root: str) -> None:
    """Wake the hand-off threads of the processes holding logs of ``root`` (a write to its
    bell file): a process waits for a log, or a topic's settings changed."""
    try:
        fd = os.open(os.path.join(root, BELL_FILE), os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.pwrite(fd, b"\0", 0)
        finally:
            os.close(fd)
    except OSError:
        pass  # the holders' periodic look still finds it
