"""The columnar decode of fetch after fetch through one reused read buffer (``Consumer.poll_columns``).

Each fetch is read whole into a buffer kept from one fetch to the next and its batches
walked in C, headers, offsets and CRCs, by one call (``FetchData.batch_parts``), then their
records decoded into new :class:`~pylog.record.columnar.Columns` by another
(``scan_columns``: keys and values copied out into bytes of their exact size), which stay
valid whatever the next fetch reads. A fetch holding a compressed or legacy batch is
decoded batch by batch instead (``FetchData.data_batch_chunks``, the same checks). Decoding
``fetch.raw()`` instead takes a new buffer of the fetch's size per poll: blocks the C
library maps and unmaps, their pages faulted in again at each poll (measured for a million
116-byte records in 1 MiB fetches: ~17,000 page faults, ~470 here).
"""

from __future__ import annotations

import threading

from pylog.layout import ATTR_COMPRESSION_MASK, BATCH_HEADER_BYTES
from pylog.record import backend
from pylog.record.columnar import Columns, _decode_run, _walk_native, decode_columns, scan_parts
from pylog.record.scan import Malformed

_local = threading.local()  # each thread's ColumnsScratch


def decode_fetch_columns(fetch, min_offset: int, max_offset: int) -> tuple[Columns, int | None]:
    """:meth:`ColumnsScratch.decode` with the calling thread's read buffer (made on its
    first call, kept while the thread lives: the size of the largest fetch it read)."""
    scratch = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = ColumnsScratch()
    return scratch.decode(fetch, min_offset, max_offset)


class ColumnsScratch:
    """A read buffer reused from fetch to fetch, the size of the largest fetch read. Not
    thread-safe: one per reader."""

    def __init__(self):
        self._buffer = bytearray()

    def decode(self, fetch, min_offset: int, max_offset: int) -> tuple[Columns, int | None]:
        """The data records of ``fetch`` with offsets in [min_offset, max_offset), as
        ``Columns``, and the leader epoch of the batch holding the last of them (None when
        there are none). Checks every batch's CRC; a damaged batch raises
        :class:`~pylog.errors.CorruptRecordError` or :class:`~pylog.errors.InvalidRecordError`
        naming it. Cost: one read of the fetch into the reused buffer, O(bytes) in C, a few
        Python steps a read (a batch, for compressed ones); no view of the buffer leaves here."""
        if len(self._buffer) < fetch.size_bytes:
            self._buffer = bytearray(fetch.size_bytes)  # a new one: views of the old may remain
        walk, scan = backend.c_function("scan_batches"), backend.c_function("scan_columns")
        found = self._walked(walk, scan, fetch, max_offset) if walk is not None else None
        if found is None:
            found = self._batches(fetch, max_offset)
        if found is None:  # legacy entries, rare in bulk data: the whole decode
            return self._whole(fetch, min_offset, max_offset)
        parts, epochs = found
        cols = Columns.concat(parts) if parts else Columns.empty()
        if cols.num_rows and (cols.offsets[0] < min_offset or cols.offsets[-1] >= max_offset):
            cols = cols.slice((cols.offsets >= min_offset) & (cols.offsets < max_offset))
        if not cols.num_rows:
            return cols, None
        last = int(cols.offsets[-1])
        return cols, next(epoch for last_offset, epoch in epochs if last_offset >= last)

    def _walked(self, walk, scan, fetch, max_offset: int) -> tuple[list, list] | None:
        """The columns of the batches of ``fetch`` below ``max_offset``, a ``Columns`` a
        read, and each batch's (last offset, leader epoch): walked in C
        (``FetchData.batch_parts``), a read's records decoded by one call (``scan_columns``).
        None when the walk leaves a batch to the general path or a record does not decode."""
        out, epochs = [], []
        for parts in fetch.batch_parts(walk, len(self._buffer), buffer=self._buffer):
            if parts is None:
                return None
            kept = [p for p in parts if p[2] < max_offset]
            if kept:
                try:
                    out.append(scan_parts(scan, kept))
                except Malformed:
                    return None
                epochs += [(p[5], p[6]) for p in kept]
            if len(kept) < len(parts):  # the rest lies from max_offset on
                break
        return out, epochs

    def _batches(self, fetch, max_offset: int) -> tuple[list, list] | None:
        """:meth:`_walked`'s answer batch by batch (``FetchData.data_batch_chunks``), for
        compressed batches; None for a fetch holding a legacy entry."""
        out, epochs = [], []
        for chunk in fetch.data_batch_chunks(len(self._buffer), buffer=self._buffer):
            if any(b.magic != 2 for b in chunk):
                return None
            kept = [b for b in chunk if b.base_offset < max_offset]
            if kept:
                out.append(_run_columns(kept, fetch.path))
                epochs += [(b.last_offset, b.partition_leader_epoch) for b in kept]
            if len(kept) < len(chunk):
                break
        return out, epochs

    @staticmethod
    def _whole(fetch, min_offset: int, max_offset: int) -> tuple[Columns, int | None]:
        cols = decode_columns(fetch.raw(), min_offset=min_offset, max_offset=max_offset,
                              position_base=fetch.position, path=fetch.path)
        if not cols.num_rows:
            return cols, None
        last = int(cols.offsets[-1])
        return cols, next(b.partition_leader_epoch for b in fetch.batches()
                          if b.last_offset >= last and not b.is_control)


def _run_columns(batches: list, path) -> Columns:
    """The columns of consecutive v2 batches; with the C speedups, keys and values in
    buffers of their exact size (``scan_columns``). A structure fault raises
    :class:`~pylog.errors.InvalidRecordError` naming the batch."""
    scan = backend.c_function("scan_columns")
    if scan is not None and all(b.record_count >= 0 for b in batches):
        payloads = [b.payload(path) if b.attributes & ATTR_COMPRESSION_MASK else b.raw()[BATCH_HEADER_BYTES:]
                    for b in batches]
        try:
            return _walk_native(scan, batches, payloads)
        except Malformed:
            pass  # decoded again below, whose error names the batch
    return _decode_run(batches, False, path)
