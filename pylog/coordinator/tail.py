"""``TailReader``: the records a coordinator partition gained since the last look, for
coordinators that keep their state by replaying their topic (as Kafka's reload it).

It keeps a read-only :class:`~pylog.log.Log` open and the offset replayed to; each
``new_records`` reads only what was appended since (``isolation="committed"``: records
of open and aborted transactions are left out until their transaction ends, and then
only committed ones are returned), and starts over, calling ``reset``, when the writer
truncated, compacted or deleted below that offset. Cost: O(1) system calls when nothing
changed, O(new bytes) otherwise.
"""

from __future__ import annotations

import os

from pylog.log import Log


class TailReader:
    def __init__(self, path: str, fetch_bytes: int = 1 << 20):
        self.path = path
        self.fetch_bytes = fetch_bytes
        self._log: Log | None = None
        self._offset = 0
        self._segments_seen: tuple = ()

    def new_records(self):
        """``(records, reset)``: the committed records appended since the last call, and
        whether the caller must drop its state first (the partition was rewritten)."""
        log = self._open()
        if log is None:
            return [], False
        log.refresh()
        reset = self._rewritten(log)
        if reset:
            self._offset = log.log_start_offset
        out = []
        end = log.last_stable_offset
        while self._offset < end:
            fetch = log.read(self._offset, self.fetch_bytes, isolation="committed", max_offset=end)
            if fetch.next_offset <= self._offset:
                break
            out.extend(fetch.records())
            self._offset = fetch.next_offset
        return out, reset

    def _open(self) -> Log | None:
        if self._log is None:
            if not os.path.isdir(self.path):
                return None
            self._log = Log.open(self.path, read_only=True)
        return self._log

    def _rewritten(self, log: Log) -> bool:
        """A compaction or truncation replaces segment files: compare (base, inode) of
        the segments below the replayed offset."""
        seen = tuple((s.base_offset, _inode(s.log_path)) for s in log.segments if s.base_offset < self._offset)
        old = tuple(x for x in self._segments_seen if x[0] < self._offset)
        self._segments_seen = seen
        return self._offset < log.log_start_offset or self._offset > log.log_end_offset or (
            bool(old) and seen[:len(old)] != old)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def _inode(path: str) -> int:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return -1
