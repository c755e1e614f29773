"""Legacy message sets (magic 0 and 1), read-only: plain and compressed wrappers, absolute
(v0) and relative (v1) inner offsets, LogAppendTime wrappers, and their damage cases.
Entries are built with kafka-python's legacy builder, an independent implementation."""

from __future__ import annotations

import struct
import zlib

import pytest

from pylog import CorruptRecordError, InvalidRecordError, decode_batches
from pylog.record.columnar import decode_columns

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


def legacy(magic: int, codec: str, records, wrapper_offset: int | None = None) -> bytes:
    """A kafka-python legacy entry (or entries); ``records`` = (offset, timestamp, key, value)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    b = LegacyRecordBatchBuilder(magic, CODEC_IDS[codec], 1 << 20)
    for off, ts, key, value in records:
        b.append(off, ts if magic else None, key, value)
    raw = bytearray(b.build())
    if wrapper_offset is not None:
        raw[0:8] = struct.pack(">q", wrapper_offset)  # the broker's offset; outside the CRC
    return bytes(raw)


def recrc(raw: bytearray) -> bytes:
    raw[12:16] = struct.pack(">I", zlib.crc32(bytes(raw[16:])) & 0xFFFFFFFF)
    return bytes(raw)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_messages_with_null_key_and_value(magic):
    data = legacy(magic, "none", [(5, 1000, None, b"v"), (6, 1001, b"k", None)])
    batches = list(decode_batches(data))
    assert [b.magic for b in batches] == [magic, magic] and all(b.is_valid() for b in batches)
    recs = [r for b in batches for r in b]
    assert [(r.offset, r.key, r.value) for r in recs] == [(5, None, b"v"), (6, b"k", None)]
    assert [r.timestamp for r in recs] == ([-1, -1] if magic == 0 else [1000, 1001])
    assert batches[0].timestamp_type == ("NoTimestampType" if magic == 0 else "CreateTime")


@pytest.mark.parametrize("codec", ["gzip", "snappy"])  # v0 lz4: the Kafka samples (v0-lz4)
def test_v0_wrapper_inner_offsets_are_absolute(codec):
    data = legacy(0, codec, [(100 + i, None, None, b"m%d" % i) for i in range(3)], wrapper_offset=102)
    (b,) = list(decode_batches(data))
    assert b.is_valid() and b.compression == codec
    assert [r.offset for r in b] == [100, 101, 102]
    assert (b.base_offset, b.last_offset, b.record_count) == (100, 102, 3)
    assert decode_columns(data).timestamp_types.tolist() == [-1, -1, -1]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_v1_wrapper_inner_offsets_are_relative_to_the_wrapper(codec):
    data = legacy(1, codec, [(i, 2000 + i, b"k", b"m%d" % i) for i in range(3)], wrapper_offset=52)
    (b,) = list(decode_batches(data))
    assert [(r.offset, r.timestamp) for r in b] == [(50, 2000), (51, 2001), (52, 2002)]
    assert decode_columns(data).offsets.tolist() == [50, 51, 52]


def test_v1_wrapper_left_at_offset_zero_keeps_inner_offsets():
    data = legacy(1, "gzip", [(i, 1, None, b"x") for i in range(3)])
    assert [r.offset for b in decode_batches(data) for r in b] == [0, 1, 2]


def test_v1_wrapper_with_log_append_time_stamps_every_inner_record():
    raw = bytearray(legacy(1, "gzip", [(i, 10 + i, None, b"x") for i in range(3)], wrapper_offset=2))
    raw[17] |= 0x08  # attributes: LogAppendTime
    raw[18:26] = struct.pack(">q", 999)  # the wrapper's timestamp
    (b,) = list(decode_batches(recrc(raw)))
    assert b.timestamp_type == "LogAppendTime" and [r.timestamp for r in b] == [999, 999, 999]


def test_lz4_magic_0_uses_kafkas_broken_header_checksum_and_still_decodes():
    from pylog.record.compression import compress, decompress
    payload = b"hello lz4 " * 100
    broken = compress(3, payload, magic=0)
    assert broken != compress(3, payload, magic=2)  # only the header checksum byte differs
    assert decompress(3, broken, magic=0) == payload


def test_legacy_crc_mismatch_is_corrupt():
    raw = bytearray(legacy(1, "none", [(0, 1, b"k", b"value")]))
    raw[-1] ^= 1
    (b,) = list(decode_batches(bytes(raw)))
    with pytest.raises(CorruptRecordError, match="crc"):
        b.records()


def test_legacy_key_length_past_the_message_is_invalid():
    raw = bytearray(legacy(1, "none", [(0, 1, b"k", b"value")]))
    raw[26:30] = struct.pack(">i", 1000)  # key length, after offset, size, crc, magic, attributes, ts
    with pytest.raises(InvalidRecordError, match="key length"):
        next(decode_batches(recrc(raw))).records()


def test_legacy_negative_value_length_is_invalid():
    raw = bytearray(legacy(0, "none", [(0, None, None, b"value")]))
    raw[22:26] = struct.pack(">i", -7)  # value length (v0: no timestamp, key length -1 at 18)
    with pytest.raises(InvalidRecordError, match="value length"):
        next(decode_batches(recrc(raw))).records()


def test_legacy_truncated_entry_is_incomplete():
    from pylog import IncompleteBatchError
    data = legacy(1, "none", [(0, 1, None, b"a")]) + legacy(1, "none", [(1, 1, None, b"bb")])[:-2]
    with pytest.raises(IncompleteBatchError) as e:
        list(decode_batches(data))
    assert e.value.valid_bytes == len(legacy(1, "none", [(0, 1, None, b"a")]))


def test_legacy_records_of_a_given_record_type_are_copies_with_their_place():
    from pylog.clients.consumer_record import ConsumerRecord, consumer_record_class
    data = legacy(1, "gzip", [(i, 2000 + i, b"k", b"m%d" % i) for i in range(2)], wrapper_offset=1)
    (b,) = list(decode_batches(data))
    recs = b.records(place=("t", 3), record_type=consumer_record_class(b))
    assert all(isinstance(r, ConsumerRecord) for r in recs)
    assert [(r.offset, r.timestamp, r.key, r.value, r.topic, r.partition, r.timestamp_type, r.leader_epoch)
            for r in recs] == [(0, 2000, b"k", b"m0", "t", 3, "CreateTime", -1),
                               (1, 2001, b"k", b"m1", "t", 3, "CreateTime", -1)]
    assert [r.crc for r in b.records()] == [r.crc for r in b]  # its own records stay LegacyRecords
