"""The machinery the offset and time indexes share: a file of fixed-size big-endian
entries, written with ``pwrite`` and read through a read-only memory map, searched in
place (docs/format/index.md).

Writes: one ``pwrite`` per entry through the I/O seam (``pylog/io.py``) at the end of the
entries, so the file grows only by what the file system really allocated: a full disk is
a :class:`StorageError` from the write that needed the space, and a failed write leaves no
partial entry behind. Nothing is ever written through the map.

Reads: the file is mapped read-only (``PROT_READ``, shared), over the whole entries it
held when mapped and never past its size then; lookups binary-search the map without
converting it (in C when the speedups are built). The pages are the page cache's: no
private copy, shared by every process that reads the index. A lookup that needs entries
written after the map was made maps the file again (as Kafka's ``resize``).

No SIGBUS: a mapping is read-only (nothing to allocate on a full disk), covers only bytes
the file held, and the file is never cut in place below a page a mapping may cover:
a cut that would drop a page writes the kept entries to a new file and renames it over,
so mappings elsewhere keep the old inode (:meth:`EntryFile._cut_file`).

Opening costs nothing: the file is mapped on first use (O(log n): no read of the whole
file), and ``release()``/``close()`` give the map and the fd back, so a log of many
segments holds maps only for those in use.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError, StorageError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import INDEX_REWRITE_SUFFIX, INT64_MAX, INT64_MIN
from pylog.record import backend

#: The C search of a mapped index, or None (no C extension, or switched off): bound once, a lookup is hot.
_c_search = backend.speedups.index_search if backend.speedups is not None else None

PAGE_BYTES = mmap.PAGESIZE
#: The column a search compares: keys (offsets, timestamps) or values (positions, offsets).
KEY, VALUE = 0, 1


def _page_end(size: int) -> int:
    """The end of the last page holding byte ``size - 1``: what a map of ``size`` bytes spans."""
    return -(-size // PAGE_BYTES) * PAGE_BYTES


class EntryFile:
    """A sorted index of (key, value) entries stored as ``dtype`` records in ``path``.

    ``max_bytes`` bounds the number of entries (rounded down to whole entries); the file
    holds the entries written so far (plus, in a file another writer preallocated or one
    cut on a full disk, a zero tail that ``trim()`` cuts off).
    """

    entry: struct.Struct  # big-endian on disk: a key (int32 or int64), then a value (int32)
    #: the same layout as numpy's structured dtype: [("k", key), ("v", ">i4")]
    dtype_spec: list

    def __init__(self, path, base_offset: int, max_bytes: int = 10 * 1024 * 1024, *, writable: bool = True,
                 io: FileIO = DEFAULT_IO, on_map=None):
        self.path = None if path is None else os.fspath(path)
        self.base_offset = base_offset
        self.writable = writable and self.path is not None
        self.io = io
        self.on_map = on_map  # called after each map of the file (what bounds open files counts)
        self.entry_bytes = self.entry.size
        self.max_entries = max(max_bytes // self.entry_bytes, 1)
        self._zero_entry = bytes(self.entry_bytes)
        self._loaded = False
        self._n = 0
        self._buf = None       # the read-only mmap, or bytes of entries set in memory
        self._mapped = 0       # entries ``_buf`` covers
        self._in_memory = False
        self._inode = None     # of the file mapped: a reader that released its map checks it on remap
        self._last = None      # raw (key, value) of entry n - 1
        self._fd = -1
        self._file_bytes = 0
        self._ragged = False
        self._unsynced = False
        self._renamed = False

    # -- loading -----------------------------------------------------------------------
    def _load(self) -> None:
        """Map the file and count its entries: O(log n), reading only the pages a binary
        search for an untrimmed zero tail touches."""
        if self._loaded:
            return
        size, buf = self._map_file()
        self._file_bytes = size
        self._ragged = size % self.entry_bytes != 0
        n = self._valid_count(buf, size // self.entry_bytes)
        self._last = self.entry.unpack_from(buf, (n - 1) * self.entry_bytes) if n else None
        self._n = n
        self._loaded = True

    def _map_file(self):
        """Map the whole entries the file holds now (nothing if it is missing or empty);
        returns its size and the map. The map never reaches past the file's size at this
        moment."""
        self._unmap()
        if self.path is None:
            return 0, None
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return 0, None
        except OSError as e:
            raise StorageError(e.errno, f"cannot open {self.path}: {e.strerror}") from None
        buf = None
        try:
            st = os.fstat(fd)
            count = st.st_size // self.entry_bytes
            if count:
                buf = mmap.mmap(fd, count * self.entry_bytes, mmap.MAP_SHARED, mmap.PROT_READ)
        except OSError as e:
            raise StorageError(e.errno, f"cannot map {self.path}: {e.strerror}") from None
        finally:
            os.close(fd)
        self._buf, self._mapped, self._inode = buf, count, st.st_ino
        if count and self.on_map is not None:
            self.on_map()
        return st.st_size, buf

    def _valid_count(self, buf, count: int) -> int:
        """Entries before an untrimmed zero tail (left by a crash, a preallocating writer or
        a cut on a full disk): a binary search for the first all-zero entry past the first.
        O(log n)."""
        if count <= 1 or not self._is_zero(buf, count - 1):
            return count
        lo, hi = 1, count - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_zero(buf, mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _is_zero(self, buf, i: int) -> bool:
        return buf[i * self.entry_bytes:(i + 1) * self.entry_bytes] == self._zero_entry

    @classmethod
    def dtype(cls):
        """The entries' layout as a numpy structured dtype (numpy is imported here, not
        when the index is: opening a log needs none of it)."""
        import numpy as np
        return np.dtype(cls.dtype_spec)

    def _valid_prefix(self, keys, vals) -> int:
        """Entries of native columns (numpy arrays) up to the first one that does not
        increase (for tools that read index bytes they were handed). O(n)."""
        import numpy as np
        if len(keys) <= 1:
            return len(keys)
        bad = np.flatnonzero(keys[1:] <= keys[:-1])
        return int(bad[0]) + 1 if len(bad) else len(keys)

    def _buffer(self):
        """The entries, mapped again when entries were written (or the map released) since
        the map was made. O(1), one ``mmap`` when it maps. The caller holds the map it gets:
        a release in another thread drops this object's reference, and the pages stay
        mapped until the last holder lets go."""
        buf = self._buf
        if buf is None or self._mapped < self._n:
            inode = self._inode
            buf = self._map_file()[1]
            if not self.writable and (self._inode != inode or self._mapped < self._n):
                self._loaded = False  # another file took the name since: read it afresh
                self._load()
                buf = self._buf
        return buf

    def _raw(self, i: int) -> tuple[int, int]:
        """Entry ``i`` as stored: (key, value), relative offsets as they are."""
        return self.entry.unpack_from(self._buffer(), i * self.entry_bytes)

    def _search(self, column: int, target: int, *, right: bool) -> int:
        """How many entries have ``column`` < ``target`` (<= with ``right``): a binary search of
        the map in place, O(log n). Every entry it reads must lie, in both columns, between the
        entries read before it on either side; if one does not, the index is corrupt
        (:class:`CorruptIndexError`) and the caller rebuilds it."""
        self._load()
        n = self._n
        if n == 0:
            return 0
        target = min(max(target, INT64_MIN), INT64_MAX)
        buf = self._buffer()
        if _c_search is not None:
            found = _c_search(buf, n, self.entry_bytes, column, target, right)
        else:
            found = _search_py(self.entry, buf, n, column, target, right)
        if found < 0:
            raise CorruptIndexError("corrupt index: entries out of order", path=self.path)
        return found

    def _writer(self) -> int:
        """The fd writes go through (opened on first use, the file created if missing)."""
        if self._fd < 0:
            self._fd = self.io.open(self.path)
        return self._fd

    def _release_fd(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            self.io.close(fd)

    def _unmap(self) -> None:
        """Drop the map: unmapped at once unless a lookup in another thread still holds it
        (then when it lets go), never closed under it."""
        self._buf, self._mapped = None, 0

    def _cut_file(self, size: int) -> None:
        """Cut the file to ``size`` bytes if it is longer. Never below a page a map (here or in
        another process) may cover: a map holds only whole entries the file held, so a cut
        that keeps every such page is made in place, and one that would drop a page writes
        the kept entries to a new file renamed over this one (old maps keep the old inode).
        On a full disk, where the new file cannot be written, the entries past ``size`` are
        overwritten with zeros instead (an untrimmed tail readers ignore; ``trim()`` cuts it
        later). Not durable until ``flush()``."""
        if self._file_bytes <= size:
            return
        whole = self._file_bytes // self.entry_bytes * self.entry_bytes
        if _page_end(size) >= _page_end(whole):
            self.io.truncate(self._writer(), size)
            self._file_bytes = size
        else:
            try:
                self._replace_file(size)
            except StorageError:
                self._zero_past(size, whole)
        self._unsynced = True

    def _replace_file(self, size: int) -> None:
        """Write the first ``size`` bytes to ``path.tmp`` and rename it over ``path``."""
        data = bytes(self._buffer()[:size]) if size else b""
        tmp = self.path + INDEX_REWRITE_SUFFIX
        fd = self.io.open(tmp)
        try:
            try:
                self.io.truncate(fd, 0)
                if data:
                    self.io.pwrite(fd, data, 0)
            finally:
                self.io.close(fd)
            self.io.rename(tmp, self.path)
        except StorageError:
            with contextlib.suppress(StorageError):
                self.io.remove(tmp)
            raise
        self._release_fd()  # it names the old inode
        self._unmap()
        self._file_bytes = size
        self._renamed = True

    def _zero_past(self, size: int, whole: int) -> None:
        """Overwrite the entries from ``size`` to ``whole`` with zeros (allocated pages: no space needed)."""
        if whole > size:
            self.io.pwrite(self._writer(), bytes(whole - size), size)
        self._unmap()  # the map still shows the old entries

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

    def _absolute(self, raw: tuple[int, int]) -> tuple[int, int]:
        raise NotImplementedError

    @property
    def last_entry(self) -> tuple[int, int] | None:
        self._load()
        return None if self._last is None else self._absolute(self._last)

    def _floor(self, key: int) -> int:
        """Index of the largest entry whose key is <= ``key`` (-1 if none). O(log n)."""
        return self._search(KEY, key, right=True) - 1

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
        if self._file_bytes > position and self._ragged:
            self._cut_file(position)  # a torn entry goes first (whole stale entries are written over)
        try:
            self.io.pwrite(self._fd if self._fd >= 0 else self._writer(), self.entry.pack(key, value), position)
        except StorageError:
            with contextlib.suppress(OSError):  # part of the entry may have landed: cut it off
                self._file_bytes = max(self._file_bytes, os.fstat(self._fd).st_size)
                self._cut_file(position)  # in place: no map covers a part of an entry
            raise
        self._unsynced = True
        self._file_bytes = max(self._file_bytes, position + self.entry_bytes)
        if self._mapped > n:
            self._unmap()  # the map shows what was there before (a zero tail)
        self._last = (key, value)
        self._n = n + 1

    def _truncate_entries(self, n: int) -> None:
        self._load()
        if n >= self._n:
            return
        if self.writable:
            self._cut_file(n * self.entry_bytes)
        self._n = n
        self._last = self._raw(n - 1) if n else None

    def set_entries(self, keys, values) -> None:
        """Replace the entries in memory (an index rebuilt for a read-only log)."""
        import numpy as np
        keys = np.asarray(keys, dtype=np.int64)
        raw = np.empty(len(keys), self.dtype())
        raw["k"], raw["v"] = keys, np.asarray(values, dtype=np.int64)
        self._unmap()
        self._buf = raw.tobytes()
        self._n = self._mapped = len(keys)
        self._in_memory = self._loaded = True
        self._last = self._raw(self._n - 1) if self._n else None

    def reset(self) -> None:
        """Drop every entry (and, if writable, empty the file, creating it if missing)."""
        self._load()
        self._ragged = False
        if self.writable:
            self._cut_file(0)
            self._writer()
            self._unsynced = True
        self._unmap()
        self._n = 0
        self._last = None

    def trim(self) -> None:
        """Cut the file to its entries (a zero tail goes) and give back the fd; done on roll
        and close. Not durable until ``flush()``."""
        if not self.writable:
            return
        self._load()
        self._cut_file(self._n * self.entry_bytes)
        self._release_fd()

    def resize(self, max_bytes: int) -> None:
        """Change the capacity (whole entries within ``max_bytes``)."""
        self.max_entries = max(max_bytes // self.entry_bytes, 1)

    def flush(self) -> None:
        """fsync the file if it changed since the last flush (no-op otherwise), and its
        directory if a cut renamed a new file over it."""
        if self._unsynced:
            if self._fd >= 0:
                self.io.fsync(self._fd)
            else:
                self.io.fsync_path(self.path)
            if self._renamed:
                self.io.fsync_dir(os.path.dirname(self.path) or ".")
                self._renamed = False
            self._unsynced = False

    def release(self) -> None:
        """Give back the file descriptor and the map; the next lookup maps the file again
        (a read-only index whose file was replaced meanwhile reads the new one)."""
        self._release_fd()
        if not self._in_memory:
            self._unmap()

    def close(self) -> None:
        """Give back the fd and the map; the index reloads on next use."""
        self._release_fd()
        self._unmap()
        self._in_memory = self._loaded = False
        self._n = 0
        self._last = None

    @property
    def is_mapped(self) -> bool:
        """Whether a map of the file is held now."""
        return isinstance(self._buf, mmap.mmap) and not self._buf.closed

    def _check_ends(self) -> None:
        """Raise :class:`CorruptIndexError` unless the first, next-to-last and last entries go
        forwards in both columns (the part of the order a sanity check can see in O(1))."""
        n = self._n
        ends = [self._raw(0)] + ([self._raw(n - 2)] if n > 2 else []) + ([self._last] if n > 1 else [])
        for (k0, v0), (k1, v1) in zip(ends, ends[1:]):
            if k1 < k0 or v1 < v0:
                raise CorruptIndexError(f"corrupt index: entries go backwards ({k0}, {v0}) then ({k1}, {v1})",
                                        path=self.path)

    def _check_file_shape(self) -> None:
        self._load()
        if self._ragged:
            raise CorruptIndexError(
                f"index file size {self._file_bytes} is not a multiple of the {self.entry_bytes}-byte entry",
                path=self.path)


def _search_py(entry: struct.Struct, buf, n: int, column: int, target: int, right: bool) -> int:
    """The pure-Python twin of the C ``index_search``: same answer, same order checks."""
    size = entry.size
    lo, hi = 0, n
    low_k = low_v = INT64_MIN
    high_k = high_v = INT64_MAX
    while lo < hi:
        mid = (lo + hi) // 2
        k, v = entry.unpack_from(buf, mid * size)
        if not (low_k <= k <= high_k and low_v <= v <= high_v):
            return -1
        x = v if column else k
        if x < target or (right and x == target):
            lo, low_k, low_v = mid + 1, k, v
        else:
            hi, high_k, high_v = mid, k, v
    return lo
