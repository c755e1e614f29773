"""``Segment``: one ``.log`` file and its ``.index``, ``.timeindex`` and ``.txnindex``
(docs/format/segment.md).

A segment knows how to append (keeping Kafka's sparse index rule), translate an offset
to a byte position (index floor + forward walk over batch headers), read a slice,
recover (re-validate and re-index), truncate, and become inactive (final time-index
entry, trimmed indexes). Indexes are opened lazily; nothing is mapped until used, and a
lookup that finds an index's entries out of order rebuilds it from the log.
"""

from __future__ import annotations

import errno
import os
import random
from typing import NamedTuple

from pylog.errors import CorruptIndexError, InvalidOffsetError, RecordFormatError, StorageError
from pylog.index import OffsetIndex, TimeIndex, TxnIndex
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import (
    INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, MAGIC_V2, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX, offset_file_prefix, segment_file_name,
)
from pylog.record.batch import decode_batches
from pylog.record.encode import now_ms
from pylog.segment.file import BatchHeader, LogFile, check_offsets_follow
from pylog.stat_watch import fs_clock_ns, settled

#: Leading bytes of a batch that tell whether it is still the same batch: base offset,
#: length, leader epoch, magic and the CRC (which covers the rest; magic 0/1 keep it at 12).
BATCH_IDENTITY_BYTES = 21


class InvalidTail(NamedTuple):
    """Bytes at the end of a segment's ``.log`` that are not valid batches: where they start
    (the end of the last valid batch), how many there are, and what was found there. A
    writable open truncates them; a read-only one stops reading there."""

    path: str
    position: int
    bytes: int
    reason: str

    def message(self, *, truncated: bool) -> str:
        """The line a recovery logs (Kafka logs one too), for a truncation or a read-only stop."""
        found = f"found invalid batch at position {self.position} in {self.path}"
        if truncated:
            return f"{found}, truncating {self.bytes} bytes ({self.reason})"
        return (f"{found} ({self.reason}): reading stops there, leaving {self.bytes} bytes for a writable "
                f"open to truncate (pylog verify --repair does)")


def segment_paths(directory: str, base_offset: int, suffix: str = "") -> dict[str, str]:
    """The four file paths of the segment at ``base_offset`` (with an extra suffix such as .swap)."""
    return {kind: f"{directory}/{segment_file_name(base_offset, kind, suffix)}"
            for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)}


class Segment:
    """A segment of a partition log, named by its base offset.

    ``next_offset`` is one past the last offset it holds (the base offset when empty);
    ``size_bytes`` is the length of its ``.log``; ``max_timestamp`` the largest record
    timestamp seen (-1 if none).
    """

    # State a segment starts with; set per instance on first change. Class-level, so that
    # opening a log of 10,000 segments makes 10,000 small objects quickly.
    _log: LogFile | None = None
    _offset_index: OffsetIndex | None = None
    _time_index: TimeIndex | None = None
    _txn_index: TxnIndex | None = None
    _indexes_checked = False
    _bytes_since_last_index_entry = 0
    _max_ts_and_offset: tuple[int, int] | None = None
    _next_offset: int | None = None
    rolling_based_timestamp: int | None = None
    _created_ms: int | None = None
    open_files = None  # the log's OwnedFiles: told when a file opens and when all close
    _tail: tuple[int, int, bytes] | None = None  # (position, base offset, identity bytes) of the last
    # batch a follower saw: where lookups past it start, and what tells the file unchanged
    _mtime_settled = False  # the mtime a follower last saw was a tick old: any write since changed it

    def __init__(self, directory: str, base_offset: int, *, index_bytes: int, index_interval_bytes: int,
                 writable: bool, io: FileIO = DEFAULT_IO, suffix: str = "", roll_jitter_ms: int = 0,
                 open_files=None):
        self.directory = directory if type(directory) is str else str(directory)
        self.base_offset = base_offset
        self.writable = writable
        self.io = io
        self.suffix = suffix
        self.index_bytes = index_bytes
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        if open_files is not None:
            self.open_files = open_files

    @property
    def created_ms(self) -> int:
        """When the segment was created (its file's mtime if it was opened): what time-based
        rolling measures from when batches carry no timestamp."""
        if self._created_ms is None:
            self._created_ms = _mtime_ms(self.log.path)
        return self._created_ms

    @created_ms.setter
    def created_ms(self, value: int) -> None:
        self._created_ms = value

    # -- files, made on first use (opening a log of many segments touches none of them) ----
    @property
    def _prefix(self) -> str:
        return f"{self.directory}/{offset_file_prefix(self.base_offset)}"

    @property
    def log(self) -> LogFile:
        """The ``.log`` file (opened on first use)."""
        if self._log is None:
            self._log = LogFile(self._prefix + LOG_SUFFIX + self.suffix, writable=self.writable, io=self.io,
                                on_open=self._opened)
        return self._log

    @property
    def offset_index(self) -> OffsetIndex:
        """The ``.index``, checked (and rebuilt if damaged) on first use."""
        self.ensure_indexes()
        return self._raw_offset_index()

    @property
    def time_index(self) -> TimeIndex:
        """The ``.timeindex``, checked (and rebuilt if damaged) on first use."""
        self.ensure_indexes()
        return self._raw_time_index()

    def _raw_offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(self._prefix + INDEX_SUFFIX + self.suffix, self.base_offset,
                                             max_bytes=self.index_bytes, writable=self.writable, io=self.io,
                                             on_map=self._opened)
        return self._offset_index

    def _raw_time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(self._prefix + TIME_INDEX_SUFFIX + self.suffix, self.base_offset,
                                         max_bytes=self.index_bytes, writable=self.writable, io=self.io,
                                         on_map=self._opened)
        return self._time_index

    @property
    def txn_index(self) -> TxnIndex:
        """The ``.txnindex``, untrusted until the log checked it (``TxnIndex.verify``)."""
        if self._txn_index is None:
            self._txn_index = TxnIndex(self._prefix + TXN_INDEX_SUFFIX + self.suffix, self.base_offset,
                                       writable=self.writable, io=self.io)
        return self._txn_index

    @classmethod
    def create(cls, directory: str, base_offset: int, **kwargs) -> "Segment":
        """A new empty segment; files that already exist for this base offset are removed first."""
        io = kwargs.get("io", DEFAULT_IO)
        for path in segment_paths(directory, base_offset, kwargs.get("suffix", "")).values():
            io.remove(path)
        seg = cls(directory, base_offset, writable=True, **kwargs)
        seg._indexes_checked = True
        seg.txn_index.trusted = True
        for path in (seg.log.path, seg.offset_index.path, seg.time_index.path):
            io.close(io.open(path))  # Kafka creates the log and both index files with the segment
        seg._next_offset = base_offset
        seg._max_ts_and_offset = (-1, base_offset)
        seg.created_ms = now_ms()
        return seg

    # -- identity ----------------------------------------------------------------------------
    @property
    def zero_tail_is_end(self) -> bool:
        """Whether a zero-filled tail of the ``.log`` ends its data instead of being
        corruption: set on the last segment of a read-only log (see :class:`LogFile`)."""
        return self.log.zero_tail_is_end

    @zero_tail_is_end.setter
    def zero_tail_is_end(self, value: bool) -> None:
        self.log.zero_tail_is_end = value

    @property
    def log_path(self) -> str:
        """Path of the ``.log`` file."""
        return self.log.path

    @property
    def size_bytes(self) -> int:
        """Bytes in the ``.log`` file."""
        return self.log.size_bytes

    def __repr__(self) -> str:
        return f"Segment(base_offset={self.base_offset}, size_bytes={self.size_bytes})"

    @property
    def is_loaded(self) -> bool:
        """Whether anything was read from the files yet (so sizes or offsets are cached)."""
        return self._log is not None

    # -- lazily known facts ------------------------------------------------------------------
    @property
    def next_offset(self) -> int:
        """One past the last offset held. O(index_interval) on first use (a walk from the
        last index entry), O(1) after."""
        if self._next_offset is None:
            _, position = self._safe_lookup(2**62)
            last = None
            for h in self.log.headers(position):
                last = h
            if last is None and position:
                for h in self.log.headers(0):
                    last = h
            self._next_offset = self.base_offset if last is None else last.last_offset + 1
        return self._next_offset

    def follow(self) -> bool:
        """Read-only segments of a log another process writes: take in the batches
        appended since the last call. Returns False when the file was rewritten under
        this object instead (it shrank, its last batch seen changed, or another file
        took its name, as truncation and compaction do): the caller then opens a new
        Segment. Cost: one ``stat``, one small read, a walk over the new batch headers."""
        try:
            return self._follow()
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ESTALE):
                return False  # deleted or replaced while being looked at
            raise

    def _follow(self) -> bool:
        now_ns = fs_clock_ns()
        st = os.stat(self.log.path)
        log = self.log
        if log.inode not in (None, st.st_ino) or st.st_size < log.size_bytes:
            return False
        unchanged = (st.st_size, st.st_mtime_ns) == (log.measured_bytes, log.mtime_ns)
        if self._tail is None:  # first look: only the size and mtime measured before to compare
            if log.mtime_ns is not None and not unchanged:
                return False  # appended to or rewritten since measured, no telling which
            log.measured(st)
            self._max_ts_and_offset = None
            self._take_tail(self._safe_lookup(2**62)[1])
        elif unchanged and self._mtime_settled:
            return True
        elif self.log.read(self._tail[0], len(self._tail[2])) != self._tail[2]:
            return False  # truncated and written again, maybe to the same size
        elif st.st_size > log.size_bytes:  # grown, or written over a zero-filled tail
            log.measured(st)
            self._max_ts_and_offset = None
            self._take_tail(self._tail[0])
        log.mtime_ns, self._mtime_settled = st.st_mtime_ns, settled(st.st_mtime_ns, now_ns)
        return True

    def _take_tail(self, position: int) -> None:
        """Walk the headers from ``position`` (a batch start) to the end; remember the last."""
        last = None
        for last in self.log.headers(position):
            pass
        if last is None and position:
            for last in self.log.headers(0):
                pass
        self._next_offset = self.base_offset if last is None else last.last_offset + 1
        self._tail = (0, self.base_offset, b"") if last is None else (
            last.position, last.base_offset, self.log.read(last.position, BATCH_IDENTITY_BYTES))

    def _safe_lookup(self, offset: int) -> tuple[int, int]:
        off, pos = self._checked(lambda: self.offset_index.lookup(offset))
        return (off, pos) if 0 <= pos <= self.log.size_bytes else (self.base_offset, 0)

    def _checked(self, lookup):
        """``lookup()`` on the indexes, rebuilt first if they were never checked and again if
        the lookup found entries out of order (an index is never trusted blindly)."""
        self.ensure_indexes()
        try:
            return lookup()
        except CorruptIndexError:
            self.rebuild_indexes()
            return lookup()

    def ensure_indexes(self) -> None:
        """On first use, check both indexes (sanity check, positions inside the file,
        offsets inside the segment) and rebuild them from the log if they are missing or damaged: an index is never
        trusted blindly (entries between the first and last are checked by each lookup that
        reads them). O(log index entries) once; O(segment batches) if it rebuilds."""
        if self._indexes_checked:
            return
        self._indexes_checked = True
        oi, ti = self._raw_offset_index(), self._raw_time_index()
        try:
            oi.sanity_check()
            ti.sanity_check()
            last = oi.last_entry
            bad = last is not None and last[1] >= max(self.log.size_bytes, 1)
            missing = not os.path.exists(oi.path) or not os.path.exists(ti.path)
            if not bad and ti.last_entry is not None:  # no entry may name an offset past the log
                bad = ti.last_entry[1] >= self.next_offset
        except CorruptIndexError:
            bad, missing = True, False
        if bad or (missing and self.log.size_bytes > self.index_interval_bytes):
            self.rebuild_indexes()

    def rebuild_indexes(self) -> None:
        """Recompute both indexes from the batch headers with Kafka's interval rule (no CRC
        checks: that is ``recover``). Writable segments rewrite the files; read-only ones
        keep the entries in memory."""
        offsets, positions, times, time_offsets = [], [], [], []
        max_ts, max_off = -1, self.base_offset
        last_indexed = 0
        for h in self.log.headers(0):
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            if self._index_due(h.position - last_indexed):
                if not offsets or h.last_offset > offsets[-1]:
                    offsets.append(h.last_offset)
                    positions.append(h.position)
                if max_ts >= 0 and (not times or max_ts > times[-1]):
                    times.append(max_ts)
                    time_offsets.append(max_off)
                last_indexed = h.position
        self._indexes_checked = True
        oi, ti = self._raw_offset_index(), self._raw_time_index()
        if self.writable:
            oi.reset()
            ti.reset()
            for off, pos in zip(offsets, positions):
                oi.append(off, pos)
            for ts, off in zip(times, time_offsets):
                ti.maybe_append(ts, off)
        else:
            oi.set_entries([o - self.base_offset for o in offsets], positions)
            ti.set_entries(times, [o - self.base_offset for o in time_offsets])

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest timestamp, last offset of the batch holding it); (-1, base) if none."""
        if self._max_ts_and_offset is None:
            ts, off = -1, self.base_offset
            self.ensure_indexes()
            entry = self.time_index.last_entry
            start = 0
            if entry is not None and entry[0] >= 0:
                ts, off = entry
                start = self._safe_lookup(off)[1]
            for h in self.log.headers(start):
                if h.max_timestamp > ts:
                    ts, off = h.max_timestamp, h.last_offset
            self._max_ts_and_offset = (ts, off)
        return self._max_ts_and_offset

    @property
    def max_timestamp(self) -> int:
        """Largest batch timestamp in the segment; -1 if none."""
        return self.max_timestamp_and_offset[0]

    def largest_timestamp(self) -> int:
        """The max timestamp, or the file's mtime when no batch carries one (as Kafka)."""
        ts = self.max_timestamp
        return ts if ts >= 0 else _mtime_ms(self.log.path)

    def first_batch_timestamp(self) -> int | None:
        """Max timestamp of the first batch: what time-based rolling measures from."""
        if self.rolling_based_timestamp is None:
            for h in self.log.headers(0):
                self.rolling_based_timestamp = h.max_timestamp
                break
        return self.rolling_based_timestamp

    # -- writes -------------------------------------------------------------------------------
    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int, data) -> int:
        """Append ``data`` (whole batches ending at ``largest_offset``); returns its position.

        Adds an index entry (largest offset of the append -> its start position) when more
        than ``index_interval_bytes`` were written since the last one, as Kafka does.
        All or nothing: when a write fails (disk full, I/O error) the ``.log`` is cut back,
        no index entry stays and :class:`StorageError` is raised, so the segment is as
        before. Not durable until :meth:`flush`.
        """
        relative = largest_offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidOffsetError(
                f"offset {largest_offset} does not fit as a relative offset of segment {self.base_offset}")
        max_ts_and_offset = self.max_timestamp_and_offset
        if largest_timestamp > max_ts_and_offset[0]:
            max_ts_and_offset = (largest_timestamp, offset_of_max_timestamp)
        position = self.log.append(data)  # cuts itself back when its write fails
        if self._index_due(self._bytes_since_last_index_entry):
            try:
                self.offset_index.append(largest_offset, position)
                self.time_index.maybe_append(*max_ts_and_offset)
            except StorageError:
                self.offset_index.truncate_to(largest_offset)
                self.log.truncate_to(position)
                raise
            self._bytes_since_last_index_entry = 0
        if position == 0:
            self.rolling_based_timestamp = largest_timestamp
        self._max_ts_and_offset = max_ts_and_offset
        self._bytes_since_last_index_entry += len(data)
        self._next_offset = largest_offset + 1
        return position

    def _index_due(self, bytes_since_last_entry: int) -> bool:
        """Kafka's index-interval rule, for appends, rebuilds and recovery alike: a batch gets
        index entries when more than ``index_interval_bytes`` lie between the last entry and it."""
        return bytes_since_last_entry > self.index_interval_bytes

    def should_roll(self, *, append_bytes: int, max_timestamp_in_append: int, last_offset: int,
                    segment_bytes: int, max_segment_ms: int, now_ms: int) -> bool:
        """Kafka's roll rule: size, time since the first batch (minus jitter), full indexes,
        relative-offset overflow."""
        size_bytes = self.log.size_bytes
        if size_bytes > segment_bytes - append_bytes:
            return True
        if size_bytes > 0:
            first_ts = self.first_batch_timestamp()
            waited = (max_timestamp_in_append - first_ts if first_ts is not None and first_ts >= 0
                      else now_ms - self.created_ms)
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        if self.offset_index.is_full() or self.time_index.is_full():
            return True
        return not 0 <= last_offset - self.base_offset <= INT32_MAX

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (the whole batch holding
        ``offset`` goes). Returns bytes removed. Not durable until :meth:`flush`."""
        header = self.translate_offset(offset)
        if header is None:
            return 0
        removed = self.log.size_bytes - header.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.log.truncate_to(header.position)
        self._after_truncate()
        return removed

    def _after_truncate(self) -> None:
        self._next_offset = None
        self._max_ts_and_offset = None
        self.rolling_based_timestamp = None
        _, pos = self._safe_lookup(2**62)
        self._bytes_since_last_index_entry = self.log.size_bytes - pos
        if self.log.size_bytes == 0:
            self.created_ms = now_ms()

    def on_become_inactive(self) -> None:
        """On roll: final time-index entry (the segment's max), trimmed index files."""
        ts, off = self.max_timestamp_and_offset
        if ts >= 0:
            self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        """fsync the ``.log``, ``.index``, ``.timeindex`` and ``.txnindex``."""
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def _opened(self) -> None:
        if self.open_files is not None:
            self.open_files.touch(self)

    def release_files(self) -> None:
        """Give back the ``.log`` descriptor and the index maps, keeping everything known in
        memory; the files reopen on next use. Called by the log's bound on open files (with
        the log's lock held, so never under a write)."""
        if self._log is not None:
            self._log.release()
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.release()

    def close(self) -> None:
        """Release maps and fds; they reopen on next use (the final time-index entry and
        trims happen on roll and on the log's close)."""
        for part in (self._offset_index, self._time_index, self._txn_index):
            if part is not None:
                part.close()
        if self._log is not None:
            self._log.release()
        if self.open_files is not None:
            self.open_files.forget(self)

    # -- recovery -------------------------------------------------------------------------------
    def recover(self, on_batch=None) -> "InvalidTail | None":
        """Re-validate every batch (CRC, sizes, offsets) and rebuild the offset and time
        indexes.

        Stops at the first invalid or incomplete batch and truncates the file there;
        ``on_batch(batch)`` sees each valid batch (producer state replay). Returns what was
        truncated (None when nothing was). O(segment bytes): reads the whole file once. The
        ``.txnindex`` is left as it is: rebuilding it needs the producer state before the
        segment, so the log replaces it after its replay (and trusts no old one meanwhile).
        """
        self._indexes_checked = True
        self.offset_index.reset()
        self.time_index.reset()
        self._max_ts_and_offset = (-1, self.base_offset)
        last_index_position = 0

        def index(batch) -> None:
            nonlocal last_index_position
            if batch.max_timestamp > self._max_ts_and_offset[0]:
                self._max_ts_and_offset = (batch.max_timestamp, batch.last_offset)
            if self._index_due(batch.position - last_index_position):
                self.offset_index.append(batch.last_offset, batch.position)
                self.time_index.maybe_append(*self._max_ts_and_offset)
                last_index_position = batch.position
            if on_batch is not None:
                on_batch(batch)
        valid_bytes, next_offset, invalid = self._walk_valid(0, self.base_offset, index)
        if invalid is not None:
            self.log.truncate_to(valid_bytes)
        self._bytes_since_last_index_entry = valid_bytes - last_index_position
        self._next_offset = next_offset
        self.rolling_based_timestamp = None
        return invalid

    def check_tail(self) -> "InvalidTail | None":
        """Validate the batches from the last index entry to the end of the file (CRC,
        sizes, offsets), as a clean-shutdown marker says they are: an invalid tail (a torn
        or damaged last batch, bytes that are no batch) is returned, for the caller to
        recover (a writer) or to stop before (a reader). A damaged batch with whole batches
        after it is corruption, not a tail: None, and reads report it. Changes nothing.
        O(index_interval_bytes + the batches after the last entry)."""
        try:
            position = self._safe_lookup(2**62)[1]
        except RecordFormatError as e:  # the index rebuild met a size that cannot be right
            return InvalidTail(self.log.path, e.position or 0, self.log.size_bytes - (e.position or 0), e.reason)
        invalid = self._walk_valid(position, self.base_offset, lambda batch: None)[2]
        return None if invalid is None or self._valid_batch_after(invalid.position) else invalid

    def _valid_batch_after(self, position: int) -> bool:
        """Whether a valid batch follows the entry at ``position`` (as its size field says)."""
        entry_bytes = self.log.entry_bytes_at(position)
        if entry_bytes is None or entry_bytes <= 0:
            return False
        try:
            following = next(self.log.batches(position + entry_bytes), None)
        except RecordFormatError:
            return False
        return following is not None and following.is_valid()

    def stop_at(self, position: int) -> None:
        """Read-only: end the segment's data at ``position``, a batch boundary before bytes
        that do not validate (:meth:`check_tail`); the file is not changed."""
        self.log.stop_at(position)
        self._after_truncate()

    def _walk_valid(self, position: int, expected_next: int, visit) -> tuple[int, int, "InvalidTail | None"]:
        """Walk whole batches from ``position`` (a batch start), calling ``visit(batch)`` on
        each valid one, until the first one that is not or the end of the file. Returns
        (end of the valid batches, offset after them, what follows them if it is not valid)."""
        valid_bytes = position
        try:
            for batch in self.log.batches(position):
                problem = self._batch_problem(batch, expected_next)
                if problem is not None:
                    break
                visit(batch)
                expected_next, valid_bytes = batch.last_offset + 1, batch.position + batch.size
            else:
                problem = "an incomplete batch (a torn write)"
        except RecordFormatError as e:
            problem = e.reason
        invalid_bytes = self.log.size_bytes - valid_bytes
        tail = InvalidTail(self.log.path, valid_bytes, invalid_bytes, problem) if invalid_bytes else None
        return valid_bytes, expected_next, tail

    def _batch_problem(self, batch, expected_next: int) -> str | None:
        """Why ``batch``, walked after offsets below ``expected_next``, cannot be kept; None if it can."""
        if not batch.is_valid():
            return "a batch whose CRC does not match its bytes"
        v2 = batch.magic == MAGIC_V2
        if batch.last_offset < expected_next or (v2 and batch.base_offset < expected_next):
            return f"a batch at offsets below {expected_next}, which earlier batches hold"
        if batch.last_offset - self.base_offset > INT32_MAX or (v2 and batch.record_count < 0):
            return "a batch whose offsets or record count cannot be right"
        return None

    # -- reads ----------------------------------------------------------------------------------
    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset`` (index floor, then a forward
        walk over headers). O(log entries + index_interval); a follower's lookups past the
        last batch it saw start there, not at an index it loaded long before. Raises
        :class:`CorruptRecordError` for a walked batch whose offsets do not follow the
        previous one's or lie below the segment's base offset."""
        _, position = self._safe_lookup(offset)
        previous_last = self.base_offset - 1
        tail = self._tail
        # a v2 batch's base offset is its first offset: a reader at its tail starts there too
        if tail is not None and tail[0] > position and (
                offset > tail[1] or offset == tail[1] and tail[2][16:17] == b"\x02"):
            position, previous_last = tail[0], tail[1] - 1
        for h in self.log.headers(max(position, start_position)):
            previous_last = check_offsets_follow(h, previous_last, path=self.log.path)
            if h.last_offset >= offset:
                return h
        return None

    def find_position(self, offset: int) -> int | None:
        """Byte position of the batch holding ``offset`` (or the next one), None if past the end."""
        h = self.translate_offset(offset)
        return None if h is None else h.position

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """Earliest (offset, timestamp) at or after ``starting_offset`` with timestamp >= ``timestamp``."""
        _, ts_offset = self._checked(lambda: self.time_index.lookup(timestamp))
        _, position = self._safe_lookup(max(ts_offset, starting_offset))
        for h in self.log.headers(position):
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                batch = next(decode_batches(self.log.read(h.position, h.size), position_base=h.position,
                                            path=self.log.path))
                for r in batch.records():
                    if r.timestamp >= timestamp and r.offset >= starting_offset:
                        return r.offset, r.timestamp
        return None

    def read_slice(self, position: int, size: int) -> bytes:
        """The bytes ``[position, position + size)`` of the ``.log`` (a copy)."""
        return self.log.read(position, size)

    def headers(self, start: int = 0, end: int | None = None):
        """Walk batch headers (see :meth:`LogFile.headers`)."""
        return self.log.headers(start, end)

    def batches(self, start: int = 0, end: int | None = None):
        """Walk whole batches, chunked (see :meth:`LogFile.batches`)."""
        return self.log.batches(start, end)

    # -- files ------------------------------------------------------------------------------------
    def paths(self) -> list[str]:
        """Every file of this segment that exists."""
        return [p for p in segment_paths(self.directory, self.base_offset, self.suffix).values()
                if os.path.exists(p)]

    def change_suffix(self, new_suffix: str) -> None:
        """Rename every file from the current suffix (e.g. ``.cleaned``) to ``new_suffix``."""
        self.close()
        old = segment_paths(self.directory, self.base_offset, self.suffix)
        new = segment_paths(self.directory, self.base_offset, new_suffix)
        for ext, path in old.items():
            if os.path.exists(path):
                self.io.rename(path, new[ext])
        self.suffix = new_suffix
        for attr, ext in (("_log", LOG_SUFFIX), ("_offset_index", INDEX_SUFFIX),
                          ("_time_index", TIME_INDEX_SUFFIX), ("_txn_index", TXN_INDEX_SUFFIX)):
            part = getattr(self, attr)
            if part is not None:
                part.path = new[ext]

    def delete_files(self) -> None:
        """Remove every file of the segment now."""
        self.close()
        for path in segment_paths(self.directory, self.base_offset, self.suffix).values():
            self.io.remove(path)


def _mtime_ms(path: str) -> int:
    try:
        return int(os.stat(path).st_mtime * 1000)
    except OSError:
        return now_ms()


def roll_jitter_ms(segment_jitter_ms: int, segment_ms: int) -> int:
    """Kafka's per-segment jitter: random in [0, min(jitter, segment_ms)) when jitter > 0."""
    bound = min(segment_jitter_ms, segment_ms)
    return random.randrange(bound) if bound > 0 else 0

