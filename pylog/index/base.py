"""The machinery the offset and time indexes share: a file of fixed-size big-endian
entries, plus native copies of both columns for O(log n) lookups (docs/format/index.md).

Entries are written one ``pwrite`` each through the I/O seam (``pylog/io.py``) at the
end of the entries, so the file grows only by what the file system really allocated: a
full disk is a :class:`StorageError` from the write that needed the space, and a failed
write leaves no partial entry behind. Nothing is mapped, so there is no page to fault on.

Opening costs nothing: the file is read on first use, and ``close()`` gives the fd and
the columns back, so a log of many segments holds files only for those in use.
"""

from __future__ import annotations

import contextlib
import os
import struct

import numpy as np

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError, StorageError
from pylog.io import DEFAULT_IO, FileIO
_EMPTY = np.empty(0, np.int64)
_EMPTY.flags.writeable = False


class EntryFile:
    """A sorted index of (key, value) entries stored as ``dtype`` records in ``path``.

    ``max_bytes`` bounds the number of entries (rounded down to whole entries); the file
    holds the entries written so far (plus, in a file another writer preallocated, a zero
    tail that ``trim()`` cuts off).
    """

    dtype: np.dtype  # big-endian on disk: [("k", ...), ("v", ">i4")]
    entry: struct.Struct  # the same layout, to pack one entry for a write

    def __init__(self, path, base_offset: int, max_bytes: int = 10 * 1024 * 1024, *, writable: bool = True,
                 io: FileIO = DEFAULT_IO):
        self.path = None if path is None else os.fspath(path)
        self.base_offset = base_offset
        self.writable = writable and self.path is not None
        self.io = io
        self.entry_bytes = self.dtype.itemsize
        self.max_entries = max(max_bytes // self.entry_bytes, 1)
        self._loaded = False
        self._keys = self._vals = _EMPTY
        self._n = 0
        self._fd = -1
        self._file_bytes = 0
        self._ragged = False
        self._unsynced = False

    # -- loading -----------------------------------------------------------------------
    def _load(self) -> None:
        if self._loaded:
            return
        n = 0
        self._file_bytes = 0
        if self.path is not None and os.path.exists(self.path):
            size = os.path.getsize(self.path)
            self._file_bytes = size
            self._ragged = size % self.entry_bytes != 0
            count = size // self.entry_bytes
            if count:
                try:
                    raw = np.fromfile(self.path, dtype=self.dtype, count=count)
                except OSError as e:
                    raise StorageError(e.errno, f"cannot read {self.path}: {e.strerror}") from None
                keys = raw["k"].astype(np.int64)
                vals = raw["v"].astype(np.int64)
                n = self._valid_prefix(keys, vals)
                self._keys, self._vals = keys, vals
        self._n = n
        self._loaded = True

    def _valid_prefix(self, keys: np.ndarray, vals: np.ndarray) -> int:
        """Entries up to the first one that does not increase: an untrimmed, zero-filled
        tail left by a crash (or by a live writer) is not data."""
        if len(keys) <= 1:
            return len(keys)
        bad = np.flatnonzero(keys[1:] <= keys[:-1])
        return int(bad[0]) + 1 if len(bad) else len(keys)

    def _ensure_capacity(self, n: int) -> None:
        if len(self._keys) < n:
            cap = max(n, 2 * len(self._keys), 1024)
            for name in ("_keys", "_vals"):
                old = getattr(self, name)
                new = np.empty(cap, np.int64)
                new[: self._n] = old[: self._n]
                setattr(self, name, new)

    def _writer(self) -> int:
        """The fd writes go through (opened on first use, the file created if missing)."""
        if self._fd < 0:
            self._fd = self.io.open(self.path)
        return self._fd

    def _release_fd(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            self.io.close(fd)

    def _cut_file(self, size: int) -> None:
        """Cut the file to ``size`` bytes if it is longer. Not durable until ``flush()``."""
        if self._file_bytes > size:
            self.io.truncate(self._writer(), size)
            self._file_bytes = size
            self._unsynced = True

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        self._load()
        return self._n

    def entries(self) -> list[tuple[int, int]]:
        """Every entry as (key, value) with absolute offsets. O(n)."""
        self._load()
        return [self._entry(i) for i in range(self._n)]

    def _entry(self, i: int) -> tuple[int, int]:
        raise NotImplementedError

    @property
    def last_entry(self) -> tuple[int, int] | None:
        self._load()
        return self._entry(self._n - 1) if self._n else None

    def _floor(self, key: int) -> int:
        """Index of the largest entry whose key is <= ``key`` (-1 if none). O(log n)."""
        self._load()
        return int(np.searchsorted(self._keys[: self._n], key, side="right")) - 1

    def is_full(self) -> bool:
        self._load()
        return self._n >= self.max_entries

    # -- writing -----------------------------------------------------------------------------
    def _append_raw(self, key: int, value: int) -> None:
        """Write one entry after the last. All or nothing: a failed write (disk full, I/O
        error) cuts the file back and raises :class:`StorageError`. One syscall; durable
        after ``flush()``."""
        if not self.writable:
            raise ReadOnlyError(f"index {self.path} is read-only")
        self._load()
        n = self._n
        if n >= self.max_entries:
            raise InvalidOffsetError(f"index {self.path} is full ({self.max_entries} entries)")
        position = n * self.entry_bytes
        if self._file_bytes > position:
            self._cut_file(position)  # a preallocated or stale tail past the entries goes first
        try:
            self.io.pwrite(self._fd if self._fd >= 0 else self._writer(), self.entry.pack(key, value), position)
        except StorageError:
            self._file_bytes = position + self.entry_bytes  # part of the entry may have landed
            with contextlib.suppress(StorageError):
                self._cut_file(position)
            raise
        self._unsynced = True
        self._file_bytes = position + self.entry_bytes
        self._ensure_capacity(n + 1)
        self._keys[n] = key
        self._vals[n] = value
        self._n = n + 1

    def _truncate_entries(self, n: int) -> None:
        self._load()
        if n >= self._n:
            return
        if self.writable:
            self._cut_file(n * self.entry_bytes)
        self._n = n

    def set_entries(self, keys, values) -> None:
        """Replace the entries in memory (an index rebuilt for a read-only log)."""
        self._loaded = True
        self._keys = np.asarray(keys, dtype=np.int64)
        self._vals = np.asarray(values, dtype=np.int64)
        self._n = len(self._keys)

    def reset(self) -> None:
        """Drop every entry (and, if writable, empty the file, creating it if missing)."""
        self._loaded = True
        self._ragged = False
        self._n = 0
        self._keys = np.empty(0, np.int64)
        self._vals = np.empty(0, np.int64)
        if self.writable:
            self.io.truncate(self._writer(), 0)
            self._file_bytes = 0
            self._unsynced = True

    def trim(self) -> None:
        """Cut the file to its entries (a preallocated zero tail goes) and give back the fd;
        done on roll and close. Not durable until ``flush()``."""
        if not self.writable:
            return
        self._load()
        self._cut_file(self._n * self.entry_bytes)
        self._release_fd()

    def resize(self, max_bytes: int) -> None:
        """Change the capacity (whole entries within ``max_bytes``)."""
        self.max_entries = max(max_bytes // self.entry_bytes, 1)

    def flush(self) -> None:
        """fsync the file if it changed since the last flush (no-op otherwise)."""
        if self._unsynced:
            if self._fd >= 0:
                self.io.fsync(self._fd)
            else:
                self.io.fsync_path(self.path)
            self._unsynced = False

    def release(self) -> None:
        """Give back the file descriptor, keeping the entries in memory; the next
        append opens the file again."""
        self._release_fd()

    def close(self) -> None:
        """Give back the fd and the cached columns; the index reloads on next use."""
        self._release_fd()
        self._loaded = False
        self._keys = np.empty(0, np.int64)
        self._vals = np.empty(0, np.int64)
        self._n = 0

    def _check_file_shape(self) -> None:
        self._load()
        if self._ragged:
            raise CorruptIndexError(
                f"index file size {self._file_bytes} is not a multiple of the {self.entry_bytes}-byte entry",
                path=self.path)


