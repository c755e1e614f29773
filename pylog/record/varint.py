"""Zigzag LEB128 varints, as Kafka's ``ByteUtils`` (docs/format/batch.md#varints).

Hot loops inline the one-byte case and call these for the rest.
"""

from __future__ import annotations

from pylog.errors import InvalidRecordError


def zigzag(n: int) -> int:
    """Map a signed int to the unsigned value Kafka writes (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    return (n << 1) ^ (n >> 63)


def encode_varint(n: int) -> bytes:
    """Zigzag-encode a signed int (varint or varlong; the encoding is the same)."""
    return encode_uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def encode_uvarint(v: int) -> bytes:
    """LEB128 of a non-negative int, without zigzag (Kafka's unsigned varint)."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def decode_varint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; return ``(value, next_pos)``.

    ``max_bytes`` is 5 for varints and 10 for varlongs; a longer one raises
    :class:`InvalidRecordError`, as does running off the end of ``buf``.
    """
    value = shift = 0
    end = min(len(buf), pos + max_bytes)
    i = pos
    while i < end:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), i
        shift += 7
    if end == pos + max_bytes:
        raise InvalidRecordError(f"varint is longer than {max_bytes} bytes")
    raise InvalidRecordError("varint runs past the end of the records")


#: Encodings of -64..16383, the values almost every record uses; filled by the first
#: :func:`varint_bytes` (~10 ms, which ``import pylog`` does not pay).
_TABLE_MIN = -64
_TABLE_END = 16384
_TABLE: list[bytes] = []


def varint_bytes(n: int) -> bytes:
    """``encode_varint`` with a table for small values. O(1) for -64 <= n < 16384."""
    if _TABLE_MIN <= n < _TABLE_END:
        return (_TABLE or _fill_table())[n - _TABLE_MIN]
    return encode_varint(n)


def _fill_table() -> list[bytes]:
    """:data:`_TABLE`, filled in one step (threads that race here write the same list)."""
    table = []
    for n in range(_TABLE_MIN, _TABLE_END):
        z = (n << 1) ^ (n >> 63)  # zigzag: at most three bytes here
        table.append(bytes((z,)) if z < 0x80 else bytes((z & 0x7F | 0x80, z >> 7)) if z < 0x4000
                     else bytes((z & 0x7F | 0x80, (z >> 7) & 0x7F | 0x80, z >> 14)))
    _TABLE[:] = table
    return table
