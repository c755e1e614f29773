"""Encoding many headerless v2 records at once with numpy, when the C speedups are absent
(docs/format/batch.md#encoding).

The bytes are exactly those of the per-record encoder in :mod:`pylog.record.encode`:
every record's varints (length, timestamp delta, offset delta, key and value lengths)
are computed and written vectorised, keys and values are joined once and dropped into
their slots through a mask. Cost: O(records) numpy work plus O(bytes) copies; the Python
work per record is a ``len()`` inside ``map``.
"""

from __future__ import annotations

import numpy as np

_I64 = np.dtype(np.int64)
_U64 = np.dtype(np.uint64)
_NONE_TYPE = type(None)
#: A varint of n bytes holds values below 2**(7n).
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], _U64)


def encode_records_vectorised(values: list, keys: list | None, ts_deltas: list | None) -> bytes | None:
    """Concatenated v2 records with offset deltas 0..n-1 and no headers.

    ``values``/``keys`` hold ``bytes`` or None (``keys`` None: all keys null); ``ts_deltas``
    are ints (None: all 0). Returns None when an item is of another type, so the caller's
    per-record encoder can name it.
    """
    n = len(values)
    vlen = _lengths(values)
    klen = _lengths(keys) if keys is not None else np.full(n, -1, _I64)
    if vlen is None or klen is None:
        return None
    if ts_deltas is None:
        ts = np.zeros(n, _I64)
    else:
        try:
            ts = np.array(ts_deltas, _I64)
        except (OverflowError, TypeError, ValueError):
            return None
    zts, zoff, zk, zv = _zigzag(ts), _zigzag(np.arange(n, dtype=_I64)), _zigzag(klen), _zigzag(vlen)
    kbytes, vbytes = np.maximum(klen, 0), np.maximum(vlen, 0)
    body = 2 + _varint_sizes(zts) + _varint_sizes(zoff) + _varint_sizes(zk) + kbytes + _varint_sizes(zv) + vbytes
    zbody = _zigzag(body)
    record = _varint_sizes(zbody) + body
    starts = np.zeros(n, _I64)
    np.cumsum(record[:-1], out=starts[1:])
    out = np.zeros(int(starts[-1] + record[-1]), np.uint8)  # attributes and header counts stay 0
    p = _put_varints(out, starts, zbody) + 1
    p = _put_varints(out, p, zts)
    p = _put_varints(out, p, zoff)
    key_pos = _put_varints(out, p, zk)
    value_pos = _put_varints(out, key_pos + kbytes, zv)
    if keys is not None:
        _scatter(out, key_pos, kbytes, keys)
    _scatter(out, value_pos, vbytes, values)
    return out.tobytes()


def _lengths(items: list) -> np.ndarray | None:
    """Lengths of ``bytes`` items (-1 for None); None if any item is something else."""
    types = set(map(type, items))
    if not types <= {bytes, _NONE_TYPE}:
        return None
    if _NONE_TYPE in types:
        return np.array([-1 if x is None else len(x) for x in items], _I64)
    return np.fromiter(map(len, items), _I64, len(items))


def _zigzag(x: np.ndarray) -> np.ndarray:
    return ((x << 1) ^ (x >> 63)).view(_U64)


def _varint_sizes(u: np.ndarray) -> np.ndarray:
    """Bytes of each unsigned varint: 1 + how many 7-bit limits it reaches."""
    sizes = np.ones(len(u), _I64)
    for limit in _VARINT_LIMITS:
        reached = u >= limit
        if not reached.any():
            break
        sizes += reached
    return sizes


def _put_varints(out: np.ndarray, pos: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Write each varint ``u[i]`` at ``out[pos[i]]``; return the positions after them."""
    if not (u >= 0x80).any():  # all one byte: the common case for deltas and null keys
        out[pos] = u
        return pos + 1
    end = pos + _varint_sizes(u)
    idx = np.arange(len(u))
    at, rest = pos, u
    while True:
        more = rest >= 0x80
        out[at] = ((rest & np.uint64(0x7F)) | (more.astype(_U64) << np.uint64(7))).astype(np.uint8)
        if not more.any():
            return end
        idx = idx[more]
        at = pos[idx] + (at[more] - pos[idx]) + 1
        rest = rest[more] >> np.uint64(7)


def _scatter(out: np.ndarray, positions: np.ndarray, lengths: np.ndarray, items: list) -> None:
    """Drop the joined ``items`` into the sorted, disjoint ranges (positions, lengths)."""
    data = b"".join(filter(None, items))
    if not data:
        return
    n = len(positions)
    bounds = np.empty(2 * n + 2, _I64)
    bounds[0] = 0
    bounds[1:-1:2] = positions
    bounds[2:-1:2] = positions + lengths
    bounds[-1] = len(out)
    pattern = np.zeros(2 * n + 1, bool)
    pattern[1::2] = True
    out[np.repeat(pattern, np.diff(bounds))] = np.frombuffer(data, np.uint8)
