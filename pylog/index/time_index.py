"""``TimeIndex``: the ``.timeindex`` file, a sparse map from timestamps to offsets
(docs/format/timeindex.md).

Entries are 12 bytes, big-endian: timestamp (int64) and relative offset (int32). An
entry (T, O) says: the largest timestamp in the segment up to the batch ending at
offset O is T. Timestamps strictly increase; one slot is kept for the entry written
when the segment stops being active, so a closed segment's last entry is its max.
"""

from __future__ import annotations

from pylog.errors import CorruptIndexError, InvalidOffsetError
from pylog.index.base import VALUE, EntryFile
from pylog.layout import INT32_MAX
from pylog.layout import TIME_INDEX_ENTRY


class TimeIndex(EntryFile):
    """Timestamp -> offset. ``lookup`` is O(log n).

    >>> import tempfile, os
    >>> idx = TimeIndex(os.path.join(tempfile.mkdtemp(), "0.timeindex"), base_offset=0)
    >>> idx.maybe_append(1000, 10); idx.maybe_append(900, 12); idx.maybe_append(2000, 20)
    >>> idx.entries(), idx.lookup(1500), idx.lookup(5)
    ([(1000, 10), (2000, 20)], (1000, 10), (-1, 0))
    """

    dtype_spec = [("k", ">i8"), ("v", ">i4")]
    entry = TIME_INDEX_ENTRY

    def _entry(self, i: int) -> tuple[int, int]:
        return self._absolute(self._raw(i))

    def _absolute(self, raw: tuple[int, int]) -> tuple[int, int]:
        return raw[0], self.base_offset + raw[1]

    def is_full(self) -> bool:
        """One slot stays free for the final entry written on roll or close."""
        self._load()
        return self._n >= self.max_entries - 1

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The largest entry with timestamp <= ``timestamp``; ``(-1, base_offset)`` if none."""
        i = self._floor(timestamp)
        return (-1, self.base_offset) if i < 0 else self._entry(i)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if ``timestamp`` is above the last entry's; an offset
        going backwards raises. Durable after ``flush()``."""
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidOffsetError(f"offset {offset} does not fit in the time index of segment {self.base_offset}")
        self._load()
        if self._n >= (self.max_entries if skip_full_check else self.max_entries - 1):
            raise InvalidOffsetError(f"time index {self.path} is full")
        last = self.last_entry
        if last is not None:
            if offset < last[1]:
                raise InvalidOffsetError(f"time index offset {offset} goes below the last entry's {last[1]}")
            if timestamp <= last[0]:
                return
        self._append_raw(timestamp, relative)

    def append(self, timestamp: int, offset: int) -> None:
        """Add an entry whose timestamp must be above the last one's."""
        last = self.last_entry
        if last is not None and timestamp <= last[0]:
            raise InvalidOffsetError(f"time index timestamp {timestamp} is not above the last entry's {last[0]}")
        self.maybe_append(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        self._truncate_entries(self._search(VALUE, offset - self.base_offset, right=False))

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` if the file cannot be this segment's time index:
        its size, offsets below the base at its first and last entries, entries going
        backwards among its first and last two. O(1): entries between are checked by every
        search that reads them."""
        self._check_file_shape()
        if not self._n:
            return
        if self._raw(0)[1] < 0 or self._last[1] < 0:
            raise CorruptIndexError("corrupt time index: an offset below the base offset", path=self.path)
        self._check_ends()
