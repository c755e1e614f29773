"""A log as an Arrow table or a pandas DataFrame: ``Log.read_arrow`` and ``Log.to_pandas``.

Both read through the columnar decode (pylog/record/columnar.py): no Python object per
record, keys and values wrapped into Arrow without a copy. The table has the schema of
Spark's Kafka source (``key binary, value binary, topic string, partition int32, offset
int64, timestamp timestamp[us, UTC], timestampType int32`` and, with ``include_headers``,
``headers list<struct<key string, value binary>>``), so the same data reads the same way
from pylog, from Spark and from Kafka.

``pyarrow`` (and ``pandas`` for ``to_pandas``) are optional: ``pip install
'pylog-kafka[arrow]'``. Without them the call raises :class:`MissingDependencyError`.
"""

from __future__ import annotations

import importlib

from pylog.errors import InvalidRecordError, MissingDependencyError
from pylog.layout import ATTR_COMPRESSION_MASK, ATTR_TIMESTAMP_TYPE, BATCH_HEADER_BYTES
from pylog.record import backend

#: Bytes per fetch: whole batches, decoded a fetch at a time.
FETCH_BYTES = 8 << 20


def require(module: str, purpose: str):
    """Import an optional package, or raise :class:`MissingDependencyError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"{purpose} needs the optional package {module!r}: pip install 'pylog-kafka[arrow]'") from None


def read_arrow(log, start_offset: int | None = None, end_offset: int | None = None, *,
               isolation: str = "uncommitted", include_headers: bool = False, max_bytes: int = FETCH_BYTES):
    """The data records of ``log`` in ``[start_offset, end_offset)`` (defaults: the whole log)
    as a ``pyarrow.Table``, the same records as ``log.records(...)`` in the same order.

    ``isolation`` is that of :meth:`Log.read`; ``"committed"`` leaves out aborted
    transactions. ``max_bytes`` bounds one fetch; the table holds everything read, one
    record batch a fetch. With the C speedups and without headers, each fetch is read in
    cache-sized chunks and its batches, headers, CRCs and records, decoded by one C call a
    chunk straight into buffers of pyarrow's memory pool (``FetchData.walk_whole_batches``
    with ``scan_batches``, then ``scan_arrow``); a fetch holding a compressed or legacy
    batch is decoded batch by batch (``FetchData.data_batch_chunks``). Every batch's CRC is
    checked. Cost: O(bytes) in C plus O(fetches + chunks) light Python steps (O(batches)
    for compressed ones); memory about the size of the keys and values read. Reads only.
    """
    pa = require("pyarrow", "Log.read_arrow")
    # Imported on first use: columnar imports numpy (~0.1 s), and every Log imports this module.
    from pylog.record.columnar import arrow_schema
    schema = arrow_schema(pa, include_headers)
    scans = (backend.c_function("scan_batches"), backend.c_function("scan_arrow"))  # (None, None) without C
    batches = []
    place = _Place(pa, log.topic, log.partition)
    for fetch in _fetches(log, start_offset, end_offset, isolation, max_bytes):
        if scans[0] is not None and not include_headers:
            batch = _fetch_arrow(pa, scans, fetch, place, schema, end_offset)
        else:
            cols = fetch.columns(include_headers=include_headers)
            if end_offset is not None and cols.num_rows and cols.offsets[-1] >= end_offset:
                cols = cols.slice(cols.offsets < end_offset)  # a legacy wrapper read_to gave whole
            batch = cols.to_arrow(log.topic, log.partition, include_headers=include_headers) if cols.num_rows else None
        if batch is not None and batch.num_rows:
            batches.append(batch)
    return pa.Table.from_batches(batches, schema=schema)


def to_pandas(log, start_offset: int | None = None, end_offset: int | None = None, **options):
    """:func:`read_arrow` as a ``pandas.DataFrame`` (``timestamp`` in UTC, keys and values
    ``bytes`` or None). Same options and cost, plus pandas' conversion (O(records) objects)."""
    require("pandas", "Log.to_pandas")
    return read_arrow(log, start_offset, end_offset, **options).to_pandas()


def _fetches(log, start_offset, end_offset, isolation: str, max_bytes: int):
    """Each fetch from ``start_offset`` to ``end_offset`` (``Log.read_to``: a legacy
    compressed wrapper holding ``end_offset`` comes whole, the caller cuts it); the caller
    decodes it before the next is asked for (its ``next_offset`` is then known without a
    second read)."""
    offset = log.log_start_offset if start_offset is None else max(start_offset, log.log_start_offset)
    while True:
        if end_offset is None:
            fetch = log.read(offset, max_bytes, isolation=isolation)
        else:
            fetch = log.read_to(offset, end_offset, max_bytes, isolation=isolation)
        if fetch.size_bytes == 0:
            return
        yield fetch
        nxt = fetch.next_offset
        if nxt <= offset:
            return
        offset = nxt


def _fetch_arrow(pa, scans, fetch, place: "_Place", schema, end_offset: int | None):
    """One fetch's rows below ``end_offset`` as a ``pyarrow.RecordBatch`` (None when it holds
    no data records), by :func:`_fetch_arrow_walked`; a fetch holding a batch that walk
    leaves to the general path is decoded again batch by batch (:func:`_fetch_arrow_batches`)."""
    walk, scan = scans
    out = _ArrowColumns(pa, fetch.size_bytes)
    if not _fetch_arrow_walked(walk, scan, fetch, out):
        out = _ArrowColumns(pa, fetch.size_bytes)
        if not _fetch_arrow_batches(scan, fetch, out):
            cols = fetch.columns()
            if end_offset is not None and cols.num_rows and cols.offsets[-1] >= end_offset:
                cols = cols.slice(cols.offsets < end_offset)
            return cols.to_arrow(place.topic, place.partition, include_headers=False) if cols.num_rows else None
    if not out.rows:
        return None
    hi = fetch.next_offset if end_offset is None else min(fetch.next_offset, end_offset)
    return out.record_batch(place, schema, fetch.first_offset, hi)


def _fetch_arrow_walked(walk, scan, fetch, out: "_ArrowColumns") -> bool:
    """The data batches of ``fetch`` decoded into ``out``: walked a read chunk at a time in C
    (``FetchData.batch_parts``), each chunk's records decoded by one C call (``scan_arrow``).
    False when the walk leaves a batch to the general path or a record does not decode."""
    for parts in fetch.batch_parts(walk):
        if parts is None or not out.scan(scan, parts):
            return False
    return True


def _fetch_arrow_batches(scan, fetch, out: "_ArrowColumns") -> bool:
    """The data batches of ``fetch`` decoded into ``out`` a cache-sized chunk at a time, each
    chunk's records by one C call (``scan_arrow``; a compressed batch decompressed first).
    False when the fetch holds a legacy (magic 0/1) entry, rare in bulk data: the caller
    decodes it through ``FetchData.columns``. A structure fault re-decodes the chunk with
    the object decoder, whose error names the batch."""
    from pylog.record.columnar import _decode_run
    for chunk in fetch.data_batch_chunks():
        if any(b.magic != 2 for b in chunk):
            return False
        if not out.scan(scan, [(b.payload(fetch.path) if b.attributes & ATTR_COMPRESSION_MASK
                                else b.raw()[BATCH_HEADER_BYTES:], b.record_count, b.base_offset, b.base_timestamp,
                                b.max_timestamp if b.attributes & ATTR_TIMESTAMP_TYPE else None) for b in chunk]):
            _decode_run(chunk, False, fetch.path)  # raises InvalidRecordError naming the batch
            raise InvalidRecordError("record batch structure does not decode", position=chunk[0].position,
                                     path=fetch.path) from None
    return True


class _ArrowColumns:
    """The columns of one fetch in Arrow's layout: offsets, timestamps (µs), timestamp types,
    then offsets, validity bitmap (written from the first null on) and data of the keys and
    of the values, and ``fill``, where the next row goes (rows, key bytes, value bytes, key
    nulls, value nulls). The buffers are resizable ones of pyarrow's memory pool, which
    keeps freed pages for the next read: 120 MB of new ``bytes`` cost 90 ms of page faults
    here, of the pool's buffers 14 ms (measured)."""

    #: bytes a row takes in each row buffer (a bitmap: 1, rounded up below)
    _ROW_BYTES = (8, 8, 4, 4, 1, None, 4, 1, None)
    def __init__(self, pa, fetch_bytes: int):
        self.pa = pa
        self.fetch_bytes = fetch_bytes
        self.buffers = None
        self.room = None  # (rows, key bytes, value bytes) the buffers hold at least
        self.fill = [0, 0, 0, 0, 0]

    @property
    def rows(self) -> int:
        return self.fill[0]

    def scan(self, scan, parts: list) -> bool:
        """Decode ``parts`` (``scan_arrow``'s) after the rows held, growing the buffers first.
        False when a record does not decode (``scan_arrow``'s ValueError)."""
        rows = sum(p[1] for p in parts)
        data_bytes = sum(len(p[0]) for p in parts)
        first = self.buffers is None
        self._reserve(self.rows + rows, self.fill[1] + data_bytes, self.fill[2] + data_bytes)
        try:
            scan(parts, tuple(self.buffers), self.fill)
        except ValueError:
            return False
        if first:  # room for the whole fetch at the first chunk's density: rarely a second growth
            scale = 1.0625 * self.fetch_bytes / max(data_bytes, 1)
            self._reserve(int(self.rows * scale) + 64, int(self.fill[1] * scale) + data_bytes,
                          int(self.fill[2] * scale) + data_bytes)
        return True

    def _reserve(self, rows: int, key_bytes: int, value_bytes: int) -> None:
        """Room for ``rows`` rows, ``key_bytes`` of keys and ``value_bytes`` of values; a
        growth doubles at least (the pool moves a block only when it cannot grow in place)."""
        if self.room is not None and rows <= self.room[0] and key_bytes <= self.room[1] and value_bytes <= self.room[2]:
            return
        need = [self._size(k, rows, key_bytes if k == 5 else value_bytes) for k in range(len(self._ROW_BYTES))]
        if self.buffers is None:
            self.buffers = [self.pa.allocate_buffer(size, resizable=True) for size in need]
        else:
            for buf, size in zip(self.buffers, need):
                if buf.size < size:
                    buf.resize(max(size, 2 * buf.size))
        self.room = (rows, key_bytes, value_bytes)

    def _size(self, k: int, rows: int, data_bytes: int) -> int:
        per_row = self._ROW_BYTES[k]
        if per_row is None:
            return data_bytes
        if k in (4, 7):
            return (rows + 7) // 8
        return per_row * (rows + 1 if k in (3, 6) else rows)

    def record_batch(self, place: "_Place", schema, lo: int, hi: int):
        """The rows with offsets in [lo, hi) as a ``RecordBatch`` of ``schema`` (Spark's
        Kafka source, without headers). The buffers are cut to their size first (in place:
        the memory pool shrinks a block where it lies)."""
        pa = self.pa
        n, key_bytes, value_bytes, key_nulls, value_nulls = self.fill
        sizes = [self._size(k, n, key_bytes if k == 5 else value_bytes) for k in range(len(self.buffers))]
        for buf, size in zip(self.buffers, sizes):
            buf.resize(size, shrink_to_fit=True)
        offsets, stamps, types, ko, kbits, kd, vo, vbits, vd = self.buffers
        cols = [pa.Array.from_buffers(pa.binary(), n, [kbits if key_nulls else None, ko, kd], key_nulls),
                pa.Array.from_buffers(pa.binary(), n, [vbits if value_nulls else None, vo, vd], value_nulls),
                *place.columns(n),
                pa.Array.from_buffers(pa.int64(), n, [None, offsets], 0),
                pa.Array.from_buffers(schema.field("timestamp").type, n, [None, stamps], 0),
                pa.Array.from_buffers(pa.int32(), n, [None, types], 0)]
        batch = pa.RecordBatch.from_arrays(cols, schema=schema)
        import numpy as np
        numbers = np.frombuffer(offsets, np.int64, n)
        if numbers[0] < lo or numbers[-1] >= hi:  # the fetch's first or last batch reaches past its range
            batch = batch.filter(pa.array((numbers >= lo) & (numbers < hi)))
        return batch


class _Place:
    """The ``topic`` and ``partition`` columns of a read: the same value on every row, made
    once for the largest fetch and sliced (no copy) for each."""

    def __init__(self, pa, topic: str | None, partition: int | None):
        self.pa, self.topic, self.partition = pa, topic, partition
        self._columns = None

    def columns(self, rows: int) -> tuple:
        if self._columns is None or len(self._columns[0]) < rows:
            import numpy as np

            from pylog.record.columnar import _constant_string, _primitive
            pa, partition = self.pa, -1 if self.partition is None else self.partition
            self._columns = (_constant_string(pa, rows, self.topic or ""),
                             _primitive(pa, pa.int32(), np.full(rows, partition, np.int32)))
        return tuple(c.slice(0, rows) for c in self._columns)
