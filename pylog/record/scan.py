"""Finding the fields of many v2 records at once, without one Python object per record
(docs/format/batch.md#columnar-decode).

``scan_numpy`` hops from one record-length varint to the next in a short Python loop
(one table lookup per record), then decodes every other varint of all records at once
with numpy and checks every bound vectorised. The columnar decoder and the object
decoder (without the C speedups) both build on it. Any structural fault raises
:class:`Malformed`; callers re-decode with the per-record decoder to name it.
"""

from __future__ import annotations

import numpy as np

from pylog.errors import InvalidRecordError
from pylog.record.varint import decode_varint

_I64 = np.dtype(np.int64)
_U64 = np.dtype(np.uint64)
#: Zero bytes after the joined records, so a vectorised varint read never leaves the array.
_PAD_BYTES = 16


class Malformed(Exception):
    """Internal: the vectorised decode found bytes that break the format."""


class Fields:
    """Per-record field positions (int64 arrays) of the joined record bytes."""

    __slots__ = ("ts_delta", "off_delta", "key_pos", "key_len", "value_pos", "value_len",
                 "header_pos", "header_count", "record_end", "array")


_HOP_TABLE: list | None = None


def _hop_table() -> list:
    """For every two bytes ``b0 | b1 << 8`` at a record start: bytes to the next record
    (length varint size + length) when the length varint has one or two bytes, else None.
    Built once (65,536 entries, a few ms); turns each hop into one lookup."""
    global _HOP_TABLE
    if _HOP_TABLE is None:
        both = np.arange(65536, dtype=_I64)
        b0, b1 = both & 0xFF, both >> 8
        one = (b0 >> 1) ^ -(b0 & 1)
        v = (b0 & 0x7F) | (b1 << 7)
        two = (v >> 1) ^ -(v & 1)
        hop = np.where(b0 < 0x80, 1 + one, 2 + two).tolist()
        for i in np.flatnonzero((b0 >= 0x80) & (b1 >= 0x80)).tolist():
            hop[i] = None
        _HOP_TABLE = hop
    return _HOP_TABLE


def _record_starts(padded: bytes, total: int) -> list:
    """Where each of ``total`` consecutive records starts in ``padded`` (records plus zero
    padding): hop from length varint to length varint. O(records), one lookup each;
    garbage gives garbage positions, which the caller's checks refuse."""
    hop = _hop_table()
    starts = []
    append = starts.append
    pos = 0
    try:
        for _ in range(total):
            append(pos)
            pos += hop[padded[pos] | padded[pos + 1] << 8]
    except TypeError:  # a length varint of three or more bytes: records over 8 KiB
        return _record_starts_slow(padded, total)
    except IndexError:
        raise Malformed from None
    return starts


def _record_starts_slow(buf: bytes, total: int) -> list:
    starts = []
    pos = 0
    try:
        for _ in range(total):
            if pos < 0:
                raise Malformed
            starts.append(pos)
            length, nxt = decode_varint(buf, pos)
            pos = nxt + length
    except (IndexError, InvalidRecordError):
        raise Malformed from None
    return starts


def _varints_at(a: np.ndarray, pos: np.ndarray, max_bytes: int):
    """Decode the zigzag varint at every position of ``pos`` in uint8 array ``a`` at once.

    Returns ``(values int64, sizes)`` (``sizes`` is the int 1 when every varint has one
    byte). ``a`` must have ``max_bytes`` readable bytes after every position (the caller
    pads it). Over-long varints raise :class:`Malformed`. Cost: O(n) per byte of the
    longest varint (usually one or two passes).
    """
    b = a[pos]
    more = b >= 0x80
    if not more.any():
        v = b.astype(_I64)
        return (v >> 1) ^ -(v & 1), 1
    value = (b & 0x7F).astype(_U64)
    sizes = np.ones(len(pos), _I64)
    k = 1
    while True:
        if k == max_bytes:
            raise Malformed
        b = a[pos + k]
        value |= ((b & 0x7F).astype(_U64) << np.uint64(7 * k)) * more
        sizes += more
        more &= b >= 0x80
        k += 1
        if not more.any():
            break
    signed = (value >> np.uint64(1)) ^ (np.uint64(0) - (value & np.uint64(1)))
    return signed.view(_I64), sizes


def scan_numpy(joined: bytes, counts, sizes) -> Fields:
    """Field positions of every record, vectorised; every bound checked (raises Malformed)."""
    total = int(counts.sum())
    padded = joined + bytes(_PAD_BYTES)
    a = np.frombuffer(padded, np.uint8)
    end = len(joined)
    starts = np.array(_record_starts(padded, total), _I64)
    if starts.min() < 0 or starts.max() >= end:
        raise Malformed
    length, size = _varints_at(a, starts, 5)
    body = starts + size
    rec_end = body + length
    if np.any(length < 6) or np.any(rec_end[:-1] != starts[1:]) or rec_end[-1] != end:
        raise Malformed
    # each batch's records end exactly where its bytes do (empty batches have no bytes)
    last = np.cumsum(counts) - 1
    has = counts > 0
    if np.any(rec_end[last[has]] != np.cumsum(sizes)[has]) or np.any(sizes[~has]):
        raise Malformed
    f = Fields()
    p = body + 1  # record attributes: unused, as in Kafka
    f.ts_delta, size = _varints_at(a, p, 10)
    p = _within(p + size, rec_end)
    f.off_delta, size = _varints_at(a, p, 5)
    p = _within(p + size, rec_end)
    f.key_len, f.key_pos, p = _length_prefixed(a, p, rec_end)
    f.value_len, f.value_pos, p = _length_prefixed(a, p, rec_end)
    f.header_count, size = _varints_at(a, p, 5)
    p = p + size
    if np.any(f.header_count < 0) or np.any(p > rec_end):
        raise Malformed
    no_headers = f.header_count == 0
    if np.any(p[no_headers] != rec_end[no_headers]):
        raise Malformed
    f.header_pos = p
    f.record_end = rec_end
    f.array = a
    return f


def _within(p, rec_end):
    """``p`` unchanged if no record has read past its end (so the next read stays in the padding)."""
    if np.any(p > rec_end):
        raise Malformed
    return p


def _length_prefixed(a, p, rec_end):
    """Read a length varint then skip that many bytes (-1 = null) for every record."""
    n, size = _varints_at(a, p, 5)
    pos = p + size
    after = pos + np.maximum(n, 0)
    if np.any(n < -1) or np.any(after > rec_end):
        raise Malformed
    return n, pos, after


def parse_all_headers(joined: bytes, f: Fields, include_headers: bool):
    """Parse the headers of the records that have any (checking them when the C walk did not)."""
    with_headers = np.flatnonzero(f.header_count)
    if not include_headers and (f.record_end is None or not len(with_headers)):
        return None
    out = [()] * len(f.header_count) if include_headers else None
    counts = f.header_count[with_headers].tolist()
    positions = f.header_pos[with_headers].tolist()
    ends = (f.record_end[with_headers] if f.record_end is not None else
            np.full(len(with_headers), len(joined), _I64)).tolist()
    for i, count, pos, end in zip(with_headers.tolist(), counts, positions, ends):
        hdrs, pos = parse_headers(joined, pos, count, end)
        if f.record_end is not None and pos != end:
            raise Malformed
        if include_headers:
            out[i] = hdrs
    return out


def parse_headers(buf: bytes, pos: int, count: int, end: int):
    """``count`` headers from ``pos`` (after the count varint), bounded by ``end``."""
    if count > end - pos:
        raise Malformed
    headers = []
    try:
        for _ in range(count):
            n, pos = decode_varint(buf, pos)
            if n < 0 or pos + n > end:
                raise Malformed
            key = buf[pos:pos + n].decode("utf-8", "surrogateescape")
            pos += n
            n, pos = decode_varint(buf, pos)
            if n < -1 or pos + n > end:
                raise Malformed
            headers.append((key, None if n == -1 else buf[pos:pos + n]))
            pos += max(n, 0)
    except InvalidRecordError:
        raise Malformed from None
    return tuple(headers), pos
