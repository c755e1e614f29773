"""Kafka's wire types spelled out with ``struct``, to write expected record bytes in tests
independently of the codec under test."""

from __future__ import annotations

import struct


def i8(n: int) -> bytes:
    return struct.pack(">b", n)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def uvarint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def string(s: str | None) -> bytes:
    """Classic string: int16 length (-1 for null), UTF-8."""
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def compact_string(s: str | None) -> bytes:
    """Flexible string: uvarint length + 1 (0 for null), UTF-8."""
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def blob(b: bytes | None) -> bytes:
    """Classic bytes: int32 length (-1 for null)."""
    return i32(-1) if b is None else i32(len(b)) + b


def compact_blob(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def array(items: list[bytes]) -> bytes:
    return i32(len(items)) + b"".join(items)


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = uvarint(0)


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: count, then tag, size, bytes for each."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(b)) + b for t, b in fields)
