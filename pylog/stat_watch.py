"""``StatWatch``: whether directories or files may have changed since they were last
read, in one ``stat`` each.

A reader following a writer in another process must notice new, renamed and deleted
segment files without listing the directory on every poll, and moved checkpoints
without reading them. A directory's mtime moves on every create, rename and delete in
it, and a file replaced by rename gets a new inode; but an mtime is only as fine as the
file system's clock: two changes within one tick leave the same mtime. So a reading
counts as settled only when every stamp seen before it is at least one tick older than
the clock at that moment; until then ``changed()`` keeps answering True and the caller
reads again (a tick's worth of extra readings, never a missed change).

Assumes the stamps come from this machine's clock (a local file system), as Linux's
coarse real-time clock, and that the wall clock does not step backwards meanwhile.
"""

from __future__ import annotations

import os
import sys
import time

#: Linux's CLOCK_REALTIME_COARSE, the clock file timestamps are taken from (5 in <linux/time.h>).
_COARSE_CLOCK = getattr(time, "CLOCK_REALTIME_COARSE", 5 if sys.platform.startswith("linux") else None)
#: Without the coarse clock: how far the file system's clock may lag the precise one.
_CLOCK_LAG_NS = 20_000_000
#: Coarsest stamps assumed for a file system whose mtimes are whole seconds (FAT: 2 s).
_SECOND_STAMPS_NS = 2_000_000_000


def fs_clock_ns() -> int:
    """The clock new file timestamps are taken from, or a bound below it."""
    if _COARSE_CLOCK is not None:
        return time.clock_gettime_ns(_COARSE_CLOCK)
    return time.time_ns() - _CLOCK_LAG_NS


def stamp_granularity_ns(mtime_ns: int) -> int:
    """How coarse the file system's stamps may be, judged from one stamp: its trailing
    decimal zeros (an over-estimate costs a few extra listings, never a missed change)."""
    step = 1
    while step < 1_000_000_000 and mtime_ns % (step * 10) == 0:
        step *= 10
    return _SECOND_STAMPS_NS if step >= 1_000_000_000 else step


def _stamp(path: str):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def settled(mtime_ns: int, now_ns: int) -> bool:
    """Whether ``mtime_ns`` was at least one tick older than ``now_ns`` (read from
    :func:`fs_clock_ns` before the stat): any later change then gives another mtime."""
    return now_ns >= mtime_ns + stamp_granularity_ns(mtime_ns)


def _settled(stamps: tuple, now_ns: int) -> bool:
    return all(s is None or settled(s[1], now_ns) for s in stamps)


class StatWatch:
    """Watches ``paths`` (directories, or files replaced by rename) by their stat stamps.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> w = StatWatch([d])
    >>> w.changed()          # never read
    True
    >>> w.mark(); open(os.path.join(d, "new"), "w").close(); w.changed()
    True
    """

    def __init__(self, paths):
        self.paths = tuple(paths)
        self._seen = None  # the stamps at the last settled mark(); None: read again

    def changed(self) -> bool:
        """True if something may have changed since the last :meth:`mark`. One stat per path."""
        return self._seen is None or tuple(map(_stamp, self.paths)) != self._seen

    def mark(self) -> None:
        """Call right before reading (listing the directory, reading the files): later
        changes will show in ``changed()``."""
        now = fs_clock_ns()
        stamps = tuple(map(_stamp, self.paths))
        self._seen = stamps if _settled(stamps, now) else None
