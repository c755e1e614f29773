"""``LogFile``: one ``.log`` file, a plain concatenation of batches (docs/format/segment.md).

Appends go through the I/O seam at the logical end; reads use ``os.pread`` so a
concurrent truncation can never crash a reader (no mmap of ``.log`` files). The fd is
held by a ``_Handle`` whose lifetime is its references: a fetch that still holds the
handle keeps reading a segment that was deleted meanwhile.
"""

from __future__ import annotations

import errno
import os
from typing import Iterator, NamedTuple

from pylog.errors import CorruptRecordError, IncompleteBatchError, InvalidArgumentError, StorageError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import (
    BATCH_HEADER_BYTES, INT32, INT32_MAX, INT64, LAST_OFFSET_DELTA_AT, LEGACY_RECORD_OVERHEAD_V0, LOG_OVERHEAD,
    LOG_OVERHEAD_BYTES, MAGIC_POSITION, MAGIC_V0, MAGIC_V1, MAGIC_V2, MAX_TIMESTAMP_AT,
)
from pylog.record.batch import decode_batches

_unpack_overhead = LOG_OVERHEAD.unpack_from
_unpack_i32 = INT32.unpack_from
_unpack_i64 = INT64.unpack_from

#: Bytes read at a time when walking batch headers.
SCAN_CHUNK_BYTES = 64 * 1024
#: The first read of a header walk: a lookup starts at an index entry, which lies at most
#: ``index.interval.bytes`` (default 4 KiB) before the batch sought, so a walk of large
#: batches (a follower fetching at the log end) reads their headers, not 64 KiB of records.
FIRST_SCAN_BYTES = 8 * 1024
#: Bytes read at a time when walking whole batches (recovery, checks, compaction, replay).
WALK_CHUNK_BYTES = 4 * 1024 * 1024
#: A batch larger than this is taken for a damaged size field: a walk of whole batches ends there.
MAX_WALKED_BATCH_BYTES = 256 * 1024 * 1024
#: Largest file Kafka allows for one segment.
MAX_FILE_BYTES = INT32_MAX


class BatchHeader(NamedTuple):
    """What a walk over batch headers learns of one batch, without reading its records."""

    position: int
    size: int
    base_offset: int  # for a legacy wrapper: its (last) offset, the inner base is not read
    last_offset: int
    magic: int
    max_timestamp: int


def check_offsets_follow(batch, previous_last: int, *, end_offset: int | None = None,
                         path: str | None = None) -> int:
    """Raise :class:`CorruptRecordError` unless ``batch`` (a header or a batch, walked in
    file order) holds offsets after ``previous_last`` and below ``end_offset`` (the
    segment's range, where known), its last offset not below its first. The base offset
    lies outside the CRC, so a flipped bit there shows only here. Returns its last offset."""
    first = batch.base_offset if batch.magic == MAGIC_V2 else batch.last_offset
    if first <= previous_last or batch.last_offset < first or \
            (end_offset is not None and batch.last_offset >= end_offset):
        expected = f"after {previous_last}" + ("" if end_offset is None else f" and below {end_offset}")
        raise CorruptRecordError(f"batch holds offsets {first}..{batch.last_offset}, expected {expected}",
                                 position=batch.position, path=path)
    return batch.last_offset


def pread_fully(fd: int, position: int, size: int) -> bytes:
    """Up to ``size`` bytes of ``fd`` at ``position``, looping over short reads (fewer only at EOF)."""
    parts = []
    while size > 0:
        chunk = os.pread(fd, size, position)
        if not chunk:
            break
        parts.append(chunk)
        position += len(chunk)
        size -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _Handle:
    """An open fd, closed when the last reference goes (a fetch may outlive its segment)."""

    __slots__ = ("fd", "io")

    def __init__(self, fd: int, io: FileIO):
        self.fd = fd
        self.io = io

    def close(self) -> None:
        if self.fd >= 0:
            self.io.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close()


class LogFile:
    """A ``.log`` file. ``size_bytes`` is its logical size (what readers may see).

    ``inode`` is the file's identity as first measured or opened: a read-only file
    refuses to open another file that took its name since (compaction and truncation
    replace segment files), so sizes and indexes never get mixed with other bytes.
    ``mtime_ns`` is its modification time when the size was measured, ``measured_bytes``
    the size measured then (a zero-filled tail may make the logical size smaller).

    ``zero_tail_is_end`` is set on the last segment of a read-only log: there a tail of
    zero bytes from a batch boundary to the end of the file (what a crash can leave
    where the file grew before its data reached the disk) ends the data, as a writer's
    recovery would cut it; the file is not changed. Anywhere else such bytes are
    corruption.
    """

    zero_tail_is_end = False
    _valid_end: int | None = None  # where stop_at ended the data

    def __init__(self, path: str, *, writable: bool, io: FileIO = DEFAULT_IO, on_open=None):
        self.path = str(path)
        self.writable = writable
        self.io = io
        self.on_open = on_open  # called after each open of the file (what bounds open files counts)
        self._handle: _Handle | None = None
        self._size: int | None = None
        self.inode: int | None = None
        self.mtime_ns: int | None = None
        self.measured_bytes: int | None = None

    @property
    def size_bytes(self) -> int:
        """Logical size: what readers may see (the file's size until this process writes)."""
        if self._size is None:
            try:
                st = os.stat(self.path)
                size, self.mtime_ns = st.st_size, st.st_mtime_ns
                self.inode = st.st_ino if self.inode is None else self.inode
            except FileNotFoundError:
                size = 0
            if size > MAX_FILE_BYTES:
                raise CorruptRecordError(f"segment file is {size} bytes, past the 2 GiB limit", path=self.path)
            self._size = self.measured_bytes = size
        return self._size

    @size_bytes.setter
    def size_bytes(self, value: int) -> None:
        self._size = value

    def measured(self, st: os.stat_result) -> None:
        """Take ``st``, a fresh ``stat`` of this file, as its size (a follower saw it grow),
        unless it is unchanged since :meth:`stop_at` cut its data short."""
        self.inode = st.st_ino if self.inode is None else self.inode
        if self._valid_end is not None and (st.st_size, st.st_mtime_ns) == (self.measured_bytes, self.mtime_ns):
            self._size = self._valid_end
            return
        self._valid_end = None
        self._size = self.measured_bytes = st.st_size

    def stop_at(self, position: int) -> None:
        """Read-only: end the data at ``position`` (the bytes after it do not validate) while
        the file stays as measured; once a writer changed it, its size counts again."""
        _ = self.size_bytes  # measure the file first
        self._size = self._valid_end = position

    # -- handles -------------------------------------------------------------------
    def _open(self) -> _Handle:
        h = self._handle
        if h is None or h.fd < 0:
            if self.writable:
                fd = self.io.open(self.path)
            else:
                fd = self._open_read_only()
            h = self._handle = _Handle(fd, self.io)
            if self.on_open is not None:
                self.on_open()
        return h

    def _open_read_only(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise StorageError(e.errno, f"cannot open {self.path}: {e.strerror}") from None
        inode = os.fstat(fd).st_ino
        if self.inode is not None and inode != self.inode:
            os.close(fd)
            raise StorageError(errno.ESTALE, f"{self.path} was replaced by another file since it was read")
        self.inode = inode
        return fd

    def handle(self) -> _Handle:
        """The open handle (opened on first use)."""
        return self._open()

    def release(self) -> None:
        """Drop this file's reference to its fd (fetches holding it keep it open)."""
        self._handle = None

    @property
    def is_open(self) -> bool:
        handle = self._handle
        return handle is not None and handle.fd >= 0

    # -- writes ----------------------------------------------------------------------
    def append(self, data) -> int:
        """Write ``data`` at the logical end; returns the position it starts at.

        Not durable until :meth:`flush`. On a failed write the file is cut back to its
        previous size, so no partial batch stays behind, and :class:`StorageError` is raised.
        """
        position = self.size_bytes
        if position + len(data) > MAX_FILE_BYTES:
            raise StorageError(27, f"append would grow {self.path} past 2 GiB")
        handle = self._open()  # held to the end (see read)
        fd = handle.fd
        try:
            self.io.pwrite(fd, data, position)
        except StorageError:
            try:
                self.io.truncate(fd, position)
            except StorageError:
                pass
            raise
        self.size_bytes = position + len(data)
        return position

    def truncate_to(self, size: int) -> None:
        """Cut the file to ``size`` bytes (only if it is larger). Durable after :meth:`flush`."""
        if not 0 <= size <= self.size_bytes:
            raise InvalidArgumentError(f"cannot truncate {self.path} to {size} bytes: its size is {self.size_bytes}")
        handle = self._open()  # held to the end (see read)
        fd = handle.fd
        if os.fstat(fd).st_size > size:
            self.io.truncate(fd, size)
        self.size_bytes = size

    def flush(self) -> None:
        """fsync the file (data and metadata)."""
        handle = self._handle  # one look: a release in another thread may drop it meanwhile
        if handle is not None and handle.fd >= 0 and self.writable:
            self.io.fsync(handle.fd)

    # -- reads ---------------------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer at the end). O(size), one syscall or more."""
        handle = self._open()  # held to the end: a release in another thread must not close its fd
        return pread_fully(handle.fd, position, size)

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Walk the batch headers in ``[start, end)``; a torn final batch ends the walk.

        Reads ``FIRST_SCAN_BYTES``, then ``SCAN_CHUNK_BYTES`` at a time, and skips over batch
        bodies, so the cost is O(batches) syscalls at worst and O(bytes / 64 KiB) for small batches. Raises
        :class:`CorruptRecordError` for a size field that cannot be right, unless it
        starts a zero-filled tail that ends the data (``zero_tail_is_end``).
        """
        end = self.size_bytes if end is None else min(end, self.size_bytes)
        pos = start
        buf = b""
        buf_at = start
        chunk_bytes = FIRST_SCAN_BYTES
        while pos + LOG_OVERHEAD_BYTES + 5 <= end:
            rel = pos - buf_at
            if rel < 0 or (len(buf) - rel < BATCH_HEADER_BYTES and buf_at + len(buf) < end):
                buf = self.read(pos, min(chunk_bytes, end - pos))
                chunk_bytes = SCAN_CHUNK_BYTES
                buf_at, rel = pos, 0
            if len(buf) - rel < LOG_OVERHEAD_BYTES + 5:
                return
            base_offset, length = _unpack_overhead(buf, rel)
            if length < LEGACY_RECORD_OVERHEAD_V0:
                if self._ends_at_zero_tail(pos):
                    return
                raise CorruptRecordError(f"record size {length} is below the minimum record overhead",
                                         position=pos, path=self.path)
            size = length + LOG_OVERHEAD_BYTES
            if pos + size > end:
                return
            magic = buf[rel + MAGIC_POSITION]
            if magic == MAGIC_V2:
                if size < BATCH_HEADER_BYTES:
                    raise CorruptRecordError(f"record batch size {size} is below the 61-byte header",
                                             position=pos, path=self.path)
                last = base_offset + _unpack_i32(buf, rel + LAST_OFFSET_DELTA_AT)[0]
                max_ts = _unpack_i64(buf, rel + MAX_TIMESTAMP_AT)[0]
            elif magic == MAGIC_V1:
                last, max_ts = base_offset, _unpack_i64(buf, rel + 18)[0]
            elif magic == MAGIC_V0:
                last, max_ts = base_offset, -1
            else:
                raise CorruptRecordError(f"unknown record magic {magic}", position=pos, path=self.path)
            yield BatchHeader(pos, size, base_offset, last, magic, max_ts)
            pos += size
        if end == self.size_bytes:
            self._ends_at_zero_tail(pos)

    def _ends_at_zero_tail(self, position: int) -> bool:
        """With ``zero_tail_is_end``: if every byte from ``position`` (a batch boundary) to
        the end of the file is zero, make ``position`` the logical end and return True.
        Reads the tail, O(tail bytes); changes nothing on disk."""
        if not self.zero_tail_is_end or self.writable or position >= self.size_bytes:
            return False
        pos, end = position, self.size_bytes
        while pos < end:
            chunk = self.read(pos, min(SCAN_CHUNK_BYTES, end - pos))
            if not chunk or chunk.count(0) != len(chunk):
                return False
            pos += len(chunk)
        self._size = position
        return True

    def batches(self, start: int = 0, end: int | None = None, *, chunk_bytes: int | None = None):
        """Walk the whole batches in ``[start, end)`` (``RecordBatch``, or ``LegacyBatch`` for
        magic 0/1), reading ``chunk_bytes`` (default ``WALK_CHUNK_BYTES``) at a time; a batch
        larger than a chunk is read alone. The one walker of a file's batches: recovery, the
        checker, compaction and producer-state replay all use it, so memory stays bounded by
        one chunk (or one batch) whatever the file's size. A torn final batch ends the walk;
        a size or magic that cannot be right raises :class:`CorruptRecordError` naming the
        position. Cost: O(bytes walked), each read once."""
        chunk_bytes = chunk_bytes or WALK_CHUNK_BYTES
        end = self.size_bytes if end is None else min(end, self.size_bytes)
        position = start
        while position < end:
            chunk = self.read(position, min(chunk_bytes, end - position))
            consumed = 0
            try:
                for batch in decode_batches(chunk, position_base=position, path=self.path):
                    consumed = batch.position - position + batch.size
                    yield batch
            except IncompleteBatchError as e:
                consumed = e.valid_bytes
            if consumed == 0:  # a batch larger than the chunk, or a torn tail
                consumed = self.entry_bytes_at(position)
                if consumed is None or position + consumed > end or consumed > MAX_WALKED_BATCH_BYTES:
                    return
                yield from decode_batches(self.read(position, consumed), position_base=position, path=self.path)
            position += consumed

    def entry_bytes_at(self, position: int) -> int | None:
        """Size of the batch at ``position`` from its prefix; None when the file ends in it."""
        head = self.read(position, LOG_OVERHEAD_BYTES)
        if len(head) < LOG_OVERHEAD_BYTES:
            return None
        return _unpack_overhead(head, 0)[1] + LOG_OVERHEAD_BYTES
