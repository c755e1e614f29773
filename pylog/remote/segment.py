"""``RemoteSegment``: one segment in object storage, read with ranged GETs.

A remote segment is a ``.log`` object (or, in the Aiven layout, a chunked and possibly
transformed one: :class:`pylog.remote.aiven.ChunkedSegmentBytes`) plus its indexes,
which may be separate objects (a plain log dir, Kafka's ``LocalTieredStorage``) or ranges
of one object (Aiven's ``.indexes``). Nothing is read at construction. The offset and
time indexes are read once, whole (one ranged GET each; a full 10 MiB index is the
worst case), and kept for the life of the segment; a lookup then costs one ranged GET
of the ``.log``: the window from the index entry's position, big enough for the fetch
asked for, so header walks and the fetch's bytes come from that one response.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

from pylog.errors import CorruptIndexError, ReadOnlyError
from pylog.index.offset_index import OffsetIndex
from pylog.index.time_index import TimeIndex
from pylog.index.txn_index import AbortedTxn
from pylog.layout import TXN_INDEX_ENTRY, TXN_INDEX_ENTRY_BYTES
from pylog.segment.file import LogFile

if TYPE_CHECKING:
    import numpy as np


#: Bytes fetched past what a read needs: an index entry lies at most ``index.interval.bytes``
#: (4 KiB by default) before the batch sought, and the walk reads headers from there.
READ_AHEAD_BYTES = 64 * 1024

#: The most a sequential scan fetches in one request past what it asked for: each fetch of
#: a scan is twice the window before it, up to this.
SCAN_READ_AHEAD_BYTES = 16 << 20


class SegmentBytes(Protocol):
    """The bytes of a remote ``.log``: ``size`` and ranged ``read``."""

    size: int
    url: str

    def read(self, position: int, size: int) -> bytes: ...


class ObjectBytes:
    """A ``.log`` stored as it is on disk: a read is one ranged GET."""

    def __init__(self, store, key: str, size: int):
        self.store, self.key, self.size = store, key, size
        self.url = store.url(key)

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self.size)
        return self.store.read_range(self.key, position, end) if end > position else b""


class LazyBytes:
    """:class:`SegmentBytes` made on first use by ``make()`` (an Aiven segment's manifest is
    read when the segment is first read, not when its log opens); ``url`` is known before."""

    def __init__(self, url: str, make):
        self.url, self._make, self._bytes = url, make, None

    def _source(self) -> SegmentBytes:
        if self._bytes is None:
            self._bytes = self._make()
        return self._bytes

    @property
    def size(self) -> int:
        return self._source().size

    def read(self, position: int, size: int) -> bytes:
        return self._source().read(position, size)


class RemoteLogFile(LogFile):
    """A read-only :class:`LogFile` over :class:`SegmentBytes`, with a window cache: a
    read inside the last fetched window costs nothing, one outside fetches
    ``[position, position + max(size, READ_AHEAD_BYTES))`` in one request; a scan fetches
    ahead (:meth:`prefetch`). The header walk,
    batch walk and zero-tail rules are LogFile's own."""

    def __init__(self, source: SegmentBytes):
        super().__init__(source.url, writable=False)
        self.source = source
        self._window: tuple[int, bytes] = (0, b"")  # (position, bytes): replaced whole, so threads may share it
        self._ahead: tuple | None = None  # (position, size, future) of the range a scan fetches ahead

    @property
    def size_bytes(self) -> int:
        return self.source.size if self._size is None else self._size

    @size_bytes.setter
    def size_bytes(self, value: int) -> None:
        self._size = value

    def prefetch(self, position: int, size: int, *, scan: bool = False) -> tuple[int, bytes]:
        """Fetch ``[position, position + size)`` (one request) unless the window holds it;
        returns the window. ``scan``: the read starts or continues a scan; it starts
        fetching the next range on a background thread, twice the window
        (``SCAN_READ_AHEAD_BYTES`` at most), and when ``position`` lies in the window, it
        fetches on from the window's end only (that range, when fetched ahead), keeping the
        window's bytes from ``position``: a scan fetches each byte of the ``.log`` once, in
        ever larger ranges, the next while the caller reads the last. Memory: two such
        ranges beyond what the read asked for."""
        window = self._window
        size = min(size, self.source.size - position)
        if size <= 0 or _covers(window, position, size):
            return window
        at, held = window
        end = at + len(held)
        if scan and at < position < end:
            more = max(position + size, end + min(2 * len(held), SCAN_READ_AHEAD_BYTES)) - end
            window = (position, held[position - at:] + self._fetch(end, min(more, self.source.size - end)))
        else:
            window = (position, self._fetch(position, size))
        if scan:
            self._fetch_ahead(position + len(window[1]), min(2 * len(window[1]), SCAN_READ_AHEAD_BYTES))
        self._window = window
        return window

    def _fetch(self, position: int, size: int) -> bytes:
        """``[position, position + size)`` (at least): the range fetched ahead when it
        starts there and is as long (waiting for it), else one request now."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == position and ahead[1] >= size:
            return ahead[2].result()
        return self.source.read(position, size)

    def _fetch_ahead(self, position: int, size: int) -> None:
        """Start fetching ``[position, position + size)`` on a background thread: a scan
        reads its window while the next range comes (one such range per file)."""
        size = min(size, self.source.size - position)
        if size > 0:
            self._ahead = (position, size, _in_background(self.source.read, position, size))

    def read(self, position: int, size: int) -> bytes:
        size = max(0, min(size, self.source.size - position))
        window = self._window
        if not _covers(window, position, size):
            window = self.prefetch(position, max(size, READ_AHEAD_BYTES))
        rel = position - window[0]
        return window[1][rel:rel + size]

    def handle(self):
        raise ReadOnlyError(f"{self.path} is in object storage: it has no file descriptor")

    def append(self, data) -> int:
        raise ReadOnlyError(f"{self.path} is in object storage and read only")


def _in_background(fn, *args) -> concurrent.futures.Future:
    """``fn(*args)`` on a daemon thread of its own (a GET waits on the network, not the
    GIL), so a process may exit while a fetch ahead waits on a stalled store."""
    future: concurrent.futures.Future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - the reader that takes the range gets it
            future.set_exception(e)

    threading.Thread(target=run, name="pylog-remote-read-ahead", daemon=True).start()
    return future


def _covers(window: tuple[int, bytes], position: int, size: int) -> bool:
    rel = position - window[0]
    return rel >= 0 and rel + size <= len(window[1])


@dataclass
class IndexSource:
    """Where a remote segment's indexes are: ``load(kind) -> bytes | None`` for kind in
    ``offset``, ``timestamp``, ``transaction``, ``producer_snapshot``, ``leader_epoch``
    (None when the segment has none of that kind). Each kind is loaded once."""

    load: Callable[[str], bytes | None]
    _cache: dict = field(default_factory=dict)

    def known_empty(self, kind: str) -> None:
        """Say the segment has no index of ``kind`` (the metadata said so): never fetched."""
        self._cache[kind] = b""

    def get(self, kind: str) -> bytes | None:
        if kind not in self._cache:
            self._cache[kind] = self.load(kind)
        return self._cache[kind]


class RemoteSegment:
    """One remote segment: ``base_offset``, ``end_offset`` (its last offset, inclusive, as
    Kafka's RemoteLogSegmentMetadata says; None until learned from the bytes),
    ``max_timestamp`` (None until learned), ``size_bytes`` and the sources of its bytes."""

    def __init__(self, base_offset: int, log: SegmentBytes, indexes: IndexSource, *,
                 end_offset: int | None = None, max_timestamp: int | None = None, segment_id: str | None = None):
        self.base_offset = base_offset
        self.file = RemoteLogFile(log)
        self.indexes = indexes
        self._end_offset = end_offset
        self._max_timestamp = max_timestamp
        self.segment_id = segment_id
        self._offset_index: tuple[np.ndarray, np.ndarray] | None = None
        self._time_index: tuple[np.ndarray, np.ndarray] | None = None

    def __repr__(self) -> str:
        return f"RemoteSegment({self.file.path!r}, base_offset={self.base_offset})"

    @property
    def url(self) -> str:
        return self.file.path

    @property
    def size_bytes(self) -> int:
        return self.file.size_bytes

    # -- indexes ----------------------------------------------------------------------------
    def _entries(self, kind: str, dtype) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np  # here, not at import: a log dir read from disk needs none of it
        raw = self.indexes.get(kind) or b""
        n = len(raw) // dtype.itemsize
        arr = np.frombuffer(raw, dtype=dtype, count=n)
        keys, vals = arr["k"].astype(np.int64), arr["v"].astype(np.int64)
        # a preallocated index ends in zero entries: the valid entries rise strictly
        used = int(np.argmax(keys[1:] <= keys[:-1]) + 1) if n > 1 and np.any(keys[1:] <= keys[:-1]) else n
        if kind == "timestamp" and used and keys[used - 1] == 0 and vals[used - 1] == 0:
            used -= 1
        return keys[:used], vals[:used]

    def offset_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(absolute offsets, positions) of the offset index; one request the first time."""
        if self._offset_index is None:
            keys, vals = self._entries("offset", OffsetIndex.dtype())
            if len(vals) > 1 and (vals[1:] < vals[:-1]).any():
                raise CorruptIndexError("offset index positions go backwards", path=self.url)
            self._offset_index = (keys + self.base_offset, vals)
        return self._offset_index

    def time_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(timestamps, absolute offsets) of the time index; one request the first time."""
        if self._time_index is None:
            keys, vals = self._entries("timestamp", TimeIndex.dtype())
            self._time_index = (keys, vals + self.base_offset)
        return self._time_index

    def position_floor(self, offset: int) -> int:
        """Position of the largest indexed offset <= ``offset`` (0 below the first)."""
        return self.position_bounds(offset)[0]

    def position_bounds(self, offset: int) -> tuple[int, int]:
        """``(floor, ceiling)``: the positions of the largest indexed offset <= ``offset``
        (0 below the first) and of the next entry (the segment's size past the last). The
        batch holding ``offset`` starts in ``[floor, ceiling]``, as an entry indexes a
        batch's last offset."""
        offsets, positions = self.offset_index()
        i = int(offsets.searchsorted(offset, side="right")) - 1
        floor = int(positions[i]) if i >= 0 else 0
        return floor, int(positions[i + 1]) if i + 1 < len(positions) else self.size_bytes

    def aborted_transactions(self) -> list[AbortedTxn]:
        """The entries of the segment's transaction index (none without one)."""
        raw = self.indexes.get("transaction") or b""
        if len(raw) % TXN_INDEX_ENTRY_BYTES:
            raise CorruptIndexError(f"transaction index of {len(raw)} bytes is not a whole number of entries",
                                    path=self.url)
        return [AbortedTxn(*TXN_INDEX_ENTRY.unpack_from(raw, i)[1:]) for i in range(0, len(raw), TXN_INDEX_ENTRY_BYTES)]

    # -- bytes --------------------------------------------------------------------------------
    def translate_offset(self, offset: int, fetch_bytes: int = 0, *, scan: bool = False):
        """The header of the first batch whose last offset is >= ``offset`` (None past the
        end), fetching ``fetch_bytes`` more with the walk's window (one request: from the
        index entry to the batch's latest start, plus ``fetch_bytes`` and the walk's read-ahead;
        ``scan``: the read continues a scan, see :meth:`RemoteLogFile.prefetch`)."""
        position, ceiling = self.position_bounds(offset)
        self.file.prefetch(position, ceiling - position + fetch_bytes + READ_AHEAD_BYTES, scan=scan)
        for h in self.file.headers(position):
            if h.last_offset >= offset:
                return h
        return None

    def last_header(self):
        """The header of the segment's last batch (None if empty): a walk from the last
        index entry, one request."""
        offsets, positions = self.offset_index()
        position = int(positions[-1]) if len(positions) else 0
        last = None
        for last in self.file.headers(position):
            pass
        return last

    @property
    def end_offset(self) -> int:
        """The last offset in the segment (``base_offset - 1`` if it is empty)."""
        if self._end_offset is None:
            h = self.last_header()
            self._end_offset = self.base_offset - 1 if h is None else h.last_offset
        return self._end_offset

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp in the segment (-1 if none): the time index's largest
        entry, else the largest of its batches' headers."""
        if self._max_timestamp is None:
            stamps, _ = self.time_index()
            if len(stamps):
                self._max_timestamp = int(stamps.max())
            else:  # no time index: every header (rare: Kafka indexes a closed segment's largest timestamp)
                self._max_timestamp = max((h.max_timestamp for h in self.file.headers(0)), default=-1)
        return self._max_timestamp

    def offset_floor_for_timestamp(self, timestamp: int) -> int:
        """The offset of the largest time index entry whose timestamp is <= ``timestamp``
        (the base offset below the first): where a search for ``timestamp`` starts."""
        stamps, offsets = self.time_index()
        i = int(stamps.searchsorted(timestamp, side="right")) - 1
        return int(offsets[i]) if i >= 0 else self.base_offset


def segment_at(segments: list[RemoteSegment], offset: int) -> int:
    """Index in ``segments`` (sorted by base offset) of the one whose base is the largest
    <= ``offset`` (0 below the first)."""
    return max(0, bisect.bisect_right([s.base_offset for s in segments], offset) - 1)
