"""``DirWatch``: sleep until a file in one of some directories changes, without polling.

On Linux it is inotify (through ctypes): a write, create or rename in a watched directory
makes its descriptor readable, so a consumer waits in ``select`` and an idle consumer
uses no CPU; it wakes within microseconds of a producer's append. Elsewhere it sleeps
with a backoff from 0.2 ms to 5 ms, which a caller must tolerate (a few wake-ups a second
when idle). Events that arrive between a check for data and ``wait`` are kept by the
kernel, so no append is missed: watch, check, then wait.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import sys

from pylog.locks import backoff

_IN_MODIFY, _IN_CREATE, _IN_MOVED_TO, _IN_CLOSE_WRITE = 0x2, 0x100, 0x80, 0x8
_MASK = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO | _IN_CLOSE_WRITE
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch  # noqa: B018 - present?
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


class DirWatch:
    """Watches directories (added with :meth:`add`); :meth:`wait` returns on a change."""

    def __init__(self):
        self._fd = -1
        self._watched: dict[str, int] = {}
        if _LIBC is not None:
            fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            self._fd = fd if fd >= 0 else -1
        self._pauses = backoff()

    @property
    def uses_events(self) -> bool:
        return self._fd >= 0

    def fileno(self) -> int:
        """The inotify descriptor, readable once a change is pending (for an event loop's
        ``add_reader``; :meth:`drain` it there); -1 without inotify."""
        return self._fd

    def add(self, path: str) -> None:
        if path in self._watched or self._fd < 0:
            self._watched.setdefault(path, -1)
            return
        wd = _LIBC.inotify_add_watch(self._fd, os.fsencode(path), _MASK)
        self._watched[path] = wd

    def remove(self, path: str) -> None:
        wd = self._watched.pop(path, -1)
        if wd >= 0 and self._fd >= 0:
            _LIBC.inotify_rm_watch(self._fd, wd)

    def wait(self, timeout_s: float) -> bool:
        """Sleep until a change or ``timeout_s``; True if woken by a change (or, without
        inotify, after one backoff step). Clears the events seen."""
        if timeout_s <= 0:
            return False
        if self._fd < 0:
            return self._pauses.sleep(timeout_s)
        ready, _, _ = select.select([self._fd], [], [], timeout_s)
        if not ready:
            return False
        self.drain()
        return True

    def drain(self) -> None:
        """Forget pending events (call before checking for data)."""
        self._pauses.reset()
        if self._fd < 0:
            return
        try:
            while os.read(self._fd, 65536):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
