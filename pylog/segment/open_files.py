"""``OpenFiles``: a bound on the file descriptors the segments of one or more logs hold,
released least recently used first (as Kafka bounds its memory-mapped indexes).

A segment counts for three while in use: its ``.log`` descriptor and its ``.index`` and
``.timeindex`` (a read-only map each, and an fd too while written). Each segment that
opens or maps a file reports itself here; when the total passes ``max_open_files``, the
least recently used segments give theirs back. What they know stays in memory and the
files reopen (or map again, O(1)) on next use, so a release costs one ``open`` later,
never data. A segment of a log busy in another thread is skipped, never released under
it. A ``LogManager`` shares one ``OpenFiles`` among all its logs; a ``Log`` opened on its
own has its own.
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict

from pylog.errors import InvalidConfigError

#: The largest default bound; the default is also at most half the process's limit.
MAX_DEFAULT_OPEN_FILES = 1000
#: Descriptors and maps a segment may hold (``.log`` plus two index maps).
WRITABLE_SEGMENT_FILES = 3


def default_max_open_files() -> int:
    """Half the process's soft ``RLIMIT_NOFILE``, at most 1,000 and at least 8: room is
    left for sockets, checkpoints and whatever else the process opens."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_DEFAULT_OPEN_FILES
    return max(min(soft // 2, MAX_DEFAULT_OPEN_FILES), 8)


class OpenFiles:
    """The open-file budget shared by the segments of some logs. Thread-safe.

    >>> OpenFiles(max_open_files=64).max_open_files
    64
    """

    def __init__(self, max_open_files: int | None = None):
        if max_open_files is None:
            max_open_files = default_max_open_files()
        if not isinstance(max_open_files, int) or isinstance(max_open_files, bool) or \
                max_open_files < WRITABLE_SEGMENT_FILES:
            raise InvalidConfigError(
                f"max_open_files must be an int of at least {WRITABLE_SEGMENT_FILES}, got {max_open_files!r}")
        self.max_open_files = max_open_files
        self._lock = threading.Lock()
        self._lru: OrderedDict[int, tuple] = OrderedDict()  # id(segment) -> (segment, owner's lock)
        self._files = 0

    @property
    def open_files(self) -> int:
        """Descriptors the tracked segments may hold now (an upper bound)."""
        return self._files

    def for_owner(self, owner_lock) -> "OwnedFiles":
        """The view a log hands its segments: ``owner_lock`` guards its segments' writes."""
        return OwnedFiles(self, owner_lock)

    def touch(self, segment, owner_lock) -> None:
        """``segment`` opened or used a file: it becomes the most recently used, and the least
        recently used others give their files back while the total is over the bound.
        O(1), plus one release per segment over the bound."""
        key = id(segment)
        with self._lock:
            entry = self._lru.pop(key, None)
            if entry is None:
                self._files += _files_of(segment)
            self._lru[key] = (segment, owner_lock)
            if self._files > self.max_open_files:
                self._shed(keep=key)

    def forget(self, segment) -> None:
        """``segment`` closed its files itself (closed, deleted, renamed)."""
        with self._lock:
            if self._lru.pop(id(segment), None) is not None:
                self._files -= _files_of(segment)

    def _shed(self, keep: int) -> None:
        """Release least recently used segments until within the bound (the lock held)."""
        busy = []
        while self._files > self.max_open_files and self._lru:
            key, entry = self._lru.popitem(last=False)
            segment, owner_lock = entry
            if key == keep or not owner_lock.acquire(blocking=False):
                busy.append((key, entry))  # in use by its log in another thread: never release under it
                continue
            try:
                segment.release_files()
            finally:
                owner_lock.release()
            self._files -= _files_of(segment)
        for key, entry in reversed(busy):  # back in their places, oldest first
            self._lru[key] = entry
            self._lru.move_to_end(key, last=False)


class OwnedFiles:
    """What a segment sees of the budget: ``touch``/``forget`` with its log's lock bound."""

    __slots__ = ("files", "owner_lock")

    def __init__(self, files: OpenFiles, owner_lock):
        self.files = files
        self.owner_lock = owner_lock

    def touch(self, segment) -> None:
        self.files.touch(segment, self.owner_lock)

    def forget(self, segment) -> None:
        self.files.forget(segment)


def _files_of(segment) -> int:
    return WRITABLE_SEGMENT_FILES
