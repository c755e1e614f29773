"""``RemoteLog``: a read-only partition whose segments are in object storage.

It answers the reads a :class:`~pylog.log.log.Log` answers (``read``, ``records``,
``read_to``, ``read_arrow``, ``offset_for_timestamp``, ``list_offset``, the offsets), from
:class:`~pylog.remote.segment.RemoteSegment`\\ s. What it costs, in requests to the store:
opening costs none; the first read of a segment fetches its offset index (one GET) and
then one ranged GET of its ``.log``; later reads of that segment cost one ranged GET each
(none when the last window holds them). A read from the log start or from where the last
one ended is a scan: it fetches ahead in ranges growing to 16 MiB, the next one on a
background thread (:meth:`RemoteLogFile.prefetch
<pylog.remote.segment.RemoteLogFile.prefetch>`). ``log_end_offset`` walks the last batches
of the last segment once (one GET) unless the metadata said where it ends.

Transactions: a tiered segment lies below the last stable offset by Kafka's rule (only
segments below it are copied), so committed reads skip the aborted transactions the
segments' transaction indexes list. A log dir copied whole may end inside open
transactions: its last stable offset comes from the latest producer snapshot in it and a
replay of the batches after it (once, on the first committed read).
"""

from __future__ import annotations

import contextlib

from pylog.arguments import check_choice, check_int
from pylog.errors import LogClosedError, OffsetOutOfRangeError, ReadOnlyError
from pylog.layout import INT64_MAX, OFFSET_RANGE
from pylog.log.appends import check_offset
from pylog.log.local import (
    EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
)
from pylog.log.list_offset import last_fetchable_offset
from pylog.log.reading import RecordReads
from pylog.record.batch import decode_batches
from pylog.remote.segment import RemoteSegment, segment_at
from pylog.segment.fetch import FetchData

ISOLATIONS = ("uncommitted", "high_watermark", "committed")


class RemoteLog(RecordReads, contextlib.AbstractContextManager):
    """A read-only partition in object storage (see the module's docstring for costs).

    ``segments`` are its :class:`RemoteSegment`\\ s oldest first, each ending where the
    next begins (a segment's batches at or past the next one's base are not read from it).
    ``open_transactions``, when given, returns ``{producer id: first offset}`` of the
    transactions still open at the log end (a copied log dir); without it every
    transaction is complete."""

    read_only = True

    def __init__(self, segments: list[RemoteSegment], *, topic: str | None, partition: int | None, url: str,
                 log_start_offset: int | None = None, open_transactions=None):
        self._segments = list(segments)
        self.topic, self.partition, self.url = topic, partition, url
        self._log_start_offset = log_start_offset
        self._open_transactions = open_transactions
        self._lso: int | None = None
        self._scan_at: int | None = None  # where the last read ended: a read from there continues a scan
        self._closed = False

    def __repr__(self) -> str:
        return f"RemoteLog({self.url!r})"

    # -- offsets ---------------------------------------------------------------------------------
    @property
    def segments(self) -> list[RemoteSegment]:
        return list(self._segments)

    @property
    def log_start_offset(self) -> int:
        first = self._segments[0].base_offset if self._segments else 0
        return first if self._log_start_offset is None else max(first, self._log_start_offset)

    @property
    def log_end_offset(self) -> int:
        if not self._segments:
            return self.log_start_offset
        return max(self._segments[-1].end_offset + 1, self._segments[-1].base_offset)

    @property
    def high_watermark(self) -> int:
        """The log end: what is in object storage was acknowledged before it was copied."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        if self._lso is None:
            open_txns = self._open_transactions() if self._open_transactions else {}
            self._lso = min([self.log_end_offset, *open_txns.values()])
        return self._lso

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    # -- reads -----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int = 1 << 20, *, isolation: str = "uncommitted",
             max_offset: int | None = None, min_one_message: bool = True) -> FetchData:
        """Whole batches from ``offset`` on, as :meth:`Log.read <pylog.log.log.Log.read>`
        answers. Cost: one ranged GET of a ``.log`` (plus the segment's offset index the
        first time, and the transaction indexes of the segments read for a committed read)."""
        self._check_open()
        check_offset(offset, "offset")
        check_int(max_bytes, "max_bytes", OFFSET_RANGE)
        check_choice(isolation, "isolation", ISOLATIONS)
        start, end = self.log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(f"offset {offset} is outside the log [{start}, {end}] of {self.url}")
        bound = last_fetchable_offset(self, isolation)
        if max_offset is not None:
            check_offset(max_offset, "max_offset")
            bound = min(bound, max_offset)
        fetch = None
        i = segment_at(self._segments, offset)
        while fetch is None and i < len(self._segments) and offset < bound:
            fetch = self._read_segment(i, offset, bound, max_bytes, isolation, min_one_message)
            i += 1
        if fetch is None:
            fetch = FetchData(offset, isolation=isolation, aborted_transactions=[] if isolation == "committed" else None)
        fetch.high_watermark, fetch.log_start_offset = end, start
        if isolation == "committed":
            fetch.last_stable_offset = self.last_stable_offset
        fetch.topic, fetch.partition = self.topic, self.partition
        return fetch

    def _read_segment(self, i: int, offset: int, bound: int, max_bytes: int, isolation: str,
                      min_one_message: bool) -> FetchData | None:
        seg = self._segments[i]
        next_base = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
        stop = bound if next_base is None else min(bound, next_base)
        scan = offset in (self._scan_at, self.log_start_offset)
        header = seg.translate_offset(offset, fetch_bytes=max_bytes, scan=scan)
        if header is None or header.base_offset >= stop:
            return None
        size = 0
        for h in seg.file.headers(header.position):
            if h.base_offset >= stop or (h.last_offset >= stop and h.magic < 2):
                break
            if size + h.size > max_bytes and (size or not min_one_message):
                break
            size += h.size
            self._scan_at = h.last_offset + 1
            if h.last_offset >= stop - 1:
                break
        if not size:
            return None
        fetch = FetchData.of_bytes(offset, seg.file.read(header.position, size), position=header.position,
                                   path=seg.url, bound=bound, isolation=isolation, offset_range=(seg.base_offset, next_base))
        if isolation == "committed":
            fetch.aborted_transactions = self._aborted_between(i, offset, fetch.next_offset)
        return fetch

    def _aborted_between(self, i: int, offset: int, upper: int) -> list:
        """Aborted transactions overlapping ``[offset, upper)``: from the transaction indexes of
        segment ``i`` on (an ABORT marker lies after its records), until one holds a marker at
        or past ``upper`` (Kafka's rule: later ones cannot abort what the fetch holds).
        Cost: a GET per transaction index read the first time (none where the metadata says
        a segment has none)."""
        out = []
        for seg in self._segments[i:]:
            entries = seg.aborted_transactions()
            out += [t for t in entries if t.last_offset >= offset and t.first_offset < upper]
            if any(t.last_offset >= upper for t in entries):
                break
        return out

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Kafka's ListOffsets over the remote segments, as :meth:`Log.offset_for_timestamp
        <pylog.log.log.Log.offset_for_timestamp>`: -2 the log start, -1 the log end, -3 the
        offset of the largest timestamp, -4 the log end (nothing is local), -5 the last offset. Cost: the segments' time index (one GET each, the
        first time) until the one holding ``timestamp``, then one ranged GET."""
        self._check_open()
        check_int(timestamp, "timestamp", (LATEST_TIERED_TIMESTAMP, INT64_MAX))
        if timestamp in (EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP):  # all of it is tiered
            return self.log_end_offset if timestamp == EARLIEST_LOCAL_TIMESTAMP else \
                (self.log_end_offset - 1 if self._segments else None)
        if timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            return self.log_start_offset if timestamp == EARLIEST_TIMESTAMP else self.log_end_offset
        if timestamp == MAX_TIMESTAMP:
            best = max(self._segments, key=lambda s: s.max_timestamp, default=None)
            if best is None or best.max_timestamp < 0:
                return None
            return self._first_at_or_after(best, best.max_timestamp, best.base_offset)
        for seg in self._segments:
            if seg.end_offset < self.log_start_offset or seg.max_timestamp < timestamp:
                continue
            found = self._first_at_or_after(seg, timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    @staticmethod
    def _first_at_or_after(seg: RemoteSegment, timestamp: int, starting_offset: int) -> int | None:
        """In ``seg``, the first record at or after ``starting_offset`` stamped >= ``timestamp``."""
        position = seg.position_floor(max(seg.offset_floor_for_timestamp(timestamp), starting_offset))
        for h in seg.file.headers(position):
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                batch = next(decode_batches(seg.file.read(h.position, h.size), position_base=h.position, path=seg.url))
                for r in batch.records():
                    if r.timestamp >= timestamp and r.offset >= starting_offset:
                        return r.offset
        return None

    # -- what a read-only log refuses ------------------------------------------------------------
    def _refuse(self, *args, **kwargs):
        raise ReadOnlyError(f"{self.url} is in object storage and read only")

    append = append_batches = append_as_follower = append_txn_marker = truncate_to = _refuse
    delete_records = enforce_retention = compact = roll = _refuse

    def flush(self) -> None:
        """Nothing to flush: a remote log is never written."""

    def refresh(self, *, relist: bool = False) -> None:
        """Nothing to follow: the segments were listed when the log was opened."""

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.url} is closed")

    def close(self) -> None:
        self._closed = True

    def __exit__(self, *exc) -> None:
        self.close()
