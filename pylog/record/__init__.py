"""Kafka's record format: batch v2 encode/decode, legacy v0/v1 reading, codecs,
columnar decode. See docs/format/batch.md."""

from pylog.record.batch import RecordBatch, decode_batches, decode_v2_records
from pylog.record.compression import CODEC_NAMES
from pylog.record.encode import (
    build_batch, encode_batch, encode_control_batch, set_base_offset, set_log_append_time,
    set_partition_leader_epoch,
)
from pylog.record.legacy import LegacyBatch
from pylog.record.record import ControlRecord, Record, as_record


class Compression:
    """The codec names Kafka defines: ``Compression.GZIP == "gzip"``."""

    NONE = "none"
    GZIP = "gzip"
    SNAPPY = "snappy"
    LZ4 = "lz4"
    ZSTD = "zstd"
    ALL = CODEC_NAMES


__all__ = [
    "Compression", "ControlRecord", "LegacyBatch", "Record", "RecordBatch", "build_batch",
    "decode_batches", "decode_v2_records", "encode_batch", "encode_control_batch",
    "set_base_offset", "set_log_append_time", "set_partition_leader_epoch", "as_record",
]
