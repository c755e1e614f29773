"""``RecordBatch`` and ``decode_batches``: reading Kafka's record batches (magic 2) and
legacy message sets (magic 0/1) from any buffer (docs/format/batch.md).

Decoding a buffer walks batch headers only (O(batches)); records are parsed when a
batch is iterated (O(records)), after its CRC is checked. Nothing here writes.
"""

from __future__ import annotations

from typing import Iterator

from pylog.errors import CorruptRecordError, IncompleteBatchError, InvalidRecordError
from pylog.layout import (
    ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL, ATTRIBUTES_AT, BATCH_HEADER, BATCH_HEADER_BYTES, COMPRESSION_NAMES,
    ENTRY_PREFIX_BYTES, LEGACY_RECORD_OVERHEAD_V0, LOG_OVERHEAD, LOG_OVERHEAD_BYTES,
    MAGIC_POSITION, SEQUENCE_MODULUS,
)
from pylog.record import backend, compression as _codec, crc
from pylog.record.legacy import LegacyBatch
from pylog.record.record import ControlRecord, Record

_unpack_header = BATCH_HEADER.unpack_from
_unpack_overhead = LOG_OVERHEAD.unpack_from

#: Smallest record: length, attributes, timestamp delta, offset delta, key length,
#: value length and header count, one byte each. Bounds ``recordsCount`` by the payload.
MIN_RECORD_BYTES = 7


def increment_sequence(sequence: int, increment: int) -> int:
    """The producer sequence ``increment`` records after ``sequence``, wrapping from
    2^31 - 1 to 0 (Kafka's ``DefaultRecordBatch.incrementSequence``); -1 (none) plus one is 0,
    the first sequence of an epoch; a negative ``increment`` counts back.

    >>> increment_sequence(-1, 1), increment_sequence(SEQUENCE_MODULUS - 1, 1), increment_sequence(0, -1)
    (0, 0, 2147483647)
    """
    return (sequence + increment) % SEQUENCE_MODULUS


class RecordBatch:
    """One Kafka record batch (magic 2) as it sits in a buffer or file.

    Header fields are attributes; iterating yields the batch's :class:`Record`\\ s
    (after checking the CRC, O(records)). ``position`` is where the batch starts in the
    buffer it was decoded from (plus any ``position_base``).
    """

    __slots__ = ("_buf", "position", "_start", "size", "base_offset", "partition_leader_epoch",
                 "magic", "crc", "attributes", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
                 "record_count", "_valid")

    def __init__(self, buf, start: int = 0, position: int | None = None):
        (self.base_offset, length, self.partition_leader_epoch, self.magic, self.crc,
         attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = _unpack_header(buf, start)
        self._buf = buf
        self._start = start
        self.size = length + LOG_OVERHEAD_BYTES
        self.attributes = attributes & 0xFF  # Kafka uses the low byte only
        self.position = start if position is None else position
        self._valid = None

    # -- derived header fields -------------------------------------------------
    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after the batch's last record."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> str:
        """Codec name (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        cid = self.attributes & ATTR_COMPRESSION_MASK
        return COMPRESSION_NAMES[cid] if cid < len(COMPRESSION_NAMES) else f"unknown({cid})"

    @property
    def compression_id(self) -> int:
        """Codec id of the attributes (0 none ... 4 zstd)."""
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> str:
        """``CreateTime`` or ``LogAppendTime``."""
        return "LogAppendTime" if self.attributes & ATTR_TIMESTAMP_TYPE else "CreateTime"

    @property
    def is_transactional(self) -> bool:
        """True for a batch of a transaction."""
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        """True for a control batch (transaction markers and other control records)."""
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        """True when compaction set a delete horizon (base timestamp)."""
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon set by compaction; None if not set."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record; -1 without a producer sequence."""
        if self.base_sequence < 0:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        """True when written by an idempotent or transactional producer."""
        return self.producer_id > -1

    def raw(self) -> memoryview:
        """The batch's bytes, header included, without copying."""
        return memoryview(self._buf)[self._start:self._start + self.size]

    # -- validation --------------------------------------------------------------
    def compute_crc(self) -> int:
        """CRC-32C of bytes [21, size): what ``crc`` must equal. O(size)."""
        s = self._start
        return crc.crc32c(memoryview(self._buf)[s + ATTRIBUTES_AT:s + self.size])

    def is_valid(self) -> bool:
        """True when the size is sane and the stored CRC matches. O(size), cached."""
        if self._valid is None:
            self._valid = self.size >= BATCH_HEADER_BYTES and self.compute_crc() == self.crc
        return self._valid

    def ensure_valid(self, path: str | None = None) -> None:
        """Raise :class:`CorruptRecordError` unless :meth:`is_valid`."""
        if self.size < BATCH_HEADER_BYTES:
            raise CorruptRecordError(f"record batch size {self.size} is below the 61-byte header",
                                     position=self.position, path=path)
        if not self.is_valid():
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = {self.crc}, computed crc = {self.compute_crc()})",
                position=self.position, path=path)

    # -- records -------------------------------------------------------------------
    def payload(self, path: str | None = None) -> bytes:
        """The concatenated records, decompressed. O(size)."""
        s = self._start
        data = memoryview(self._buf)[s + BATCH_HEADER_BYTES:s + self.size]
        cid = self.attributes & ATTR_COMPRESSION_MASK
        if cid == 0:
            return bytes(data)
        if cid >= len(COMPRESSION_NAMES):
            raise InvalidRecordError(f"unknown compression type id {cid}", position=self.position, path=path)
        try:
            return _codec.decompress(cid, data)
        except InvalidRecordError as e:
            raise InvalidRecordError(e.reason, position=self.position, path=path) from None

    def records(self, *, verify: bool = True, path: str | None = None, place: tuple | None = None,
                record_type: type | None = None) -> list[Record]:
        """Every record of the batch (control records as :class:`ControlRecord`); with
        ``place`` (``(topic, partition)``) each carries it and the batch's timestamp type.
        ``record_type``: the class of a data batch's records (a subclass of :class:`Record`
        adding no field is built in C as Record is), else Record.

        With ``verify`` (the default) the CRC is checked first. O(records + size).
        """
        if verify:
            self.ensure_valid(path)
        if self.record_count < 0:
            raise InvalidRecordError(f"record batch has negative record count {self.record_count}",
                                     position=self.position, path=path)
        append_time = self.max_timestamp if self.attributes & ATTR_TIMESTAMP_TYPE else None
        if not self.attributes & ATTR_COMPRESSION_MASK:  # C reads them in place, Python copies once
            s = self._start
            payload = memoryview(self._buf)[s + BATCH_HEADER_BYTES:s + self.size]
        else:
            payload = self.payload(path)
        try:
            return decode_v2_records(payload, self.record_count, self.base_offset,
                                     self.base_timestamp, append_time,
                                     ControlRecord if self.attributes & ATTR_CONTROL else record_type or Record,
                                     place=None if place is None else (*place, self.timestamp_type))
        except InvalidRecordError as e:
            raise InvalidRecordError(e.reason, position=self.position, path=path) from None

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.record_count}, magic={self.magic}, compression={self.compression}, "
                f"position={self.position}, size={self.size})")


def decode_v2_records(buf: bytes, count: int, base_offset: int, base_timestamp: int,
                      append_time: int | None, record_type=Record, place: tuple | None = None) -> list[Record]:
    """Parse ``count`` v2 records from ``buf`` (uncompressed). O(len(buf)). ``place``:
    ``(topic, partition, timestamp_type)`` to give each record.

    Raises :class:`InvalidRecordError` for any structural fault: count not matching
    the bytes, bad varints, lengths out of range, bytes left over.
    """
    end = len(buf)
    if count > end // MIN_RECORD_BYTES:
        raise InvalidRecordError(f"record count {count} is larger than {end} bytes of records can hold")
    try:
        return backend.record_decoder(count)(buf, count, base_offset, base_timestamp, append_time, record_type,
                                             *(place or ()))
    except InvalidRecordError:
        raise
    except ValueError as e:  # the C decoder's
        raise InvalidRecordError(str(e)) from None


def decode_batches(buffer, *, position_base: int = 0, allow_incomplete: bool = False,
                   path: str | None = None) -> Iterator["RecordBatch"]:
    """Iterate the batches in ``buffer`` (bytes, bytearray, memoryview or mmap).

    Yields :class:`RecordBatch` for magic 2 and :class:`~pylog.record.legacy.LegacyBatch`
    for magic 0/1 entries. Only headers are read here (O(batches)); CRCs are checked
    when a batch's records are read or ``is_valid()`` is called.

    A buffer that ends inside its last batch raises :class:`IncompleteBatchError`
    (``valid_bytes`` = bytes of complete batches) unless ``allow_incomplete``, which
    stops quietly as Kafka's file reader does. A size or magic that cannot be right
    raises :class:`CorruptRecordError` naming the position.

    >>> from pylog import encode_batch
    >>> [b.last_offset for b in decode_batches(encode_batch([b"a", b"b"], base_offset=7))]
    [8]
    """
    buf = buffer if isinstance(buffer, (bytes, memoryview)) else memoryview(buffer)
    end = len(buf)
    pos = 0
    while pos < end:
        size = _entry_size(buf, pos, end, position_base, path)
        if size is None:
            if allow_incomplete:
                return
            _raise_incomplete(buf, pos, end, position_base, path)
        if buf[pos + MAGIC_POSITION] == 2:
            yield RecordBatch(buf, pos, position_base + pos)
        else:
            yield LegacyBatch(buf, pos, position_base + pos)
        pos += size


def complete_batch_bytes(buffer) -> int:
    """Bytes of the complete batches at the start of ``buffer``: where a fetch cut by its
    byte limit ends inside a batch, the batches before the cut. Reads only each entry's
    size and magic, as :func:`decode_batches` checks them (``CorruptRecordError`` for a
    size or magic that cannot be right); builds no batch. O(batches)."""
    buf = buffer if isinstance(buffer, (bytes, memoryview)) else memoryview(buffer)
    end = len(buf)
    pos = 0
    while pos < end:
        size = _entry_size(buf, pos, end, 0, None)
        if size is None:
            return pos
        pos += size
    return pos


def _entry_size(buf, pos: int, end: int, position_base: int, path) -> int | None:
    """Bytes of the log entry (batch or legacy message) at ``pos``; None when ``buf`` ends
    inside it; :class:`CorruptRecordError` when its size or magic cannot be right."""
    if end - pos < ENTRY_PREFIX_BYTES:
        return None
    _, length = _unpack_overhead(buf, pos)
    magic = buf[pos + MAGIC_POSITION]
    if length < LEGACY_RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"record size {length} is less than the minimum record overhead ({LEGACY_RECORD_OVERHEAD_V0})",
            position=position_base + pos, path=path)
    size = length + LOG_OVERHEAD_BYTES
    if magic == 2:
        if size < BATCH_HEADER_BYTES:
            raise CorruptRecordError(f"record batch size {size} is below the 61-byte header",
                                     position=position_base + pos, path=path)
    elif magic > 2:
        raise CorruptRecordError(f"unknown record magic {magic}", position=position_base + pos, path=path)
    return size if pos + size <= end else None


def _raise_incomplete(buf, pos: int, end: int, position_base: int, path) -> None:
    if end - pos < ENTRY_PREFIX_BYTES:
        raise IncompleteBatchError(f"buffer ends {end - pos} bytes into a batch header",
                                   position=position_base + pos, path=path, valid_bytes=pos)
    _, length = _unpack_overhead(buf, pos)
    raise IncompleteBatchError(
        f"batch of {length + LOG_OVERHEAD_BYTES} bytes is cut short: only {end - pos} bytes remain",
        position=position_base + pos, path=path, valid_bytes=pos)
