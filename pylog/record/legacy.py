"""Legacy message sets, magic 0 and 1: read only (docs/format/batch.md#legacy).

A legacy log entry is one message; a compressed one is a *wrapper* whose value is
the compressed inner message set. ``LegacyBatch`` presents an entry with the same
fields as :class:`~pylog.record.batch.RecordBatch`, reported the way Kafka's
``AbstractLegacyRecordBatch`` reports them (base offset = first inner offset,
last offset = the entry's offset, CRC = the wrapper's CRC-32).
"""

from __future__ import annotations

import zlib

from pylog.errors import CorruptRecordError, InvalidRecordError
from pylog.layout import (
    COMPRESSION_NAMES, INT32, LEGACY_ATTR_COMPRESSION_MASK, LEGACY_ATTR_TIMESTAMP_TYPE, LEGACY_CRC_AT,
    LEGACY_RECORD_OVERHEAD_V0, LEGACY_RECORD_OVERHEAD_V1, LEGACY_V0_HEADER, LEGACY_V1_HEADER, LOG_OVERHEAD,
    LOG_OVERHEAD_BYTES, MAGIC_POSITION,
)
from pylog.record import compression as _codec
from pylog.record.record import Record

_unpack_overhead = LOG_OVERHEAD.unpack_from
_unpack_i32 = INT32.unpack_from


class _Message:
    """One parsed legacy message (an entry's body)."""

    __slots__ = ("offset", "crc", "magic", "attributes", "timestamp", "key", "value", "body_start", "size")


def _parse_message(buf, pos: int, end: int) -> _Message:
    """Parse the entry at ``pos`` (offset, size, crc, magic, attributes, [timestamp], key, value)."""
    if end - pos < LOG_OVERHEAD_BYTES + LEGACY_RECORD_OVERHEAD_V0:
        raise InvalidRecordError("legacy message is cut short")
    m = _Message()
    m.offset, length = _unpack_overhead(buf, pos)
    if length < LEGACY_RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD_BYTES + length > end:
        raise InvalidRecordError(f"legacy message size {length} does not fit")
    m.size = LOG_OVERHEAD_BYTES + length
    m.body_start = pos + LOG_OVERHEAD_BYTES
    stop = m.body_start + length
    p = m.body_start
    m.magic = buf[p + 4]
    if m.magic == 0:
        m.crc, _, m.attributes = LEGACY_V0_HEADER.unpack_from(buf, p)
        m.timestamp = -1
        p += LEGACY_V0_HEADER.size
    elif m.magic == 1:
        if length < LEGACY_RECORD_OVERHEAD_V1:
            raise InvalidRecordError(
                f"magic-1 message size {length} is below its {LEGACY_RECORD_OVERHEAD_V1}-byte overhead")
        m.crc, _, m.attributes, m.timestamp = LEGACY_V1_HEADER.unpack_from(buf, p)
        p += LEGACY_V1_HEADER.size
    else:
        raise InvalidRecordError(f"inner message has magic {m.magic}")
    m.key, p = _read_bytes(buf, p, stop, "key")
    m.value, p = _read_bytes(buf, p, stop, "value")
    if p != stop:
        raise InvalidRecordError(f"legacy message has {stop - p} bytes after its value")
    return m


def _read_bytes(buf, p: int, stop: int, what: str):
    if p + 4 > stop:
        raise InvalidRecordError(f"legacy message {what} length is cut short")
    (n,) = _unpack_i32(buf, p)
    p += 4
    if n == -1:
        return None, p
    if n < 0 or p + n > stop:
        raise InvalidRecordError(f"invalid legacy message {what} length {n}")
    return bytes(buf[p:p + n]), p + n


class LegacyRecord(Record):
    """A record read from a legacy message; ``crc`` is that message's stored CRC-32: the
    entry's own, or for a record inside a compressed wrapper the inner message's."""

    __slots__ = ("crc",)

    def __init__(self, value, key, timestamp, offset, crc: int):
        super().__init__(value, key, timestamp, (), offset)
        self.crc = crc


class LegacyBatch:
    """A magic 0/1 log entry (one message, or a compressed wrapper of several)."""

    __slots__ = ("_buf", "_start", "position", "size", "_msg", "_inner", "_valid")

    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    partition_leader_epoch = -1
    is_transactional = False
    is_control = False
    has_producer_id = False
    delete_horizon_ms = None
    has_delete_horizon = False

    def __init__(self, buf, start: int = 0, position: int | None = None):
        self._buf = buf
        self._start = start
        self.position = start if position is None else position
        _, length = _unpack_overhead(buf, start)
        self.size = LOG_OVERHEAD_BYTES + length
        self._msg = None
        self._inner = None
        self._valid = None

    def _message(self) -> _Message:
        if self._msg is None:
            try:
                self._msg = _parse_message(self._buf, self._start, self._start + self.size)
            except InvalidRecordError as e:
                raise InvalidRecordError(e.reason, position=self.position) from None
        return self._msg

    @property
    def magic(self) -> int:
        return self._buf[self._start + MAGIC_POSITION]

    @property
    def crc(self) -> int:
        return int.from_bytes(self._buf[self._start + LEGACY_CRC_AT:self._start + MAGIC_POSITION], "big")

    @property
    def attributes(self) -> int:
        return self._buf[self._start + 17]

    @property
    def compression_id(self) -> int:
        return self.attributes & LEGACY_ATTR_COMPRESSION_MASK

    @property
    def compression(self) -> str:
        cid = self.compression_id
        return COMPRESSION_NAMES[cid] if cid < len(COMPRESSION_NAMES) else f"unknown({cid})"

    @property
    def timestamp_type(self) -> str:
        if self.magic == 0:
            return "NoTimestampType"
        return "LogAppendTime" if self.attributes & LEGACY_ATTR_TIMESTAMP_TYPE else "CreateTime"

    @property
    def max_timestamp(self) -> int:
        return self._message().timestamp

    @property
    def last_offset(self) -> int:
        return _unpack_overhead(self._buf, self._start)[0]

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_offset(self) -> int:
        if self.compression_id == 0:
            return self.last_offset
        inner = self.records()
        return inner[0].offset if inner else self.last_offset

    @property
    def record_count(self) -> int:
        return 1 if self.compression_id == 0 else len(self.records())

    def raw(self) -> memoryview:
        return memoryview(self._buf)[self._start:self._start + self.size]

    def compute_crc(self) -> int:
        """CRC-32 (IEEE) from the magic byte to the end of the message."""
        return zlib.crc32(memoryview(self._buf)[self._start + 16:self._start + self.size]) & 0xFFFFFFFF

    def is_valid(self) -> bool:
        if self._valid is None:
            self._valid = self.compute_crc() == self.crc
        return self._valid

    def ensure_valid(self, path: str | None = None) -> None:
        if not self.is_valid():
            raise CorruptRecordError(
                f"message is corrupt (stored crc = {self.crc}, computed crc = {self.compute_crc()})",
                position=self.position, path=path)

    def records(self, *, verify: bool = True, path: str | None = None, place: tuple | None = None,
                record_type: type | None = None) -> list[Record]:
        """The entry's record, or the inner records of a compressed wrapper, with absolute
        offsets; with ``place`` (``(topic, partition)``) each carries it and the entry's
        timestamp type (as ``RecordBatch.records``). ``record_type``: a :class:`Record`
        class to copy them into (they are :class:`LegacyRecord`, with their CRC, without)."""
        if verify:
            self.ensure_valid(path)
        if self._inner is None:
            try:
                self._inner = self._decode()
            except InvalidRecordError as e:
                raise InvalidRecordError(e.reason, position=self.position, path=path) from None
        records = self._inner if record_type is None else \
            [record_type(r.value, r.key, r.timestamp, r.headers, r.offset) for r in self._inner]
        if place is not None:
            topic, partition, timestamp_type = *place, self.timestamp_type
            for r in records:
                r.topic, r.partition, r.timestamp_type = topic, partition, timestamp_type
        return records

    def _decode(self) -> list[Record]:
        m = self._message()
        if self.compression_id == 0:
            return [LegacyRecord(m.value, m.key, m.timestamp, m.offset, m.crc)]
        if m.value is None:
            raise InvalidRecordError("compressed wrapper message has a null value")
        data = _codec.decompress(self.compression_id, m.value, magic=m.magic)
        inner = []
        pos, end = 0, len(data)
        while pos < end:
            im = _parse_message(data, pos, end)
            if zlib.crc32(memoryview(data)[im.body_start + 4:im.body_start + im.size - 12]) & 0xFFFFFFFF != im.crc:
                raise CorruptRecordError(f"inner message at byte {pos} of the wrapper fails its CRC")
            if im.attributes & LEGACY_ATTR_COMPRESSION_MASK:
                raise InvalidRecordError("inner message of a compressed wrapper is itself compressed")
            inner.append(im)
            pos += im.size
        return self._absolute(m, inner)

    @staticmethod
    def _absolute(wrapper: _Message, inner: list[_Message]) -> list[Record]:
        append_time = wrapper.magic == 1 and bool(wrapper.attributes & LEGACY_ATTR_TIMESTAMP_TYPE)
        shift = None  # v0 inner offsets are absolute
        if wrapper.magic == 1 and inner:
            base = wrapper.offset - inner[-1].offset
            shift = base if base >= 0 else None  # some producers leave the wrapper offset at 0
        out = []
        for im in inner:
            ts = wrapper.timestamp if append_time else im.timestamp
            off = im.offset + shift if shift is not None else im.offset
            out.append(LegacyRecord(im.value, im.key, ts, off, im.crc))
        return out

    def __iter__(self):
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count

    def __repr__(self) -> str:
        return (f"LegacyBatch(offset={self.last_offset}, magic={self.magic}, "
                f"compression={self.compression}, position={self.position}, size={self.size})")
