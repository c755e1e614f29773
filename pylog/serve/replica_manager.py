"""``ReplicaManager``: the partitions ``pylog serve`` appends to and reads, as Kafka's
``ReplicaManager`` holds a broker's partitions; this one shares them with pylog's own
clients.

Appends go through the log dir's :class:`~pylog.logdir.writers.WriterPool` (the one the
``Producer`` and the coordinators of this process use): :meth:`ReplicaManager.writer`
holds a partition's writable log only for the append, so a pylog client of another
process that wants it gets it by the pool's hand-off, and the server takes it back the
same way (a hand-off costs a close and an open; an uncontended append costs no system
call more than ``Log.append``). A partition is never created by an append: a missing
directory is :class:`~pylog.errors.UnknownTopicError`.

Reads go through read-only logs (:meth:`ReplicaManager.log`), opened on first use and
refreshed by each read, so they see every process's appends. On Linux their directories
are watched with inotify (:meth:`ReplicaManager.fileno`, for the event loop): a fetch
waiting for records wakes on an append by any process. A partition whose directory
vanished (its topic deleted by another process) is :class:`~pylog.errors.UnknownTopicError`.

Thread-safe: the event loop reads, the disk thread pool appends and opens.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

from pylog.closing import close_all
from pylog.errors import LogLockedError, PylogError, UnknownTopicError
from pylog.log import Log
from pylog.logdir.wakeup import DirWatch
from pylog.logdir.writers import WriterPool
from pylog.partition_dir import partition_dir_name, validate_topic
from pylog.segment.open_files import OpenFiles


class ReplicaManager:
    """The partitions of the log dir ``root`` as the server appends to and reads them
    (see the module's doc). :meth:`close` gives them back."""

    def __init__(self, root: str):
        self.root = root
        self.pool = WriterPool.for_root(root)
        self._lock = threading.Lock()
        self._logs: dict[tuple[str, int], Log] = {}  # read-only, watched
        self._open_files = OpenFiles()  # one descriptor budget for the segments of every log read
        self._watch = DirWatch()
        self._turns = threading.Condition()  # guards the two below: a deletion waits for the writes under way
        self._deleting: dict[str, int] = {}  # topic -> deletions under way: no write starts on it
        self._writing: dict[str, int] = {}  # topic -> writes under way

    @contextlib.contextmanager
    def writer(self, topic: str, partition: int, *, max_block_ms: int):
        """``with replicas.writer(topic, p) as log:`` the partition's writable log, held for
        the block: taken from another process by the hand-off, waiting up to
        ``max_block_ms`` (then :class:`LogLockedError`). Opening it recovers its producer
        state, which ``Log.append`` checks idempotent and transactional batches against. A
        topic being deleted (:meth:`delete_topic`) is :class:`UnknownTopicError`, as Kafka
        answers a write to it, so no write opens, and so makes again, a directory the
        deletion removes."""
        _check(topic, partition)
        with self._turns:
            if topic in self._deleting:
                raise UnknownTopicError(f"topic {topic!r} is being deleted")
            self._writing[topic] = self._writing.get(topic, 0) + 1
        try:
            with self.pool.writer(topic, partition, max_block_ms=max_block_ms, create=False) as log:
                yield log
        finally:
            with self._turns:
                self._writing[topic] -= 1
                if not self._writing[topic]:
                    del self._writing[topic]
                    self._turns.notify_all()

    def log(self, topic: str, partition: int) -> Log:
        """The partition's read-only log (opened and watched on first use; reads refresh
        it); :class:`UnknownTopicError` when it does not exist. O(1) once open."""
        log = self._logs.get((topic, partition))
        if log is None:
            log = self._open(topic, partition)
        return log

    def refreshed(self, topic: str, partition: int) -> Log:
        """:meth:`log`, caught up with every process's appends."""
        log = self.log(topic, partition)
        with self.deleted_as_unknown(log):
            log.refresh()
        return log

    @contextlib.contextmanager
    def deleted_as_unknown(self, log: Log):
        """Around a read of ``log``: its directory vanishing under it (another process
        deleted its topic) is :class:`UnknownTopicError`, and the log is dropped."""
        try:
            yield
        except OSError:
            if os.path.isdir(log.path):
                raise
            self._drop((log.topic, log.partition))
            raise UnknownTopicError(f"partition {log.topic}-{log.partition} was deleted from {self.root}") from None

    def open_each(self, pairs) -> None:
        """Open the read-only logs of ``pairs`` (topic, partition) not open yet; one that
        does not exist is left for the handler to answer."""
        for topic, partition in pairs:
            try:
                self.log(topic, partition)
            except PylogError:  # not there, or a bad name: the handler answers it
                pass

    def _open(self, topic: str, partition: int) -> Log:
        _check(topic, partition)
        path = os.path.join(self.root, partition_dir_name(topic, partition))
        with self._lock:
            log = self._logs.get((topic, partition))
            if log is not None:
                return log
            if not os.path.isdir(path):
                raise UnknownTopicError(f"no partition {topic}-{partition} in {self.root}")
            log = Log.open(path, read_only=True, open_files=self._open_files)
            self._watch.add(path)
            self._logs[(topic, partition)] = log
            return log

    def _drop(self, key) -> None:
        with self._lock:
            log = self._logs.pop(key, None)
            if log is not None:
                self._watch.remove(log.path)
        if log is not None:
            log.close()

    def delete_topic(self, manager, name: str, *, timeout_ms: int) -> list[str]:
        """Delete topic ``name`` with ``manager`` (``LogManager.delete_topic``), its
        partitions first taken from their writers: one in another process hands it over
        (waiting up to ``timeout_ms`` in all, then :class:`LogLockedError`), and this
        process's logs of it are closed. Writes of this server to the topic are refused from
        the start (:meth:`writer`), and those under way finished first. A writer of another
        process that takes a partition back in between makes it try again, until
        ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._turns:
            self._deleting[name] = self._deleting.get(name, 0) + 1
            finished = self._turns.wait_for(lambda: name not in self._writing, timeout=_left_ms(deadline) / 1000)
        try:
            if not finished:
                raise LogLockedError(f"writes to topic {name!r} did not finish within {timeout_ms} ms")
            return self._delete_held(manager, name, deadline)
        finally:
            with self._turns:
                self._deleting[name] -= 1
                if not self._deleting[name]:
                    del self._deleting[name]

    def _delete_held(self, manager, name: str, deadline: float) -> list[str]:
        while True:
            parts = manager.partitions(name)
            for partition in parts:
                with self.pool.writer(name, partition, max_block_ms=_left_ms(deadline), create=False):
                    pass  # held here now: no other process has it
            for partition in parts:
                self._drop((name, partition))
                self.pool.close_log(name, partition)
            try:
                return manager.delete_topic(name)
            except LogLockedError:
                if time.monotonic() >= deadline:
                    raise

    def fileno(self) -> int:
        """The descriptor that is readable once a partition read was appended to (by any
        process); -1 without inotify. :meth:`drain` it when it is."""
        return self._watch.fileno()

    def drain(self) -> None:
        self._watch.drain()

    def close(self) -> None:
        """Close the read-only logs and give the writers back to the pool (the last user of
        the pool closes them, each flushed)."""
        with self._lock:
            logs, self._logs = list(self._logs.values()), {}
        close_all([log.close for log in logs] + [self._watch.close, self.pool.release])


def _check(topic: str, partition: int) -> None:
    """A topic name and partition number that name a directory of the log dir (else
    :class:`~pylog.errors.InvalidTopicError` or :class:`UnknownTopicError`)."""
    validate_topic(topic)
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise UnknownTopicError(f"partition must be a non-negative int, got {partition!r}")


def _left_ms(deadline: float) -> int:
    return max(int((deadline - time.monotonic()) * 1000), 0)
