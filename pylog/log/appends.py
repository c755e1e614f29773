"""What an append writes, before the ``Log`` writes it: records encoded as batches, a
client's pre-encoded batches checked and given their offsets, a follower's batches
checked, and the summary of an append (``AppendInfo``). Pure functions of bytes and
config (Kafka's ``LogValidator`` and ``LogAppendInfo``); nothing here touches a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pylog.arguments import check_append_options, check_int, check_records_iterable
from pylog.config import LogConfig
from pylog.errors import (
    CorruptRecordError, IncompleteBatchError, InvalidArgumentError, InvalidOffsetError, InvalidRecordError,
    RecordTooLargeError,
)
from pylog.layout import OFFSET_RANGE
from pylog.record.batch import RecordBatch, decode_batches, increment_sequence
from pylog.record.encode import (
    encode_batch, encode_batch_buffer, set_base_offset, set_log_append_time, set_partition_leader_epoch,
)
from pylog.record.record import as_record


@dataclass(frozen=True)
class AppendInfo:
    """What an append did: offsets assigned, the batch max timestamp, LogAppendTime (-1
    for CreateTime), record count; ``duplicate`` when an idempotent retry wrote nothing."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int
    num_records: int
    size_bytes: int = 0
    duplicate: bool = False


class AppendSummary(NamedTuple):
    """What the batches of one append say, read from their headers. O(batches)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_records: int
    log_append_time: bool
    has_producer: bool  # a batch carries a producer id: producer state must take it in

    @classmethod
    def of(cls, batches: list) -> "AppendSummary":
        if len(batches) == 1 and batches[0].magic == 2:  # the usual append: one batch
            b = batches[0]
            last = b.last_offset
            return cls(b.base_offset, last, max(b.max_timestamp, -1), last, b.record_count,
                       b.timestamp_type == "LogAppendTime", b.producer_id >= 0)
        first, last = batches[0], batches[-1]
        max_ts, offset_of_max = -1, last.last_offset
        for b in batches:
            if b.max_timestamp > max_ts:
                max_ts, offset_of_max = b.max_timestamp, b.last_offset
        return cls(first.base_offset if first.magic == 2 else first.last_offset, last.last_offset, max_ts,
                   offset_of_max, sum(b.record_count if b.magic == 2 else 1 for b in batches),
                   last.magic == 2 and last.timestamp_type == "LogAppendTime",
                   any(b.magic == 2 and b.producer_id >= 0 for b in batches))

    def info(self, size_bytes: int) -> AppendInfo:
        return AppendInfo(self.first_offset, self.last_offset, self.max_timestamp,
                          self.max_timestamp if self.log_append_time else -1, self.num_records, size_bytes)


def duplicate_info(duplicate) -> AppendInfo:
    """The answer to an idempotent retry: ``duplicate`` is ``(batch, (first, last))`` as
    ``ProducerStateManager.validate`` returns it."""
    batch, (first_offset, last_offset) = duplicate
    return AppendInfo(first_offset, last_offset, batch.max_timestamp, -1, batch.record_count, 0, duplicate=True)


def check_offset(value, name: str) -> None:
    check_int(value, name, OFFSET_RANGE, error=InvalidOffsetError)


def whole_batches(data) -> list:
    """The batches of appended bytes; bytes that end inside a batch, or hold none, are refused."""
    try:
        batches = list(decode_batches(data))
    except IncompleteBatchError as e:
        raise CorruptRecordError(f"appended bytes end inside a batch: {e.reason}", position=e.position) from None
    if not batches:
        raise InvalidRecordError("nothing to append: no batch in the given bytes")
    return batches


def checked_records(records, **options) -> list:
    """``records`` as a non-empty list, the options of ``Log.append`` checked;
    :class:`InvalidArgumentError` otherwise."""
    if type(records) is not list:  # a list is taken as it is: one encoder call reads it, under the log's lock
        check_records_iterable(records)
        records = list(records)
    check_append_options(**options)
    if not records:
        raise InvalidArgumentError("cannot append an empty list of records")
    timestamp = options.get("timestamp")
    if isinstance(timestamp, list) and len(timestamp) != len(records):
        raise InvalidArgumentError(f"timestamp: a list of {len(timestamp)} create times for {len(records)} records")
    return records


def encode_records(records: list, config: LogConfig, *, base_offset: int, leader_epoch: int, now: int, codec: str,
                   timestamp: int | list | None, producer_id: int, producer_epoch: int, base_sequence: int,
                   is_transactional: bool) -> tuple[bytes, list[RecordBatch]]:
    """``records`` as batches from ``base_offset`` on, and those batches: one batch, halved
    again and again while one would pass ``max_message_bytes``. ``timestamp``: the create
    time of records without one (one for all, or a list with one per record; None: ``now``).
    O(bytes)."""
    ts_type = "LogAppendTime" if config.message_timestamp_type == "LogAppendTime" else "CreateTime"
    if config.compact:
        for r in records:
            if as_record(r).key is None:
                raise InvalidRecordError("compacted topic cannot accept a record without a key")
    out, pending = [], [(0, len(records))]
    base, seq = base_offset, base_sequence
    while pending:
        lo, hi = pending.pop(0)
        group = records if hi - lo == len(records) else records[lo:hi]
        stamps = now if timestamp is None else timestamp
        if isinstance(timestamp, list) and hi - lo < len(records):
            stamps = timestamp[lo:hi]
        raw = encode_batch_buffer(group, base_offset=base, compression=codec, timestamp_type=ts_type,
                                  timestamp=stamps, log_append_time=now,
                                  producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=seq,
                                  partition_leader_epoch=leader_epoch, is_transactional=is_transactional)
        if len(raw) > config.max_message_bytes:
            if len(group) == 1:
                raise RecordTooLargeError(f"a record of {len(raw)} bytes (as a batch) exceeds max_message_bytes "
                                          f"{config.max_message_bytes}")
            mid = (lo + hi) // 2
            pending[:0] = [(lo, mid), (mid, hi)]
            continue
        out.append(raw)
        base += len(group)
        if seq >= 0:
            seq = increment_sequence(seq, len(group))
    if len(out) == 1:
        return out[0], [RecordBatch(out[0])]
    data = b"".join(out)
    return data, list(decode_batches(data))


def client_batches(raw, max_message_bytes: int) -> tuple[bytearray, list[RecordBatch]]:
    """A client's pre-encoded bytes and their batches: magic 2, CRC valid, no control
    batch, offset range matching the record count, none above ``max_message_bytes``."""
    data = bytearray(raw)
    batches = whole_batches(data)
    for b in batches:
        if b.magic != 2:
            raise InvalidRecordError(f"pylog appends magic-2 batches only; found magic {b.magic}",
                                     position=b.position)
        b.ensure_valid()
        if b.is_control:
            raise InvalidRecordError("clients may not append control batches", position=b.position)
        if b.record_count <= 0 or b.last_offset_delta + 1 != b.record_count:
            raise InvalidRecordError(
                f"batch offset range ({b.last_offset_delta + 1}) does not match its record count "
                f"({b.record_count})", position=b.position)
        if b.size > max_message_bytes:
            raise RecordTooLargeError(f"batch of {b.size} bytes exceeds max_message_bytes {max_message_bytes}")
    return data, batches


def assign_offsets(data: bytearray, batches: list, config: LogConfig, *, base_offset: int, leader_epoch: int,
                   now: int) -> bytes:
    """Client batches recompressed to ``compression`` if the topic sets one, given offsets
    from ``base_offset``, the leader epoch and (LogAppendTime) ``now``. O(bytes)."""
    target = config.target_compression
    if target is not None and any(b.compression != target for b in batches):
        data = bytearray(b"".join(_recompress(b, target) for b in batches))
        batches = list(decode_batches(data))
    offset = base_offset
    for b in batches:
        set_base_offset(data, b.position, offset)
        set_partition_leader_epoch(data, b.position, leader_epoch)
        if config.message_timestamp_type == "LogAppendTime":
            set_log_append_time(data, b.position, b.size, now)
        offset += b.last_offset_delta + 1
    return bytes(data)


def check_follower_batches(batches: list, expected_offset: int) -> None:
    """A follower's batches: CRCs valid, offsets increasing from ``expected_offset`` on."""
    for b in batches:
        b.ensure_valid()
        if b.base_offset < expected_offset or b.last_offset < b.base_offset:
            raise InvalidOffsetError(
                f"follower batch at offset {b.base_offset} is below the expected next offset {expected_offset}")
        expected_offset = b.last_offset + 1


def _recompress(batch: RecordBatch, codec: str) -> bytes:
    return encode_batch(batch.records(), compression=codec, timestamp_type=batch.timestamp_type,
                        log_append_time=batch.max_timestamp, producer_id=batch.producer_id,
                        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                        is_transactional=batch.is_transactional)
