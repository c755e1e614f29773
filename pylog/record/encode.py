"""``encode_batch``: writing Kafka record batches, magic 2 (docs/format/batch.md).

The bytes are exactly what Kafka's ``MemoryRecordsBuilder`` writes for the same
inputs: base timestamp = first record's timestamp, offset deltas 0..n-1, CRC-32C
over [21, end). Also the in-place rewrites a log needs (base offset, leader epoch,
LogAppendTime). Cost: O(total bytes); nothing here does I/O.
"""

from __future__ import annotations

import time
from operator import attrgetter


from pylog.arguments import check_int, check_timestamps
from pylog.errors import InvalidArgumentError
from pylog.layout import (
    ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, ATTRIBUTES_AT,
    BATCH_FIELD_RANGES, BATCH_HEADER, BATCH_HEADER_BYTES, CONTROL_KEY, COORDINATOR_EPOCH_RANGE, CRC_AT,
    END_TXN_MARKER, INT16_RANGE, INT32, INT64, LEADER_EPOCH_AT, LOG_OVERHEAD_BYTES, MAX_TIMESTAMP_AT,
    TIMESTAMP_RANGE, UINT32,
)
from pylog.record import backend, compression as _codec, crc
from pylog.record.record import Record, as_record
from pylog.record.varint import varint_bytes

_pack_header = BATCH_HEADER.pack
_TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1, 0: 0, 1: 1}


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def _header_bytes(headers) -> bytes:
    if not headers:
        return b"\x00"
    try:
        pairs = [(hkey, hval) for hkey, hval in headers]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"record headers must be (str, bytes or None) pairs, not {headers!r:.80}") from None
    parts = [varint_bytes(len(pairs))]
    for hkey, hval in pairs:
        if not isinstance(hkey, str):
            raise InvalidArgumentError(f"header key must be str, not {type(hkey).__name__}")
        try:  # a key decoded from bytes that are not UTF-8 is written back as those bytes
            kb = hkey.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(f"header key {hkey!r:.80} is not text UTF-8 can encode: {e.reason}") from None
        parts.append(varint_bytes(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(b"\x01")
        else:
            _check_bytes(hval, "header value")
            parts.append(varint_bytes(len(hval)))
            parts.append(hval)
    return b"".join(parts)


def check_record(record: Record) -> Record:
    """``record`` if it can be encoded: key and value bytes or None, timestamp None or in
    ``layout.TIMESTAMP_RANGE``, headers (str, bytes or None) pairs; else
    :class:`InvalidArgumentError`. Lets a caller that writes several batches refuse bad input
    before the first one. O(headers)."""
    for value, what in ((record.key, "key"), (record.value, "value")):
        if value is not None:
            _check_bytes(value, what)
    if record.timestamp is not None:
        check_int(record.timestamp, "record timestamp (ms)", TIMESTAMP_RANGE)
    _header_bytes(record.headers)
    return record


def _check_bytes(value, what: str) -> None:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"record {what} must be bytes or None, not {type(value).__name__}")


def encode_records(records, base_timestamp: int, *, offset_deltas=None) -> tuple[bytes, int, int]:
    """Encode records, headers included, with offset deltas ``offset_deltas`` (default
    0..n-1; compaction keeps each record's own). Returns ``(bytes, count, max_timestamp)``.

    ``records`` are :class:`Record` objects with ``timestamp`` set. O(total bytes).
    """
    parts = []
    append = parts.append
    max_ts = -1
    vb = varint_bytes
    i = -1
    for i, r in enumerate(records):
        ts = r.timestamp
        if ts > max_ts:
            max_ts = ts
        key, value = r.key, r.value
        if key is None:
            kpart = b"\x01"
        else:
            _check_bytes(key, "key")
            kpart = vb(len(key)) + key
        if value is None:
            vpart = b"\x01"
        else:
            _check_bytes(value, "value")
            vpart = vb(len(value)) + value
        delta = i if offset_deltas is None else offset_deltas[i]
        body = b"\x00" + vb(ts - base_timestamp) + vb(delta) + kpart + vpart + _header_bytes(r.headers)
        append(vb(len(body)))
        append(body)
    return b"".join(parts), i + 1, max_ts


def encode_batch(records, *, base_offset: int = 0, compression: str | int = "none",
                 compression_level: int | None = None, timestamp_type: str = "CreateTime",
                 timestamp: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, partition_leader_epoch: int = -1,
                 is_transactional: bool = False, is_control: bool = False,
                 log_append_time: int | None = None, delete_horizon_ms: int | None = None) -> bytes:
    """Encode one magic-2 record batch, byte-compatible with Apache Kafka.

    ``records`` are :class:`Record`\\ s, ``bytes`` values or ``(key, value)`` tuples.
    A record without a timestamp gets ``timestamp`` (default: now). With
    ``timestamp_type="LogAppendTime"`` the batch's max timestamp is ``log_append_time``
    (default: now). O(total bytes) plus compression.

    >>> from pylog import decode_batches
    >>> b = next(decode_batches(encode_batch([b"x", (b"k", b"y")], base_offset=10)))
    >>> [(r.offset, r.key, r.value) for r in b]
    [(10, None, b'x'), (11, b'k', b'y')]
    """
    check_header_fields(base_offset=base_offset, timestamp=timestamp, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence,
                        partition_leader_epoch=partition_leader_epoch, log_append_time=log_append_time,
                        delete_horizon_ms=delete_horizon_ms)
    out = encode_batch_buffer(records, base_offset=base_offset, compression=compression,
                              compression_level=compression_level, timestamp_type=timestamp_type,
                              timestamp=timestamp, producer_id=producer_id, producer_epoch=producer_epoch,
                              base_sequence=base_sequence, partition_leader_epoch=partition_leader_epoch,
                              is_transactional=is_transactional, is_control=is_control,
                              log_append_time=log_append_time, delete_horizon_ms=delete_horizon_ms)
    return out if type(out) is bytes else bytes(out)


def check_header_fields(**fields) -> None:
    """Raise :class:`InvalidArgumentError` unless each given batch header field (None: unset)
    fits its width on disk (``layout.BATCH_FIELD_RANGES``). O(1)."""
    for name, value in fields.items():
        if value is not None:
            check_int(value, name, BATCH_FIELD_RANGES[name])


def encode_batch_buffer(records, *, base_offset: int = 0, compression: str | int = "none",
                        compression_level: int | None = None, timestamp_type: str = "CreateTime",
                        timestamp: int | list | None = None, producer_id: int = -1, producer_epoch: int = -1,
                        base_sequence: int = -1, partition_leader_epoch: int = -1,
                        is_transactional: bool = False, is_control: bool = False,
                        log_append_time: int | None = None, delete_horizon_ms: int | None = None):
    """``encode_batch`` returning ``bytes`` or a ``bytearray`` (the log's append path: an
    uncompressed batch of plain values is encoded in place behind its header, no copy).
    ``timestamp`` may also be a list: each record's create time (checked by the caller)."""
    codec = _codec.codec_id(compression)
    options = dict(base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                   base_sequence=base_sequence, partition_leader_epoch=partition_leader_epoch,
                   is_transactional=is_transactional, is_control=is_control, timestamp_type=timestamp_type,
                   log_append_time=log_append_time, delete_horizon_ms=delete_horizon_ms)
    if isinstance(timestamp, list):
        return _encode_stamped(records, timestamp, codec, compression_level, options)
    default_ts = now_ms() if timestamp is None else timestamp
    whole = backend.c_function("encode_batch") if codec == 0 else None
    if whole is not None and type(records) is list and records:
        buf = _batch_in_c(whole, records, default_ts, **options)
        if buf is not None:
            return buf
    payload = _encode_plain(records)
    if payload is not None:
        count = len(records)
        base_ts = max_ts = default_ts if count else -1
    else:
        recs = records if type(records) is list and set(map(type, records)) == {Record} else list(map(as_record, records))
        stamps = list(map(_timestamp_of, recs))
        if None in stamps:
            recs = [r if r.timestamp is not None else Record(r.value, r.key, default_ts, r.headers) for r in recs]
            stamps = [default_ts if t is None else t for t in stamps]
        check_timestamps(stamps, "record {i}'s timestamp (ms)")
        base_ts = stamps[0] if recs else -1
        payload, count, max_ts = _encode_native(recs, stamps, base_ts) or encode_records(recs, base_ts)
    return build_batch(payload, count, codec=codec, compression_level=compression_level, base_timestamp=base_ts,
                       max_timestamp=max_ts, **options)


def _encode_stamped(records: list, stamps: list, codec: int, compression_level: int | None, options: dict):
    """A batch of ``records`` whose create times are ``stamps`` (one each, checked here;
    a Record's own timestamp wins): plain values and ``(key, value)`` pairs through the C
    encoder (in place behind the header when uncompressed) or the backend's, anything
    else as Records."""
    payload = None
    c_encode = backend.c_function("encode_records")
    if c_encode is not None:  # checks each stamp (an int >= -1) as it encodes
        reserve = BATCH_HEADER_BYTES if codec == 0 else -1
        try:
            payload = c_encode(records, None, stamps, reserve, stamps[0])  # plain values
        except (TypeError, OverflowError):
            pairs = _pairs(records)
            try:
                payload = None if pairs is None else c_encode(pairs[1], pairs[0], stamps, reserve, stamps[0])
            except (TypeError, OverflowError):
                payload = None  # not bytes, or a bad stamp: the Records' encoder below names it
        if payload is not None and codec == 0:
            _finish_in_place(payload, len(records), stamps[0], max(stamps), **options)
            return payload
    if payload is None:
        check_timestamps(stamps, "timestamp[{i}]")
    if payload is None and c_encode is None:
        pairs = ([None] * len(records), records) if set(map(type, records)) == {bytes} else _pairs(records)
        if pairs is not None:
            payload = _encode_columns(pairs[1], pairs[0], [t - stamps[0] for t in stamps])
    if payload is None:
        recs = [r if r.timestamp is not None else Record(r.value, r.key, t, r.headers)
                for r, t in zip(map(as_record, records), stamps)]
        return encode_batch_buffer(recs, compression=codec, compression_level=compression_level, **options)
    return build_batch(payload, len(records), codec=codec, compression_level=compression_level,
                       base_timestamp=stamps[0], max_timestamp=max(stamps), **options)


def _pairs(records: list) -> tuple[list, list] | None:
    """``(keys, values)`` when every record is a ``(key, value)`` tuple, else None."""
    if set(map(type, records)) == {tuple} and set(map(len, records)) == {2}:
        keys, values = zip(*records)
        return list(keys), list(values)
    return None


def _attributes(codec: int, timestamp_type, is_transactional: bool, is_control: bool,
                delete_horizon_ms: int | None) -> int:
    ts_type = _TIMESTAMP_TYPES.get(timestamp_type)
    if ts_type is None:
        raise InvalidArgumentError(f"unknown timestamp type {timestamp_type!r}")
    return (codec | (ATTR_TIMESTAMP_TYPE if ts_type else 0) | (ATTR_TRANSACTIONAL if is_transactional else 0)
            | (ATTR_CONTROL if is_control else 0) | (ATTR_DELETE_HORIZON if delete_horizon_ms is not None else 0))


def _batch_in_c(encode, records: list, timestamp: int, *, base_offset, producer_id, producer_epoch, base_sequence,
                partition_leader_epoch, is_transactional, is_control, timestamp_type, log_append_time,
                delete_horizon_ms) -> bytearray | None:
    """An uncompressed batch of plain values or ``(key, value)`` pairs all stamped ``timestamp``,
    header and records built by one call of the C extension (``encode``), its CRC added here;
    None for other records or a header field out of range (the other encoders name it)."""
    attributes = _attributes(0, timestamp_type, is_transactional, is_control, delete_horizon_ms)
    max_ts = timestamp
    if attributes & ATTR_TIMESTAMP_TYPE:
        max_ts = now_ms() if log_append_time is None else log_append_time
    base_ts = timestamp if delete_horizon_ms is None else delete_horizon_ms
    try:
        buf = encode(records, base_offset, partition_leader_epoch, attributes, base_ts, max_ts,
                     producer_id, producer_epoch, base_sequence)
    except (TypeError, OverflowError):
        return None
    UINT32.pack_into(buf, CRC_AT, crc.crc32c(memoryview(buf)[ATTRIBUTES_AT:]))
    return buf


def _finish_in_place(buf: bytearray, count: int, base_ts: int, max_ts: int, *, base_offset, producer_id,
                     producer_epoch, base_sequence, partition_leader_epoch, is_transactional, is_control,
                     timestamp_type, log_append_time, delete_horizon_ms) -> None:
    """Write the header of an uncompressed batch whose records already sit at byte 61, and its CRC."""
    attributes = _attributes(0, timestamp_type, is_transactional, is_control, delete_horizon_ms)
    if attributes & ATTR_TIMESTAMP_TYPE:
        max_ts = now_ms() if log_append_time is None else log_append_time
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    BATCH_HEADER.pack_into(buf, 0, base_offset, len(buf) - LOG_OVERHEAD_BYTES, partition_leader_epoch, 2, 0,
                           attributes, count - 1 if count else 0, base_ts, max_ts, producer_id, producer_epoch,
                           base_sequence, count)
    UINT32.pack_into(buf, CRC_AT, crc.crc32c(memoryview(buf)[ATTRIBUTES_AT:]))


def _encode_native(recs: list[Record], stamps: list[int], base_ts: int):
    """Records without headers (timestamps ``stamps``) through the backend's encoder;
    None when they have headers or a key or value that is not bytes/None."""
    if any(map(_headers_of, recs)):
        return None
    deltas = [t - base_ts for t in stamps]
    payload = _encode_columns(list(map(_value_of, recs)), list(map(_key_of, recs)), deltas if any(deltas) else None)
    if payload is None:
        return None
    return payload, len(recs), max(stamps, default=-1)


_timestamp_of, _headers_of = attrgetter("timestamp"), attrgetter("headers")
_value_of, _key_of = attrgetter("value"), attrgetter("key")


def _encode_columns(values: list, keys: list | None, deltas: list | None, *,
                    values_only: bool = False) -> bytes | None:
    """Headerless records with offset deltas 0..n-1 through the backend's encoder; None
    when the inputs are not all bytes/None (the per-record encoder then names the
    offending field)."""
    try:
        return backend.record_encoder(len(values), values_only=values_only)(values, keys, deltas)
    except (TypeError, OverflowError):  # the C encoder's refusal
        return None


def _encode_plain(records) -> bytes | None:
    """A list of plain ``bytes`` values or of ``(key, value)`` pairs through the backend's
    encoder; None for anything else."""
    if type(records) is not list:
        return None
    first = type(records[0]) if records else bytes
    if first is tuple:
        pairs = _pairs(records)
        return None if pairs is None else _encode_columns(pairs[1], pairs[0], None)
    return _encode_columns(records, None, None, values_only=True) if first is bytes else None


def build_batch(payload: bytes, count: int, *, base_offset: int = 0, codec: int = 0,
                compression_level: int | None = None, base_timestamp: int = -1,
                max_timestamp: int = -1, timestamp_type: str = "CreateTime", producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, partition_leader_epoch: int = -1,
                is_transactional: bool = False, is_control: bool = False,
                log_append_time: int | None = None, delete_horizon_ms: int | None = None,
                last_offset_delta: int | None = None) -> bytes:
    """Wrap encoded records (offset deltas 0..count-1) in a batch header: compress, CRC."""
    attributes = _attributes(codec, timestamp_type, is_transactional, is_control, delete_horizon_ms)
    if attributes & ATTR_TIMESTAMP_TYPE:
        max_timestamp = now_ms() if log_append_time is None else log_append_time
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    if codec:
        payload = _codec.compress(codec, payload, compression_level)
    if last_offset_delta is None:
        last_offset_delta = count - 1 if count else 0
    header = _pack_header(base_offset, BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + len(payload),
                          partition_leader_epoch, 2, 0, attributes, last_offset_delta,
                          base_timestamp, max_timestamp, producer_id, producer_epoch,
                          base_sequence, count)
    checksum = crc.crc32c(payload, crc.crc32c(memoryview(header)[ATTRIBUTES_AT:]))
    return header[:CRC_AT] + UINT32.pack(checksum) + header[CRC_AT + 4:] + payload


def encode_control_batch(control_type: int, *, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int = 0, base_offset: int = 0,
                         timestamp: int | None = None, partition_leader_epoch: int = -1) -> bytes:
    """A COMMIT (1) or ABORT (0) transaction marker batch, as Kafka's
    ``MemoryRecords.withEndTransactionMarker`` writes it."""
    check_int(control_type, "control_type", INT16_RANGE)
    check_int(coordinator_epoch, "coordinator_epoch", COORDINATOR_EPOCH_RANGE)
    key = CONTROL_KEY.pack(0, control_type)
    value = END_TXN_MARKER.pack(0, coordinator_epoch)
    ts = now_ms() if timestamp is None else timestamp
    return encode_batch([Record(value, key, ts)], base_offset=base_offset,
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        partition_leader_epoch=partition_leader_epoch,
                        is_transactional=True, is_control=True)


# -- in-place rewrites (the log assigns offsets and stamps epochs) ------------------

def set_base_offset(buf: bytearray, position: int, base_offset: int) -> None:
    """Rewrite a v2 batch's base offset. Not covered by the CRC, so no recompute. O(1)."""
    INT64.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray, position: int, epoch: int) -> None:
    """Rewrite a v2 batch's partition leader epoch (outside the CRC). O(1)."""
    INT32.pack_into(buf, position + LEADER_EPOCH_AT, epoch)


def set_log_append_time(buf: bytearray, position: int, size: int, timestamp: int) -> None:
    """Mark a v2 batch LogAppendTime with max timestamp ``timestamp``; recomputes the CRC. O(size)."""
    attr_pos = position + ATTRIBUTES_AT
    attributes = int.from_bytes(buf[attr_pos:attr_pos + 2], "big") | ATTR_TIMESTAMP_TYPE
    buf[attr_pos:attr_pos + 2] = attributes.to_bytes(2, "big")
    INT64.pack_into(buf, position + MAX_TIMESTAMP_AT, timestamp)
    UINT32.pack_into(buf, position + CRC_AT, crc.crc32c(memoryview(buf)[attr_pos:position + size]))
