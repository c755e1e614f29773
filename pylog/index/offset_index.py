"""``OffsetIndex``: the ``.index`` file, a sparse map from offsets to byte positions in
the segment's ``.log`` (docs/format/index.md).

Entries are 8 bytes, big-endian: relative offset (offset - base offset, int32) and
position (int32). Not checksummed: an index above the recovery point is rebuilt after a
crash, never trusted.
"""

from __future__ import annotations

from pylog.errors import CorruptIndexError, InvalidOffsetError
from pylog.index.base import KEY, VALUE, EntryFile
from pylog.layout import INT32_MAX
from pylog.layout import OFFSET_INDEX_ENTRY


class OffsetIndex(EntryFile):
    """Offset -> position. ``lookup`` is O(log n), a binary search of the mapped file.

    >>> import tempfile, os
    >>> idx = OffsetIndex(os.path.join(tempfile.mkdtemp(), "0.index"), base_offset=100)
    >>> idx.append(150, 4096); idx.append(180, 8192)
    >>> idx.lookup(170), idx.lookup(99)
    ((150, 4096), (100, 0))
    """

    dtype_spec = [("k", ">i4"), ("v", ">i4")]
    entry = OFFSET_INDEX_ENTRY

    def _entry(self, i: int) -> tuple[int, int]:
        return self._absolute(self._raw(i))

    def _absolute(self, raw: tuple[int, int]) -> tuple[int, int]:
        return self.base_offset + raw[0], raw[1]

    def lookup(self, offset: int) -> tuple[int, int]:
        """The largest entry with offset <= ``offset``; ``(base_offset, 0)`` below the first."""
        i = self._floor(offset - self.base_offset)
        return (self.base_offset, 0) if i < 0 else self._entry(i)

    def floor_position(self, position: int) -> tuple[int, int]:
        """The last entry at or before byte ``position`` (positions grow with offsets);
        ``(base_offset, 0)`` before the first. O(log n)."""
        i = self._search(VALUE, position, right=True) - 1
        return (self.base_offset, 0) if i < 0 else self._entry(i)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must strictly increase and fit in an int32 relative offset.
        Durable after ``flush()``; a failed write leaves no entry and raises :class:`StorageError`."""
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidOffsetError(f"offset {offset} does not fit in the index of segment {self.base_offset}")
        if not 0 <= position <= INT32_MAX:
            raise InvalidOffsetError(f"position {position} does not fit in an int32")
        last = self.last_entry
        if last is not None and offset <= last[0]:
            raise InvalidOffsetError(
                f"index entry offset {offset} is not above the last entry {last[0]} in {self.path}")
        self._append_raw(relative, position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        self._truncate_entries(self._search(KEY, offset - self.base_offset, right=False))

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` if the file cannot be this segment's index: its
        size, offsets below the base or negative positions at its first and last entries,
        entries going backwards among its first and last two. O(1): entries between are
        checked by every search that reads them."""
        self._check_file_shape()
        if not self._n:
            return
        (first_key, first_pos), (last_key, _) = self._raw(0), self._last
        if first_key < 0 or last_key < 0:
            raise CorruptIndexError(
                f"corrupt index: offset {self.base_offset + min(first_key, last_key)} is below "
                f"the base offset {self.base_offset}", path=self.path)
        if first_pos < 0:
            raise CorruptIndexError(f"corrupt index: position {first_pos} is negative", path=self.path)
        self._check_ends()
