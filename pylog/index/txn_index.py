"""``TxnIndex``: the ``.txnindex`` file, one 34-byte entry per aborted transaction whose
ABORT marker lies in the segment (docs/format/txnindex.md).

Entry: version (int16, 0), producer id, first offset, last offset (the marker's), last
stable offset when the abort was written; all big-endian int64. A plain append-only file
(not mapped), created only when the first entry is written.

A read-only index follows its file: when the file's size changed since it was read
(another process appends), it is read again. Entries a read-only log learns from its
own replay are kept in memory beside the file's, one per ABORT marker.
"""

from __future__ import annotations

import bisect
import os
from typing import NamedTuple

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError
from pylog.io import fsync_path
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

    def __init__(self, path, base_offset: int, *, writable: bool = True):
        self.path = os.fspath(path)
        self.base_offset = base_offset
        self.writable = writable
        self._entries: list[AbortedTxn] | None = None
        self._file_bytes = 0  # size of the file when read
        self._in_memory: list[AbortedTxn] = []

    def _load(self) -> list[AbortedTxn]:
        """The entries, ordered by marker offset. Read-only: one ``stat`` per call, and a
        re-read of the file (O(entries)) when its size changed."""
        size = self._file_bytes if self.writable and self._entries is not None else self._file_size()
        if self._entries is None or size != self._file_bytes:
            self._file_bytes = size
            entries = list(read_txn_entries(self.path)) if self._file_bytes else []
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
        """Add an entry; its last offset must be above the previous one's. Durable after ``flush()``."""
        if not self.writable:
            raise ReadOnlyError(f"transaction index {self.path} is read-only")
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise InvalidOffsetError(f"aborted transaction ending at {txn.last_offset} is not after the last "
                                     f"one ({entries[-1].last_offset}) in {self.path}")
        with open(self.path, "ab") as f:
            f.write(txn.pack())
        entries.append(txn)

    def add_in_memory(self, txn: AbortedTxn) -> None:
        """Record an entry without writing it (a read-only log's replay found its ABORT
        marker); the file's entry for the same marker, if any, wins. O(log entries)."""
        self._in_memory.append(txn)
        _insert(self._load(), txn)

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
        """Remove entries whose marker is at or after ``offset``."""
        entries = self._load()
        self._in_memory = [t for t in self._in_memory if t.last_offset < offset]
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) != len(entries):
            self._entries = keep
            if self.writable and os.path.exists(self.path):
                with open(self.path, "r+b") as f:
                    f.truncate(len(keep) * TXN_INDEX_ENTRY_BYTES)

    def reset(self) -> None:
        self._entries = []
        self._in_memory = []
        if self.writable and os.path.exists(self.path):
            with open(self.path, "r+b") as f:
                f.truncate(0)

    def sanity_check(self) -> None:
        """Raise :class:`CorruptIndexError` for a bad size, version or an entry below the base offset."""
        for txn in self._load():
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(f"aborted transaction ending at {txn.last_offset} is below the base "
                                        f"offset {self.base_offset}", path=self.path)

    def flush(self) -> None:
        if self.writable:
            fsync_path(self.path)

    def close(self) -> None:
        self._entries = None

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self._entries = None
        self._in_memory = []
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


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
