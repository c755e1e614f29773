"""The machinery the offset and time indexes share: a file of fixed-size big-endian
entries, memory-mapped with numpy when written, plus native copies of both columns for
O(log n) lookups that never convert the mapped array (docs/format/index.md).

Opening costs nothing: the file is read or mapped on first use, and ``close()`` gives
the map and the fd back, so a log of many segments holds maps only for those in use.
"""

from __future__ import annotations

import os

import numpy as np

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError, StorageError
from pylog.io import fsync_path

INT32_MAX = 2**31 - 1
#: Appends written in place before the index maps its (preallocated) file.
MAP_AFTER_APPENDS = 4
_EMPTY = np.empty(0, np.int64)
_EMPTY.flags.writeable = False


class EntryFile:
    """A sorted index of (key, value) entries stored as ``dtype`` records in ``path``.

    ``max_bytes`` bounds the file (rounded down to whole entries); a writable index
    preallocates it on the first append and ``trim()`` cuts it back to its entries.
    """

    dtype: np.dtype  # big-endian on disk: [("k", ...), ("v", ">i4")]

    def __init__(self, path, base_offset: int, max_bytes: int = 10 * 1024 * 1024, *, writable: bool = True):
        self.path = None if path is None else os.fspath(path)
        self.base_offset = base_offset
        self.writable = writable and self.path is not None
        self.entry_bytes = self.dtype.itemsize
        self.max_entries = max(max_bytes // self.entry_bytes, 1)
        self._loaded = False
        self._keys = self._vals = _EMPTY
        self._n = 0
        self._mm = None
        self._file_bytes = 0
        self._ragged = False
        self._unmapped_appends = 0

    # -- loading -----------------------------------------------------------------------
    def _load(self) -> None:
        if self._loaded:
            return
        n = 0
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

    def _map(self):
        """Map the file for writing, grown to ``max_entries`` (Kafka preallocates)."""
        if self._mm is None:
            if not self.writable:
                raise ReadOnlyError(f"index {self.path} is read-only")
            want = self.max_entries * self.entry_bytes
            try:
                with open(self.path, "ab") as f:
                    if os.fstat(f.fileno()).st_size < want:
                        f.truncate(want)
                self._file_bytes = want
                self._mm = np.memmap(self.path, dtype=self.dtype, mode="r+", shape=(self.max_entries,))
            except OSError as e:
                raise StorageError(e.errno, f"cannot map {self.path}: {e.strerror}") from None
        return self._mm

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
        if not self.writable:
            raise ReadOnlyError(f"index {self.path} is read-only")
        self._load()
        if self._n >= self.max_entries:
            raise InvalidOffsetError(f"index {self.path} is full ({self.max_entries} entries)")
        self._ensure_capacity(self._n + 1)
        if self._mm is None and self._unmapped_appends < MAP_AFTER_APPENDS:
            # a few entries (a final time-index entry, a small segment's recovery) are cheaper
            # written in place than mapped with a preallocated file
            self._unmapped_appends += 1
            entry = np.array([(key, value)], dtype=self.dtype).tobytes()
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, entry, self._n * self.entry_bytes)
            finally:
                os.close(fd)
            self._file_bytes = max(self._file_bytes, (self._n + 1) * self.entry_bytes)
        else:
            self._map()[self._n] = (key, value)
        self._keys[self._n] = key
        self._vals[self._n] = value
        self._n += 1

    def _truncate_entries(self, n: int) -> None:
        self._load()
        if n >= self._n:
            return
        if self.writable and os.path.exists(self.path):
            if self._mm is not None:
                self._mm[n:self._n] = 0
            else:
                with open(self.path, "r+b") as f:
                    if f.seek(0, 2) > n * self.entry_bytes:
                        f.truncate(n * self.entry_bytes)
                self._file_bytes = min(self._file_bytes, n * self.entry_bytes)
        self._n = n

    def set_entries(self, keys, values) -> None:
        """Replace the entries in memory (an index rebuilt for a read-only log)."""
        self._loaded = True
        self._keys = np.asarray(keys, dtype=np.int64)
        self._vals = np.asarray(values, dtype=np.int64)
        self._n = len(self._keys)

    def reset(self) -> None:
        """Drop every entry (and, if writable, empty the file)."""
        self._release_map()
        self._unmapped_appends = 0
        self._loaded = True
        self._ragged = False
        self._n = 0
        self._keys = np.empty(0, np.int64)
        self._vals = np.empty(0, np.int64)
        if self.writable:
            with open(self.path, "wb"):
                pass
            self._file_bytes = 0

    def trim(self) -> None:
        """Cut the file to its entries (done on roll and close). Flushes first."""
        if not self.writable:
            return
        self._load()
        self._release_map()
        if (os.path.exists(self.path) or self._n) and self._file_bytes != self._n * self.entry_bytes:
            with open(self.path, "ab") as f:
                f.truncate(self._n * self.entry_bytes)
        self._file_bytes = self._n * self.entry_bytes

    def resize(self, max_bytes: int) -> None:
        """Change the capacity; the file grows to it on the next append."""
        self._release_map()
        self.max_entries = max(max_bytes // self.entry_bytes, 1)

    def flush(self) -> None:
        """msync the mapped entries (and fsync entries written in place) to disk."""
        if self._mm is not None or (self._unmapped_appends and self.writable):
            if self._mm is not None:
                self._mm.flush()
            fsync_path(self.path)

    def release(self) -> None:
        """Give back the map and its file descriptor, keeping the entries in memory; the next
        append maps the file again."""
        self._release_map()

    def close(self) -> None:
        """Give back the map and the cached columns; the index reloads on next use."""
        self._release_map()
        self._loaded = False
        self._keys = np.empty(0, np.int64)
        self._vals = np.empty(0, np.int64)
        self._n = 0

    def _release_map(self) -> None:
        if self._mm is not None:
            self._mm.flush()
            mm = self._mm
            self._mm = None
            mm._mmap.close() if getattr(mm, "_mmap", None) is not None else None

    def rename(self, new_path: str) -> None:
        """Rename the file (keeping the entries)."""
        self._release_map()
        if self.path is not None and os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        if self.path is not None:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass

    def _check_file_shape(self) -> None:
        self._load()
        if self._ragged:
            raise CorruptIndexError(
                f"index file size {self._file_bytes} is not a multiple of the {self.entry_bytes}-byte entry",
                path=self.path)


