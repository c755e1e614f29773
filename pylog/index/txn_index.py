"""``TxnIndex``: the ``.txnindex`` file, one 34-byte entry per aborted transaction whose
ABORT marker lies in the segment (docs/format/txnindex.md).

Entry: version (int16, 0), producer id, first offset, last offset (the marker's), last
stable offset when the abort was written; all big-endian int64. A plain append-only file
(not mapped), created only when the first entry is written; every change goes through the
I/O seam (``pylog/io.py``).

The file has no checksum, and a missing or emptied one reads like a segment without
aborted transactions, so an index starts untrusted: the log compares it with the
segment's ABORT markers (``verify``) before a committed read uses it.

A read-only index follows its file: when the file's size changed since it was read
(another process appends), it is read again. Entries a read-only log learns from its
own replay are kept in memory beside the file's, one per ABORT marker; once the file was
found wrong, only those count.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from typing import NamedTuple

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError, StorageError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import TXN_INDEX_ENTRY, TXN_INDEX_ENTRY_BYTES, TXN_INDEX_VERSION


class AbortedTxn(NamedTuple):
    """An aborted transaction: records of ``producer_id`` from ``first_offset`` up to its
    ABORT marker at ``last_offset`` are to be skipped by committed readers."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return TXN_INDEX_ENTRY.pack(TXN_INDEX_VERSION, *self)


class TxnIndex:
    """The aborted transactions of one segment, in order of their markers."""

    def __init__(self, path, base_offset: int, *, writable: bool = True, io: FileIO = DEFAULT_IO):
        self.path = os.fspath(path)
        self.base_offset = base_offset
        self.writable = writable
        self.io = io
        #: The entries were written by this process or checked against the segment's markers.
        self.trusted = False
        self._entries: list[AbortedTxn] | None = None
        self._unsynced = False
        self._file_bytes = 0  # size of the file when read
        self._in_memory: list[AbortedTxn] = []  # learned by a read-only log, or its rebuilt index
        self._file_ignored = False  # a read-only index found wrong: its file no longer counts

    def _load(self) -> list[AbortedTxn]:
        """The entries, ordered by marker offset. Read-only: one ``stat`` per call, and a
        re-read of the file (O(entries)) when its size changed."""
        size = self._file_bytes if self.writable and self._entries is not None else self._file_size()
        if self._entries is None or size != self._file_bytes:
            self._file_bytes = size
            entries = list(read_txn_entries(self.path)) if self._file_bytes and not self._file_ignored else []
            for txn in self._in_memory:
                _insert(entries, txn)
            self._entries = entries
        return self._entries

    def _file_size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its last offset must be above the previous one's. Durable after ``flush()``;
        a failed write leaves no entry and raises :class:`StorageError`."""
        if not self.writable:
            raise ReadOnlyError(f"transaction index {self.path} is read-only")
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise InvalidOffsetError(f"aborted transaction ending at {txn.last_offset} is not after the last "
                                     f"one ({entries[-1].last_offset}) in {self.path}")
        size = len(entries) * TXN_INDEX_ENTRY_BYTES
        fd = self.io.open(self.path)
        try:
            self.io.pwrite(fd, txn.pack(), size)
        except StorageError:
            with contextlib.suppress(StorageError):
                self.io.truncate(fd, size)  # no torn entry stays behind
                if not size:
                    self.io.remove(self.path)  # nor a file the failed write created
            raise
        finally:
            self.io.close(fd)
        self._unsynced = True
        entries.append(txn)

    def verify(self, expected: list[AbortedTxn], *, checked_to: int, may_grow: bool = False) -> bool:
        """Trust the index if its entries below ``checked_to`` are ``expected`` (the
        transactions the segment's markers end there) and, unless ``may_grow`` (a read-only
        view of a segment another process appends to), it holds none beyond; otherwise
        ``replace`` it by ``expected``. Returns True if it was replaced. O(entries)."""
        try:
            entries = self._load()
        except CorruptIndexError:
            entries = None
        if entries is not None and _agrees(entries, expected, checked_to, may_grow):
            self.trusted = True
            return False
        self.replace(expected)
        return True

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Make ``entries`` the index (trusted): the file is rewritten in one write when
        writable, the entries kept in memory (the file ignored) when read-only. Not
        fsynced: no open trusts the file before checking it again."""
        if self.writable:
            if entries or os.path.exists(self.path):
                self.io.write_file(self.path, b"".join(t.pack() for t in entries), fsync=False)
                self._unsynced = True
            self._file_bytes = len(entries) * TXN_INDEX_ENTRY_BYTES
        else:
            self._file_ignored = True
            self._in_memory = list(entries)
        self._entries = list(entries)
        self.trusted = True

    def add_in_memory(self, txn: AbortedTxn) -> None:
        """Record an entry without writing it (a read-only log's replay found its ABORT
        marker); the file's entry for the same marker, if any, wins. O(log entries)."""
        self._in_memory.append(txn)
        if self._entries is not None:  # else merged when next loaded (a damaged file is left to ``verify``)
            _insert(self._entries, txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound); ``complete`` is True when later
        segments need not be searched (an entry's last stable offset reached the bound)."""
        out = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose marker is at or after ``offset`` (an unreadable file is
        emptied, to be rebuilt when next checked)."""
        self._in_memory = [t for t in self._in_memory if t.last_offset < offset]
        try:
            keep = [t for t in self._load() if t.last_offset < offset]
        except CorruptIndexError:
            keep, self.trusted = [], False
        if self._entries is None or len(keep) != len(self._entries):
            self._entries = keep
            self._cut_file(len(keep) * TXN_INDEX_ENTRY_BYTES)

    def _cut_file(self, size: int) -> None:
        if self.writable and os.path.exists(self.path):
            fd = self.io.open(self.path, create=False)
            try:
                self.io.truncate(fd, size)
            finally:
                self.io.close(fd)
            self._unsynced = True
            self._file_bytes = size

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` for a bad size, version or an entry below the base offset."""
        for txn in self._load():
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(f"aborted transaction ending at {txn.last_offset} is below the base "
                                        f"offset {self.base_offset}", path=self.path)

    def flush(self) -> None:
        """fsync the file if it changed since the last flush."""
        if self._unsynced:
            self.io.fsync_path(self.path)
            self._unsynced = False

    def close(self) -> None:
        """Drop the cached entries (the in-memory ones stay, merged again on next use)."""
        self._entries = None

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            self.io.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self._entries = None
        self._in_memory = []
        self.io.remove(self.path)


def _agrees(entries: list[AbortedTxn], expected: list[AbortedTxn], checked_to: int, may_grow: bool) -> bool:
    """Same producers, first and last offsets, in order; a last stable offset may be lower
    than expected (the high watermark lagged when it was written), which only widens a
    committed read's search, never higher."""
    below = [t for t in entries if t.last_offset < checked_to]
    if len(below) != len(expected) or (len(below) != len(entries) and not may_grow):
        return False
    return all(t[:3] == x[:3] and t.last_stable_offset <= x.last_stable_offset for t, x in zip(below, expected))


def _insert(entries: list[AbortedTxn], txn: AbortedTxn) -> None:
    """Put ``txn`` in place by marker offset, unless an entry for that marker is there."""
    i = bisect.bisect_left(entries, txn.last_offset, key=lambda t: t.last_offset)
    if i == len(entries) or entries[i].last_offset != txn.last_offset:
        entries.insert(i, txn)


def read_txn_entries(path: str):
    """Parse a ``.txnindex`` file; raises :class:`CorruptIndexError` for bad bytes."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) % TXN_INDEX_ENTRY_BYTES:
        raise CorruptIndexError(f"transaction index size {len(data)} is not a multiple of 34", path=path)
    for pos in range(0, len(data), TXN_INDEX_ENTRY_BYTES):
        version, pid, first, last, lso = TXN_INDEX_ENTRY.unpack_from(data, pos)
        if version > TXN_INDEX_VERSION:
            raise CorruptIndexError(f"transaction index entry at {pos} has unknown version {version}", path=path)
        yield AbortedTxn(pid, first, last, lso)
