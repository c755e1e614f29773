"""Codec: encode, decode to objects, columnar decode, side by side with kafka-python,
on 1,000-record batches of 100-byte values."""

from __future__ import annotations

import os

from benches.conftest import best_of, record_ratio
from pylog import decode_batches, encode_batch
from pylog.record.columnar import decode_columns

VALUES = [os.urandom(100) for _ in range(1000)]
RAW = encode_batch(VALUES, timestamp=1_700_000_000_000)


def kp_encode():
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i, v in enumerate(VALUES):
        b.append(i, 1_700_000_000_000, None, v, [])
    return b.build()


def kp_decode():
    from kafka.record.default_records import DefaultRecordBatch
    return [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(bytearray(RAW))]


def test_encode(benchmark):
    benchmark(encode_batch, VALUES, timestamp=1_700_000_000_000)
    ours = best_of(lambda: encode_batch(VALUES, timestamp=1_700_000_000_000), 20, 5)
    theirs = best_of(kp_encode, 5, 2)
    record_ratio("encode 1,000 x 100 B vs kafka-python builder", theirs / ours, 3.0,
                 f"{ours * 1e6:.0f} us vs {theirs * 1e6:.0f} us")


def test_decode_objects(benchmark):
    decode = lambda: [(r.offset, r.timestamp, r.key, r.value) for b in decode_batches(RAW) for r in b]  # noqa: E731
    benchmark(decode)
    ours = best_of(decode, 10, 3)
    theirs = best_of(kp_decode, 5, 2)
    record_ratio("decode to objects vs kafka-python", theirs / ours, 1.5,
                 f"{ours * 1e6:.0f} us vs {theirs * 1e6:.0f} us")


def test_decode_columnar(benchmark):
    benchmark(decode_columns, RAW)
    ours = best_of(lambda: decode_columns(RAW), 20, 5)
    theirs = best_of(kp_decode, 5, 2)
    record_ratio("columnar decode vs kafka-python record decoding", theirs / ours, 5.0,
                 f"{ours * 1e6:.0f} us vs {theirs * 1e6:.0f} us")
