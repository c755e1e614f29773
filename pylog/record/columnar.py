"""Columnar decode: batches straight into numpy columns, without one Python object per
record (the fast path under bulk reads and the Spark source).

How a run of consecutive v2 batches is decoded (docs/format/batch.md#columnar-decode):

1. Their record bytes (decompressed where needed) are joined into one buffer.
2. A *scan* finds every record's fields. Without the C speedups it is a short Python loop
   that hops from one record-length varint to the next (O(records), a few operations
   each), then numpy decodes the other varints of all records at once at those
   positions and checks every bound vectorised. With the ``c`` backend
   (:mod:`pylog.record.backend`) one C call per batch does the same walk.
3. Keys and values are gathered into two contiguous buffers with int32 offsets, the
   layout of Arrow's ``binary`` type, so :meth:`Columns.to_arrow` wraps them without copying.

Legacy (magic 0/1) entries, rare in bulk data, go through the object decoder. A damaged
batch makes the run fall back to the object decoder, whose error names the batch position.
Cost: O(bytes) in C/numpy plus O(batches + records) cheap Python steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pylog.errors import InvalidRecordError
from pylog.layout import (
    ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, BATCH_HEADER_BYTES, INT32_MAX, INT64_MAX,
)
from pylog.record import backend
from pylog.record.batch import MIN_RECORD_BYTES, decode_batches
from pylog.record.scan import Fields, Malformed, parse_all_headers, scan_numpy

_I32 = np.dtype(np.int32)
_I64 = np.dtype(np.int64)
#: Records averaging more bytes than this are gathered by ``bytes.join`` (cost per record),
#: smaller ones by a numpy mask (cost per byte, ~0.4 ns); measured on 1,000-record batches.
_JOIN_GATHER_MIN_RECORD_BYTES = 512


@dataclass
class Columns:
    """Records as columns. ``key_offsets``/``value_offsets`` have n+1 int32 entries into
    ``key_data``/``value_data``; ``key_valid``/``value_valid`` are False for nulls.
    ``timestamp_types``: 0 CreateTime, 1 LogAppendTime, -1 none (magic 0).
    ``headers`` is None unless decoded with ``include_headers``."""

    offsets: np.ndarray
    timestamps: np.ndarray
    timestamp_types: np.ndarray
    key_data: bytes
    key_offsets: np.ndarray
    key_valid: np.ndarray
    value_data: bytes
    value_offsets: np.ndarray
    value_valid: np.ndarray
    headers: list | None = None

    @property
    def num_rows(self) -> int:
        return len(self.offsets)

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns (data buffers and arrays). O(1)."""
        arrays = (self.offsets, self.timestamps, self.timestamp_types, self.key_offsets, self.key_valid,
                  self.value_offsets, self.value_valid)
        return len(self.key_data) + len(self.value_data) + sum(a.nbytes for a in arrays)

    def values(self) -> list:
        """The values as Python objects (None for nulls). O(n) objects: for tests and small sets."""
        return _unpack(self.value_data, self.value_offsets, self.value_valid)

    def keys(self) -> list:
        """The keys as Python objects (None for nulls). O(n) objects."""
        return _unpack(self.key_data, self.key_offsets, self.key_valid)

    @classmethod
    def empty(cls, with_headers: bool = False) -> "Columns":
        z32 = np.zeros(1, _I32)
        return cls(np.empty(0, _I64), np.empty(0, _I64), np.empty(0, np.int8), b"", z32, np.empty(0, bool),
                   b"", z32.copy(), np.empty(0, bool), [] if with_headers else None)

    @classmethod
    def concat(cls, parts: list["Columns"]) -> "Columns":
        """One Columns of several, in order (copies the buffers once). O(total bytes)."""
        with_headers = bool(parts) and parts[0].headers is not None
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return cls.empty(with_headers)
        if len(parts) == 1:
            return parts[0]
        return cls(np.concatenate([p.offsets for p in parts]), np.concatenate([p.timestamps for p in parts]),
                   np.concatenate([p.timestamp_types for p in parts]),
                   *_concat_binary([(p.key_data, p.key_offsets) for p in parts]),
                   np.concatenate([p.key_valid for p in parts]),
                   *_concat_binary([(p.value_data, p.value_offsets) for p in parts]),
                   np.concatenate([p.value_valid for p in parts]),
                   None if not with_headers else [h for p in parts for h in (p.headers or [()] * p.num_rows)])

    def slice(self, mask: np.ndarray) -> "Columns":
        """The rows where ``mask`` is True. O(kept bytes)."""
        if mask.all():
            return self
        idx = np.flatnonzero(mask)
        kd, ko = _take_binary(self.key_data, self.key_offsets, idx)
        vd, vo = _take_binary(self.value_data, self.value_offsets, idx)
        return Columns(self.offsets[idx], self.timestamps[idx], self.timestamp_types[idx], kd, ko,
                       self.key_valid[idx], vd, vo, self.value_valid[idx],
                       None if self.headers is None else [self.headers[i] for i in idx])

    def to_arrow(self, topic: str | None = None, partition: int | None = None, *,
                 include_headers: bool | None = None):
        """A ``pyarrow.RecordBatch`` with Spark's Kafka-source schema: key binary, value binary,
        topic string, partition int32, offset int64, timestamp timestamp[us, UTC], timestampType
        int32, plus headers list<struct<key string, value binary>> when ``include_headers``
        (default: when the columns were decoded with headers).

        Keys, values and offsets are wrapped without copying (``pa.Array.from_buffers``);
        timestamps are converted to microseconds (one O(n) pass). ``partition`` None is -1.
        """
        import pyarrow as pa
        n = self.num_rows
        if include_headers is None:
            include_headers = self.headers is not None
        cols = [_binary(pa, n, self.key_data, self.key_offsets, self.key_valid),
                _binary(pa, n, self.value_data, self.value_offsets, self.value_valid),
                _constant_string(pa, n, topic or ""),
                _primitive(pa, pa.int32(), np.full(n, -1 if partition is None else partition, _I32)),
                _primitive(pa, pa.int64(), np.ascontiguousarray(self.offsets, _I64)),
                _primitive(pa, pa.timestamp("us", tz="UTC"), self.timestamps * 1000),
                _primitive(pa, pa.int32(), self.timestamp_types.astype(_I32))]
        if include_headers:
            hdrs = self.headers if self.headers is not None else [()] * n
            cols.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in hdrs], arrow_headers_type(pa)))
        return pa.RecordBatch.from_arrays(cols, schema=arrow_schema(pa, include_headers))


def arrow_headers_type(pa):
    """Spark's ``array<struct<key: string, value: binary>>`` in Arrow (list items named "element")."""
    return pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))


HEADERS_TYPE = arrow_headers_type  # the name the first version exported


def arrow_schema(pa, include_headers: bool = False):
    """The Arrow schema Spark gives its Kafka source's rows (timestamps in UTC)."""
    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
              pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
              pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32())]
    if include_headers:
        fields.append(pa.field("headers", arrow_headers_type(pa)))
    return pa.schema(fields)


def _unpack(data, offsets, valid) -> list:
    o = offsets.tolist()
    v = valid.tolist()
    return [data[o[i]:o[i + 1]] if v[i] else None for i in range(len(v))]


def _primitive(pa, arrow_type, array: np.ndarray):
    return pa.Array.from_buffers(arrow_type, len(array), [None, pa.py_buffer(array)], 0)


def _binary(pa, n, data, offsets, valid):
    nulls = n - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)


def _constant_string(pa, n, text: str):
    raw = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=_I32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)], 0)


def _concat_binary(parts):
    datas = [d for d, _ in parts]
    if sum(len(d) for d in datas) > INT32_MAX:
        raise OverflowError("more than 2 GiB of keys or values in one Columns; split the read")
    shifts = np.cumsum([0] + [len(d) for d in datas[:-1]])
    offs = [parts[0][1]] + [o[1:] + s for (_, o), s in zip(parts[1:], shifts[1:])]
    return b"".join(datas), np.concatenate(offs).astype(_I32)


def _take_binary(data, offsets, idx):
    starts = offsets[idx].astype(_I64)
    lengths = offsets[idx + 1].astype(_I64) - starts
    return _gather(data, starts, lengths, np.frombuffer(data, np.uint8) if len(data) else None)


# -- decode ----------------------------------------------------------------------------------

def decode_columns(buffer, *, min_offset: int | None = None, max_offset: int | None = None,
                   include_control: bool = False, include_headers: bool = False, verify: bool = True,
                   position_base: int = 0, path: str | None = None) -> Columns:
    """Decode every record of ``buffer`` into :class:`Columns`, keeping offsets in
    [min_offset, max_offset); control records only with ``include_control``.

    ``buffer`` is bytes, memoryview or mmap of concatenated batches (v2 or legacy, any codec).
    A torn final batch is ignored; a bad CRC (with ``verify``) or structure raises
    :class:`CorruptRecordError`/:class:`InvalidRecordError` naming the batch position.
    Cost: O(bytes) vectorised plus O(records) light Python steps; no I/O.

    >>> from pylog import encode_batch
    >>> cols = decode_columns(encode_batch([b"a", (b"k", b"b")], base_offset=5, timestamp=7))
    >>> (cols.offsets.tolist(), cols.keys(), cols.values(), cols.timestamps.tolist())
    ([5, 6], [None, b'k'], [b'a', b'b'], [7, 7])
    """
    lo = -1 if min_offset is None else min_offset
    hi = INT64_MAX if max_offset is None else max_offset
    parts: list[Columns] = []
    run: list = []
    for batch in decode_batches(buffer, position_base=position_base, allow_incomplete=True, path=path):
        if batch.last_offset < lo:
            continue
        if batch.base_offset >= hi:
            break
        if verify:
            batch.ensure_valid(path)
        if batch.magic == 2:
            if batch.attributes & ATTR_CONTROL and not include_control:
                continue
            run.append(batch)
            continue
        if run:
            parts.append(_decode_run(run, include_headers, path))
            run = []
        parts.append(_object_columns(batch, include_headers, path))
    if run:
        parts.append(_decode_run(run, include_headers, path))
    cols = Columns.concat(parts) if parts else Columns.empty(include_headers)
    if cols.num_rows and (cols.offsets[0] < lo or cols.offsets[-1] >= hi):
        cols = cols.slice((cols.offsets >= lo) & (cols.offsets < hi))
    return cols


def _decode_run(batches: list, include_headers: bool, path) -> Columns:
    """Columns of consecutive v2 batches; any structural fault re-decodes them one by one
    with the object decoder so the error names the exact batch."""
    try:
        return _run_columns(batches, include_headers, path)
    except Malformed:
        for b in batches:
            b.records(verify=False, path=path)  # raises InvalidRecordError with the position
        raise InvalidRecordError("record batch structure does not decode", position=batches[0].position,
                                 path=path) from None


def _run_columns(batches: list, include_headers: bool, path) -> Columns:
    payloads = []
    for b in batches:
        if b.record_count < 0:
            raise Malformed
        if b.attributes & ATTR_COMPRESSION_MASK:
            payloads.append(b.payload(path))  # decompression errors name the batch themselves
        else:
            payloads.append(b.raw()[BATCH_HEADER_BYTES:])
    scan_columns = backend.c_function("scan_columns")
    if scan_columns is not None and not include_headers:
        return _walk_native(scan_columns, batches, payloads)
    counts = np.array([b.record_count for b in batches], _I64)
    sizes = np.array([len(p) for p in payloads], _I64)
    total = int(counts.sum())
    joined = b"".join(payloads)
    if total > len(joined) // MIN_RECORD_BYTES or np.any(counts > sizes // MIN_RECORD_BYTES):
        raise Malformed
    if total == 0:
        if len(joined):
            raise Malformed
        return Columns.empty(include_headers)
    scan_records = backend.c_function("scan_records")
    if scan_records is not None:
        f = _scan_native(scan_records, joined, counts, sizes)
    else:
        f = scan_numpy(joined, counts, sizes)
    return _assemble(batches, counts, joined, f, include_headers)


def _walk_native(scan_columns, batches: list, payloads: list) -> Columns:
    """The columns of v2 batches (``payloads``: their record bytes, slices of the fetched
    bytes or decompressed) in one C walk, keys and values copied once, straight into their
    columns (``scan_columns``). O(bytes), one Python step a batch."""
    return scan_parts(scan_columns, [(p, b.record_count, b.base_offset, b.base_timestamp,
                                      b.max_timestamp if b.attributes & ATTR_TIMESTAMP_TYPE else None)
                                     for b, p in zip(batches, payloads)])


def scan_parts(scan_columns, parts: list) -> Columns:
    """The columns of ``parts``, ``scan_columns``' (records, count, base offset, base
    timestamp, append time or None; more fields after are not read), the key and value data
    new bytes of their exact size. Raises :class:`Malformed` for a record that does not
    decode. O(bytes) in C."""
    try:
        offsets, timestamps, kd, ko, kv, vd, vo, vv = scan_columns(parts)
    except ValueError:
        raise Malformed from None
    types = np.repeat(np.array([p[4] is not None for p in parts], np.int8), [p[1] for p in parts])
    return Columns(np.frombuffer(offsets, _I64), np.frombuffer(timestamps, _I64), types, kd, np.frombuffer(ko, _I32),
                   np.frombuffer(kv, np.bool_), vd, np.frombuffer(vo, _I32), np.frombuffer(vv, np.bool_))


def _scan_native(scan_records, joined: bytes, counts, sizes) -> Fields:
    """One C walk per batch (``scan_records`` checks every bound), positions made global.
    Positions and lengths stay int32, as the C walk returns them."""
    mv = memoryview(joined)
    cols = [[] for _ in range(8)]
    start = 0
    for count, size in zip(counts.tolist(), sizes.tolist()):
        if count:
            try:
                arrays = scan_records(mv[start:start + size], count)
            except ValueError:
                raise Malformed from None
            for k, (raw, dtype) in enumerate(zip(arrays, _NATIVE_DTYPES)):
                a = np.frombuffer(raw, dtype)
                cols[k].append(a + start if start and k in (2, 4, 6) else a)
        elif size:
            raise Malformed
        start += size
    f = Fields()
    (f.ts_delta, f.off_delta, f.key_pos, f.key_len, f.value_pos, f.value_len, f.header_pos,
     f.header_count) = [c[0] if len(c) == 1 else np.concatenate(c) for c in cols]
    f.record_end = None  # the C walk already checked headers and record ends
    f.array = None
    return f


#: What ``scan_records`` returns: ts and offset deltas int64, then key/value/header
#: positions and lengths (counts) int32.
_NATIVE_DTYPES = (_I64, _I64) + (_I32,) * 6


def _assemble(batches, counts, joined: bytes, f: Fields, include_headers: bool) -> Columns:
    base_offsets = np.repeat(np.array([b.base_offset for b in batches], _I64), counts)
    append_time = np.array([bool(b.attributes & ATTR_TIMESTAMP_TYPE) for b in batches])
    if append_time.any():
        per_batch = np.array([b.max_timestamp for b in batches], _I64)
        fixed = np.repeat(per_batch, counts)
        rel = np.repeat(np.array([b.base_timestamp for b in batches], _I64), counts) + f.ts_delta
        timestamps = np.where(np.repeat(append_time, counts), fixed, rel)
    else:
        bases = np.array([b.base_timestamp for b in batches], _I64)
        timestamps = (np.repeat(bases, counts) if len(batches) > 1 else bases[0]) + f.ts_delta
    headers = parse_all_headers(joined, f, include_headers)
    a = f.array if f.array is not None else (np.frombuffer(joined, np.uint8) if len(joined) else None)
    kd, ko = _gather(joined, f.key_pos, f.key_len, a)
    vd, vo = _gather(joined, f.value_pos, f.value_len, a)
    return Columns(base_offsets + f.off_delta, timestamps, np.repeat(append_time.astype(np.int8), counts),
                   kd, ko, f.key_len >= 0, vd, vo, f.value_len >= 0, headers)


def _gather(data: bytes, positions: np.ndarray, lengths: np.ndarray, array) -> tuple[bytes, np.ndarray]:
    """Copy the byte ranges (negative length = null, no bytes) into one buffer with int32
    offsets [n+1]. O(n + gathered bytes)."""
    gather = backend.c_function("gather")
    if gather is not None:
        if len(data) > INT32_MAX:
            raise OverflowError("more than 2 GiB of records in one run; split the read")
        out, offsets = gather(data, positions.astype(_I32, copy=False).tobytes(),
                              lengths.astype(_I32, copy=False).tobytes())
        return out, np.frombuffer(offsets, _I32)
    n = len(positions)
    clipped = np.maximum(lengths, 0).astype(_I64)
    offsets = np.zeros(n + 1, _I64)
    np.cumsum(clipped, out=offsets[1:])
    gathered = int(offsets[-1])
    if gathered > INT32_MAX:
        raise OverflowError("more than 2 GiB of keys or values in one Columns; split the read")
    if gathered == 0:
        out = b""
    elif len(data) > _JOIN_GATHER_MIN_RECORD_BYTES * n or array is None:
        stops = (positions + clipped).tolist()
        out = b"".join([data[s:e] for s, e in zip(positions.tolist(), stops)])
    else:
        out = _mask_gather(array, positions, clipped)
    return out, offsets.astype(_I32)


def _mask_gather(array: np.ndarray, positions: np.ndarray, lengths: np.ndarray) -> bytes:
    """Keep the bytes inside sorted, disjoint ranges: the gaps and ranges alternate, so a
    repeat of [gap, kept, gap, kept, ...] by their lengths is the mask. O(len(array)) in numpy."""
    n = len(positions)
    bounds = np.empty(2 * n + 2, _I64)
    bounds[0] = 0
    bounds[1:-1:2] = positions
    bounds[2:-1:2] = positions + lengths
    bounds[-1] = len(array)
    pattern = np.zeros(2 * n + 1, bool)
    pattern[1::2] = True
    return array[np.repeat(pattern, np.diff(bounds))].tobytes()


def _object_columns(batch, include_headers: bool, path) -> Columns:
    """Columns of a legacy entry through the object decoder (legacy data is small and rare)."""
    records = batch.records(verify=False, path=path)
    n = len(records)
    keys = [r.key for r in records]
    values = [r.value for r in records]
    ts_type = {"CreateTime": 0, "LogAppendTime": 1}.get(batch.timestamp_type, -1)
    kd, ko = _pack(keys)
    vd, vo = _pack(values)
    return Columns(np.array([r.offset for r in records], _I64), np.array([r.timestamp for r in records], _I64),
                   np.full(n, ts_type, np.int8), kd, ko, np.array([k is not None for k in keys], bool),
                   vd, vo, np.array([v is not None for v in values], bool),
                   [tuple(r.headers) for r in records] if include_headers else None)


def _pack(items) -> tuple[bytes, np.ndarray]:
    lengths = [0 if x is None else len(x) for x in items]
    offsets = np.zeros(len(items) + 1, _I32)
    np.cumsum(lengths, out=offsets[1:])
    return b"".join(x for x in items if x is not None), offsets
