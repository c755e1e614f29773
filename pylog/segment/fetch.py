"""``FetchData``: the answer to ``Log.read``, a byte range of one segment file.

The bytes are not copied until asked for: ``transfer_to`` sends them with
``os.sendfile`` (zero copy), ``raw()`` reads them, ``batches()``/``records()`` decode
them. The fetch holds its own reference to the file, so it stays readable even if
retention deletes the segment meanwhile.
"""

from __future__ import annotations

import os


from pylog.layout import ENTRY_PREFIX_BYTES, LOG_OVERHEAD_BYTES
from pylog.platform import require_posix
from pylog.record import crc
from pylog.record.batch import decode_batches
from pylog.segment.file import _Handle, check_offsets_follow, pread_fully


#: Bytes read at a time by :meth:`FetchData.data_batch_chunks`: a read and its decode stay
#: in the processor's cache (a second-level cache holds 512 KiB to 2 MiB).
READ_CHUNK_BYTES = 128 * 1024


class NextRead:
    """Where the read after a fetch begins, filled in by the fetch when it learns it (its
    ``next_offset`` asked for, or its records iterated to the end): the ``offset`` and the
    byte ``position`` of the batch there; both None until then, and left None when no batch
    was whole or the fetch's bound cut one."""

    __slots__ = ("offset", "position")

    def __init__(self):
        self.offset = self.position = None


class FetchData:
    """A fetched slice: ``size_bytes`` bytes at ``position`` of a segment file.

    ``first_offset`` is the offset asked for; batches are whole Kafka batches, so the
    first may hold records below it (``records()`` leaves those out, as Kafka clients
    do). ``next_offset`` is where the following read should start.
    """

    __slots__ = ("first_offset", "size_bytes", "_handle", "_position", "_path", "_bound",
                 "aborted_transactions", "isolation", "_raw", "_next_offset", "high_watermark",
                 "log_start_offset", "last_stable_offset", "_offset_range", "topic", "partition", "_batches",
                 "_next_read")

    def __init__(self, first_offset: int, *, handle: _Handle | None = None, position: int = 0,
                 size_bytes: int = 0, path: str | None = None, bound: int | None = None,
                 isolation: str = "uncommitted", aborted_transactions=None,
                 offset_range: tuple[int, int | None] = (0, None), next_read: NextRead | None = None):
        self.first_offset = first_offset
        self._offset_range = offset_range  # the segment's [base offset, next segment's base)
        self.size_bytes = size_bytes
        self._handle = handle
        self._position = position
        self._path = path
        self._bound = bound
        self.isolation = isolation
        self.aborted_transactions = aborted_transactions
        self._raw = None if size_bytes else b""
        self._next_offset = None if size_bytes else first_offset
        self._next_read = next_read  # told where the next read begins, once that is known
        self.high_watermark = self.log_start_offset = self.last_stable_offset = None
        self.topic = self.partition = None  # the log's, stamped by Log.read on its records
        self._batches = None  # decoded once, by the first call of batches()

    @classmethod
    def of_bytes(cls, first_offset: int, raw: bytes, *, position: int, path: str, bound: int | None,
                 isolation: str, aborted_transactions=None,
                 offset_range: tuple[int, int | None] = (0, None)) -> "FetchData":
        """A fetch whose bytes were already read (a segment in object storage): ``raw`` is
        the slice at ``position`` of the object at ``path``."""
        fetch = cls(first_offset, position=position, size_bytes=len(raw), path=path, bound=bound,
                    isolation=isolation, aborted_transactions=aborted_transactions, offset_range=offset_range)
        fetch._raw = bytes(raw)
        return fetch

    @property
    def position(self) -> int:
        """Byte position of the slice in its segment file."""
        return self._position

    @property
    def path(self) -> str | None:
        """The ``.log`` file the bytes come from; None for an empty fetch."""
        return self._path

    def raw(self) -> bytes:
        """The fetched bytes (read once, then cached). O(size_bytes)."""
        if self._raw is None:
            self._raw = pread_fully(self._handle.fd, self._position, self.size_bytes)
        return self._raw

    def batches(self) -> list:
        """The whole batches of the slice (a batch cut by ``max_bytes`` is left out),
        control batches included. Headers only: O(batches). Raises
        :class:`CorruptRecordError` for a batch whose offsets do not follow the previous
        one's or leave the segment's range. Decoded on the first call, a copy of that list
        after."""
        if self._batches is None:
            out = list(decode_batches(self.raw(), position_base=self._position, allow_incomplete=True,
                                      path=self._path))
            previous_last, end_offset = self._offset_range[0] - 1, self._offset_range[1]
            for b in out:
                previous_last = check_offsets_follow(b, previous_last, end_offset=end_offset, path=self._path)
            self._batches = out
        return list(self._batches)

    @property
    def next_offset(self) -> int:
        """Offset after the last whole batch, or ``first_offset`` if none fits."""
        if self._next_offset is None:
            nxt, end = self.first_offset, None
            for b in self.batches():
                if b.next_offset > nxt:
                    nxt, end = b.next_offset, b.position + b.size
            self._found_next(nxt, end)
        return self._next_offset

    def _found_next(self, nxt: int, end_position: int | None) -> None:
        """Set :attr:`next_offset` from the batches' end (``nxt``, the last whole batch ending
        at ``end_position``), cut at the bound, and tell ``next_read``."""
        cut = self._bound is not None and nxt > self._bound
        self._next_offset = max(self._bound, self.first_offset) if cut else nxt
        if self._next_read is not None and not cut and end_position is not None:
            self._next_read.position = end_position  # first: the offset is what a reader matches
            self._next_read.offset = nxt

    def records(self, record_type=None) -> list:
        """Data records from ``first_offset`` on (control records and, for
        ``isolation="committed"``, aborted records left out), each with its place: ``topic``
        and ``partition`` of the fetch, ``timestamp_type`` of its batch. ``record_type``: a
        function of a batch giving the class of its records (a consumer's, of the batch's
        leader epoch), built as they are decoded; by default :class:`~pylog.record.Record`.
        Checks every batch's CRC. O(records + bytes)."""
        out = []
        for records in self.record_lists(record_type):
            out += records
        return out

    def record_lists(self, record_type=None):
        """The records of :meth:`records`, one list a batch, each decoded (one C call when
        the speedups are built) and its CRC checked as the iteration reaches it: a loop over
        the records of a large fetch keeps one batch of records alive at a time, in the
        processor's cache, instead of the fetch's. A list may be empty (a batch whose records
        compaction removed). O(records + bytes) in all."""
        lo, hi = self.first_offset, self._bound
        place = (self.topic, self.partition)
        aborted = _AbortFilter(self.aborted_transactions) if self.isolation == "committed" else None
        for b in self.batches():
            if b.next_offset <= lo:
                continue
            if hi is not None and b.base_offset >= hi:
                break
            if aborted is not None and aborted.skip(b):
                continue
            if b.is_control:
                b.ensure_valid(self._path)
                continue
            cls = None if record_type is None else record_type(b)
            if b.base_offset < lo or (hi is not None and b.last_offset >= hi):  # the range cuts the batch
                yield [r for r in b.records(path=self._path, place=place, record_type=cls)
                       if r.offset >= lo and (hi is None or r.offset < hi)]
            else:  # no reference kept here: the list goes as soon as the caller is done with it
                yield b.records(path=self._path, place=place, record_type=cls)
        # the batches are decoded: next_offset costs nothing now, and tells the next read where it begins
        self.next_offset  # noqa: B018

    def data_batch_chunks(self, chunk_bytes: int = READ_CHUNK_BYTES, *, buffer: bytearray | None = None):
        """The batches whose records :meth:`records` returns, read ``chunk_bytes`` at a time
        into one reused buffer: a list of the whole batches of each read. Control batches,
        batches below ``first_offset`` or from the bound on, and (``isolation="committed"``)
        aborted batches are left out; a batch's first or last records may still lie outside
        [``first_offset``, ``next_offset``), known once the iteration ends. Checks every
        batch's CRC and that offsets follow (:class:`CorruptRecordError`).

        The batches view the reused buffer: each list is valid only until the next is asked
        for, and is decoded while it is in the processor's cache. Reads of 128 KiB copied a
        126 MB segment out of the page cache in 19 ms where reads of 256 KiB to 8 MiB took
        55-60 ms (their copies miss the second-level cache; measured on a 2-core EPYC).
        ``buffer``: the read buffer to use (its size is the chunk size), for a caller that
        reads fetch after fetch into the same memory instead of new pages each time.
        O(bytes) reads, one ``pread`` a chunk (a batch larger than a chunk is read whole)."""
        lo, hi = self.first_offset, self._bound
        aborted = _AbortFilter(self.aborted_transactions) if self.isolation == "committed" else None
        previous_last, end_offset = self._offset_range[0] - 1, self._offset_range[1]
        nxt, end_position = self.first_offset, None
        for chunk in self._chunks(memoryview(bytearray(chunk_bytes) if buffer is None else buffer)):
            kept = []
            for b in chunk:
                previous_last = check_offsets_follow(b, previous_last, end_offset=end_offset, path=self._path)
                if b.next_offset > nxt:
                    nxt, end_position = b.next_offset, b.position + b.size
                if b.next_offset <= lo or (hi is not None and b.base_offset >= hi):
                    continue
                if aborted is not None and aborted.skip(b):
                    continue
                b.ensure_valid(self._path)
                if not b.is_control:
                    kept.append(b)
            if kept:
                yield kept
        if self._next_offset is None:
            self._found_next(nxt, end_position)

    def _chunks(self, scratch: memoryview):
        """The whole batches of the slice, a list per read into ``scratch`` (reused)."""
        return self._reads(scratch, self._whole_batches)

    def _whole_batches(self, view: memoryview, position: int) -> tuple[list, int]:
        batches = list(decode_batches(view, position_base=position, allow_incomplete=True, path=self._path))
        return batches, (batches[-1].position + batches[-1].size - position if batches else 0)

    def _reads(self, scratch: memoryview, take):
        """The slice read into ``scratch`` (reused), each read handed to ``take(view, position)``
        with the bytes of the batch the read before cut first: it returns what to yield and the
        bytes of whole batches it used (none: the view ends inside its first batch)."""
        if self._handle is None or self._raw is not None:
            item, used = take(memoryview(self.raw()), self._position)
            if used:
                yield item
            return
        position, end = self._position, self._position + self.size_bytes
        kept = 0  # bytes at the start of scratch: the start of a batch the last read cut
        while position + kept < end:
            want = min(len(scratch), end - position)
            got = kept + _pread_into(self._handle.fd, scratch[kept:want], position + kept)
            item, used = take(scratch[:got], position)
            if used:
                yield item
                del item
            elif got < want or got < ENTRY_PREFIX_BYTES or position + _entry_bytes(scratch) > end:
                return  # the file or the fetch ends inside a batch: whole batches only
            else:  # one batch larger than the buffer: a buffer its size
                grown = memoryview(bytearray(_entry_bytes(scratch)))
                grown[:got] = scratch[:got]
                scratch = grown
            kept = got - used
            scratch[:kept] = scratch[used:got]
            position += used

    def batch_parts(self, scan, chunk_bytes: int = READ_CHUNK_BYTES, *, buffer: bytearray | None = None):
        """The batches of :meth:`data_batch_chunks` walked in C (``scan``:
        ``_speedups.scan_batches``) a read at a time, one call a read instead of Python steps
        a batch: a list a read of the ``parts`` the columnar scans take, one a batch (records,
        count, base offset, base timestamp, append time or None, last offset, leader epoch),
        the records viewing the reused buffer (valid until the next list is asked for). The
        same batches are left out, the same CRCs and offsets checked. A batch that walk leaves
        to :meth:`data_batch_chunks` (a legacy or compressed one, or a fault, which that path
        reports), or a committed read with aborted transactions (their filter is that path's),
        ends the iteration with None: the caller decodes the fetch that way instead.
        ``chunk_bytes`` and ``buffer`` as for :meth:`data_batch_chunks`. O(bytes) in C, one
        ``pread`` and one Python step a read."""
        if self.isolation == "committed" and self.aborted_transactions:
            yield None
            return
        bounds = (self.first_offset, -1 if self._bound is None else self._bound,
                  -1 if self._offset_range[1] is None else self._offset_range[1])
        walk = [self._offset_range[0] - 1, self.first_offset, -1]  # last offset, next offset, end position

        def take(view, position):
            used, other, parts = scan(view, position, bounds, walk, crc.crc32c)
            if other:
                raise _GeneralPath
            return parts, used

        try:
            yield from self._reads(memoryview(bytearray(chunk_bytes) if buffer is None else buffer), take)
        except _GeneralPath:
            yield None
            return
        if self._next_offset is None:
            self._found_next(walk[1], None if walk[2] < 0 else walk[2])

    def columns(self, *, include_headers: bool = False):
        """The records of :meth:`records` as :class:`~pylog.record.columnar.Columns`: the
        columnar decode, no object per record (``Columns.to_arrow`` wraps them for Arrow).
        Checks every batch's CRC. O(bytes) in C/numpy plus O(batches + records) light steps;
        a committed read decodes batch by batch to leave aborted transactions out."""
        # Imported on first use: columnar imports numpy (~0.1 s), which a read of records never needs.
        from pylog.record.columnar import Columns, decode_columns
        lo = self.first_offset
        if not self.size_bytes:
            return Columns.empty(include_headers)
        hi = self.next_offset  # stops at the bound of the read, also inside a batch
        if self.isolation != "committed":
            return decode_columns(self.raw(), min_offset=lo, max_offset=hi, include_headers=include_headers,
                                  position_base=self._position, path=self._path)
        aborted = _AbortFilter(self.aborted_transactions)
        parts = [decode_columns(b.raw(), min_offset=lo, max_offset=hi, include_headers=include_headers,
                                position_base=b.position, path=self._path)
                 for b in self.batches()
                 if b.next_offset > lo and b.base_offset < hi and not aborted.skip(b) and not b.is_control]
        return Columns.concat(parts) if parts else Columns.empty(include_headers)

    def __iter__(self):
        return iter(self.records())

    def __len__(self) -> int:
        return self.size_bytes

    def transfer_to(self, destination) -> int:
        """Send the exact fetched bytes to a socket or fd with ``os.sendfile`` (zero copy).

        Returns bytes sent. Blocks until all are sent (a non-blocking socket is waited on).
        Linux and macOS only (:class:`UnsupportedPlatformError` elsewhere).
        """
        require_posix("FetchData.transfer_to (os.sendfile)")
        if not self.size_bytes:
            return 0
        out_fd = destination if isinstance(destination, int) else destination.fileno()
        if self._handle is None:  # bytes already read (object storage): written as they are
            return _write_all(out_fd, destination, self.raw())
        in_fd = self._handle.fd
        sent, pos, left = 0, self._position, self.size_bytes
        while left > 0:
            try:
                n = os.sendfile(out_fd, in_fd, pos, left)
            except BlockingIOError:
                _wait_writable(destination)
                continue
            if n == 0:
                break
            sent += n
            pos += n
            left -= n
        return sent

    def __repr__(self) -> str:
        return (f"FetchData(first_offset={self.first_offset}, position={self._position}, "
                f"size_bytes={self.size_bytes})")


def _pread_into(fd: int, view: memoryview, position: int) -> int:
    """Fill ``view`` with the bytes of ``fd`` at ``position``, looping over short reads; fewer
    only at the end of the file. Returns the bytes read."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], position + done)
        if n == 0:
            break
        done += n
    return done


def _entry_bytes(buf) -> int:
    """Bytes of the log entry whose header starts ``buf`` (its length field plus the overhead)."""
    return int.from_bytes(buf[8:12], "big", signed=True) + LOG_OVERHEAD_BYTES


def _write_all(out_fd: int, destination, data: bytes) -> int:
    view = memoryview(data)
    while view:
        try:
            n = os.write(out_fd, view)
        except BlockingIOError:
            _wait_writable(destination)
            continue
        view = view[n:]
    return len(data)


def _wait_writable(destination) -> None:
    import select
    fd = destination if isinstance(destination, int) else destination.fileno()
    select.select([], [fd], [], 1.0)


class _GeneralPath(Exception):
    """``scan_batches`` stopped at a batch for :meth:`FetchData.data_batch_chunks`."""


class _AbortFilter:
    """Kafka's consumer rule for read_committed: drop records of a producer's aborted
    transaction (from its first offset until its ABORT marker)."""

    def __init__(self, aborted):
        self.pending = sorted(aborted or [], key=lambda t: t.first_offset)
        self.active: set[int] = set()

    def skip(self, batch) -> bool:
        while self.pending and self.pending[0].first_offset <= batch.last_offset:
            self.active.add(self.pending.pop(0).producer_id)
        if batch.is_control:
            if batch.producer_id in self.active:
                recs = batch.records()
                if recs and getattr(recs[0], "control_type", None) == "ABORT":
                    self.active.discard(batch.producer_id)
            return True
        return batch.is_transactional and batch.producer_id in self.active

