"""Codec: encode, decode to objects, columnar decode, side by side with kafka-python in the
same run, on 1,000-record batches of 100-byte values (uncompressed).

pylog is measured with each backend of ``pylog.record.backend``: its C speedups (``c``),
and the ``numpy`` and pure-``python`` paths a machine without a compiler gets. The session
ends with the table of ratios (benches/conftest.py). Run: ``pytest benches/bench_codec.py --benchmark-only``.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from benches.conftest import best_of, record_ratio
from pylog import decode_batches, encode_batch
from pylog.record import backend
from pylog.record.columnar import decode_columns

TS = 1_700_000_000_000
VALUES = [os.urandom(100) for _ in range(1000)]
PAIRS = [(b"key-%04d" % i, v) for i, v in enumerate(VALUES)]
RAW = encode_batch(VALUES, timestamp=TS)
IMPLS = list(backend.NAMES)


@contextlib.contextmanager
def implementation(name: str):
    if name not in backend.available():
        pytest.skip("pylog._speedups is not built")
    with backend.use(name):
        yield


def kp_encode(items=VALUES, keyed=False):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i, item in enumerate(items):
        if keyed:
            b.append(i, TS, item[0], item[1], [])
        else:
            b.append(i, TS, None, item, [])
    return b.build()


def kp_decode():
    from kafka.record.default_records import DefaultRecordBatch
    return [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(bytearray(RAW))]


def py_decode():
    return [(r.offset, r.timestamp, r.key, r.value) for b in decode_batches(RAW) for r in b]


def _compare(name: str, ours, theirs, goal: float, impl: str):
    mine = best_of(ours, 15, 5)
    peer = best_of(theirs, 7, 2)
    record_ratio(f"{name} [{impl}] vs kafka-python", peer / mine, goal,
                 f"{mine * 1e6:.0f} us vs {peer * 1e6:.0f} us")


def test_kafka_python_encode(benchmark):
    benchmark(kp_encode)


def test_kafka_python_decode(benchmark):
    benchmark(kp_decode)


@pytest.mark.parametrize("impl", IMPLS)
def test_encode_values(benchmark, impl):
    with implementation(impl):
        assert bytes(encode_batch(VALUES, timestamp=TS, partition_leader_epoch=0)) == bytes(kp_encode())
        benchmark(encode_batch, VALUES, timestamp=TS)
        _compare("encode 1,000 x 100 B values", lambda: encode_batch(VALUES, timestamp=TS), kp_encode, 3.0, impl)


@pytest.mark.parametrize("impl", IMPLS)
def test_encode_key_value_pairs(benchmark, impl):
    with implementation(impl):
        assert encode_batch(PAIRS, timestamp=TS, partition_leader_epoch=0) == bytes(kp_encode(PAIRS, True))
        benchmark(encode_batch, PAIRS, timestamp=TS)
        _compare("encode 1,000 (key, value) pairs", lambda: encode_batch(PAIRS, timestamp=TS),
                 lambda: kp_encode(PAIRS, True), 3.0, impl)


@pytest.mark.parametrize("impl", IMPLS)
def test_decode_objects(benchmark, impl):
    with implementation(impl):
        assert py_decode() == kp_decode()
        benchmark(py_decode)
        _compare("decode to Record objects", py_decode, kp_decode, 1.5, impl)


@pytest.mark.parametrize("impl", IMPLS)
def test_decode_columnar(benchmark, impl):
    with implementation(impl):
        assert decode_columns(RAW).values() == VALUES
        benchmark(decode_columns, RAW)
        _compare("columnar decode vs record decoding", lambda: decode_columns(RAW), kp_decode, 5.0, impl)
