"""The record codec's loops in pure Python: the reference implementation the C extension and
numpy produce the same bytes and records as (docs/format/batch.md).

:mod:`pylog.record.backend` chooses when they run: always with the ``python`` backend, and
with ``numpy`` for batches below ``VECTOR_MIN_RECORDS`` records, where numpy's fixed costs
outweigh its speed. Cost: O(bytes), a few dozen bytecodes per record.
"""

from __future__ import annotations

from pylog.errors import InvalidRecordError
from pylog.record.varint import decode_varint, varint_bytes


def decode_records(buf, count: int, base_offset: int, base_timestamp: int, append_time, record_type,
                   topic=None, partition=None, timestamp_type=None) -> list:
    """``count`` v2 records of the uncompressed ``buf`` as ``record_type`` objects, each given
    ``topic``, ``partition`` and ``timestamp_type`` when ``timestamp_type`` is not None (the
    arguments of the C ``decode_records``). Raises :class:`InvalidRecordError` naming the first
    structural fault. O(len(buf))."""
    if type(buf) is not bytes:  # a memoryview's slices would be memoryviews, not bytes
        buf = bytes(buf)
    out = _decode_loop(buf, count, base_offset, base_timestamp, append_time, record_type)
    if timestamp_type is not None:
        for r in out:
            r.topic, r.partition, r.timestamp_type = topic, partition, timestamp_type
    return out


def _decode_loop(buf: bytes, count: int, base_offset: int, base_timestamp: int, append_time,
                 record_type) -> list:
    end = len(buf)
    out = []
    append = out.append
    pos = 0
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = decode_varint(buf, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise InvalidRecordError(f"invalid record size {length} at byte {pos} of the records")
            b = buf[pos + 1]  # skip attributes
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = decode_varint(buf, pos + 1, 10)
            b = buf[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = decode_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = decode_varint(buf, pos)
            if n >= 0:
                key = buf[pos:pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise InvalidRecordError(f"invalid key length {n}")
            b = buf[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = decode_varint(buf, pos)
            if n >= 0:
                value = buf[pos:pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise InvalidRecordError(f"invalid value length {n}")
            b = buf[pos]
            if b == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = decode_headers(buf, pos, rec_end)
            if pos != rec_end:
                raise InvalidRecordError(
                    f"invalid record size: expected to read {length} bytes but read {length + pos - rec_end}")
            append(record_type(value, key,
                               base_timestamp + ts_delta if append_time is None else append_time,
                               headers, base_offset + off_delta))
    except IndexError:
        raise InvalidRecordError("records end before the declared record count (premature EOF)") from None
    if pos != end:
        raise InvalidRecordError("incorrect declared batch size, records still remaining in the batch")
    return out


def decode_headers(buf: bytes, pos: int, rec_end: int) -> tuple[tuple, int]:
    """The headers of the record ending at ``rec_end`` whose header count is at ``pos``, and
    the position after them. O(header bytes)."""
    count, pos = decode_varint(buf, pos)
    if count < 0 or count > rec_end - pos:
        raise InvalidRecordError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        n, pos = decode_varint(buf, pos)
        if n < 0 or pos + n > rec_end:
            raise InvalidRecordError(f"invalid header key length {n}")
        hkey = buf[pos:pos + n].decode("utf-8", "surrogateescape")
        pos += n
        n, pos = decode_varint(buf, pos)
        if n >= 0:
            if pos + n > rec_end:
                raise InvalidRecordError(f"invalid header value length {n}")
            hval = buf[pos:pos + n]
            pos += n
        elif n == -1:
            hval = None
        else:
            raise InvalidRecordError(f"invalid header value length {n}")
        headers.append((hkey, hval))
    return tuple(headers), pos


def encode_columns(values: list, keys: list | None, ts_deltas: list | None) -> bytes | None:
    """Concatenated headerless v2 records with offset deltas 0..n-1 (the arguments of the C
    ``encode_records``): ``values``/``keys`` ``bytes`` or None (``keys`` None: all keys
    null), ``ts_deltas`` ints (None: all 0). None when an item is of another type, so the
    caller's per-record encoder can name it. O(total bytes)."""
    n = len(values)
    if not _bytes_or_none(values) or (keys is not None and (len(keys) != n or not _bytes_or_none(keys))):
        return None
    if ts_deltas is not None and (len(ts_deltas) != n or set(map(type, ts_deltas)) - {int}):
        return None
    if keys is None and ts_deltas is None:
        return _encode_values(values)
    vb = varint_bytes
    parts = []
    append = parts.append
    for i, v in enumerate(values):
        k = None if keys is None else keys[i]
        body = (b"\x00" + vb(0 if ts_deltas is None else ts_deltas[i]) + vb(i)
                + (b"\x01" if k is None else vb(len(k)) + k) + (b"\x01" if v is None else vb(len(v)) + v) + b"\x00")
        append(vb(len(body)))
        append(body)
    return b"".join(parts)


def _encode_values(values: list) -> bytes:
    """Values only, timestamp delta 0: the common append, one join. O(total bytes)."""
    vb = varint_bytes
    parts = []
    append = parts.append
    for i, v in enumerate(values):
        if v is None:
            body = b"\x00\x00" + vb(i) + b"\x01\x01\x00"
        else:
            n = len(v)
            head = b"\x00\x00" + vb(i) + b"\x01" + vb(n)
            append(vb(len(head) + n + 1))
            append(head)
            append(v)
            append(b"\x00")
            continue
        append(vb(len(body)))
        append(body)
    return b"".join(parts)


def _bytes_or_none(items: list) -> bool:
    return set(map(type, items)) <= {bytes, type(None)}
