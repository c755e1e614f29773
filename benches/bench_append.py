"""Append throughput: batch sizes, value sizes, codecs and flush policies, side by side
with the physical limit (plain buffered writes of the same bytes), kafka-python's encoder,
and SQLite in WAL mode with batched inserts."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from benches.conftest import record_figure, record_ratio
from pylog import Log, encode_batch

TOTAL_BYTES = 16 << 20


def _values(n, size):
    pool = os.urandom(size * min(n, 1000))
    return [pool[(i % 1000) * size:((i % 1000) + 1) * size] for i in range(n)]


def _append_rate(path, values, batches, **cfg):
    with Log.open(path, segment_bytes=1 << 30, **cfg) as log:
        t = time.perf_counter()
        for _ in range(batches):
            log.append(values)
        return time.perf_counter() - t


def _plain_write(path, raw, batches):
    t = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(batches):
            f.write(raw)
    return time.perf_counter() - t


@pytest.mark.parametrize("batch", [1, 100, 1000, 10_000])
@pytest.mark.parametrize("value_size", [100, 1000, 10_000])
def test_append_vs_plain_write(benchmark, tmp_path, batch, value_size):
    if batch * value_size > 20 << 20:
        pytest.skip("batch larger than max_message_bytes")
    values = _values(batch, value_size)
    batches = max(1, min(TOTAL_BYTES // (batch * value_size), 20_000))
    raw = encode_batch(values)
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: _append_rate(tmp_path / f"p{next(counter)}-0", values, batches,
                                            max_message_bytes=64 << 20), rounds=1, iterations=1)
    ours = min(_append_rate(tmp_path / f"q{i}-0", values, batches, max_message_bytes=64 << 20) for i in range(2))
    limit = min(_plain_write(tmp_path / f"plain{i}", raw, batches) for i in range(2))
    mb = batches * batch * value_size / 1e6
    record_figure(f"append batch={batch} value={value_size}B", mb_per_s=round(mb / ours, 1),
                  records_per_s=round(batches * batch / ours), plain_mb_per_s=round(mb / limit, 1))
    if batch == 1000 and value_size == 100:
        record_ratio("append 1,000 x 100 B vs plain buffered write (limit)", limit / ours, 0.4,
                     f"{mb / ours:.0f} MB/s vs {mb / limit:.0f} MB/s")


def test_append_vs_kafka_python_encode(benchmark, tmp_path):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    values = _values(1000, 100)
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: _append_rate(tmp_path / f"a{next(counter)}-0", values, 200), rounds=1)
    ours = _append_rate(tmp_path / "b-0", values, 200) / 200
    t = time.perf_counter()
    for _ in range(20):
        b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        for i, v in enumerate(values):
            b.append(i, 1, None, v, [])
        b.build()
    theirs = (time.perf_counter() - t) / 20
    record_ratio("append 1,000 x 100 B vs kafka-python encode only", theirs / ours, 3.0,
                 f"{ours * 1e6:.0f} us vs {theirs * 1e6:.0f} us per batch")


def test_append_vs_sqlite_wal(benchmark, tmp_path):
    values = _values(1000, 100)
    batches = 200
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: _append_rate(tmp_path / f"s{next(counter)}-0", values, batches), rounds=1)
    ours = _append_rate(tmp_path / "w-0", values, batches)
    db = sqlite3.connect(tmp_path / "q.db")
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=normal")
    db.execute("create table q (id integer primary key, ts integer, value blob)")
    t = time.perf_counter()
    for b in range(batches):
        with db:
            db.executemany("insert into q (ts, value) values (?, ?)", ((b, v) for v in values))
    theirs = time.perf_counter() - t
    db.close()
    record_ratio("append vs SQLite WAL batched insert (1,000 x 100 B)", theirs / ours, 1.0,
                 f"{batches * 1000 / ours:,.0f} vs {batches * 1000 / theirs:,.0f} records/s")


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_append_codecs(benchmark, tmp_path, codec):
    values = [b"%08d-" % i + b"payload " * 11 for i in range(1000)]

    def run(path):
        with Log.open(path) as log:
            t = time.perf_counter()
            for _ in range(100):
                log.append(values, compression=codec)
            return time.perf_counter() - t
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: run(tmp_path / f"c{next(counter)}-0"), rounds=1)
    secs = run(tmp_path / "d-0")
    record_figure(f"append codec={codec}", records_per_s=round(100_000 / secs))


@pytest.mark.parametrize("flush", ["none", "every batch", "every 10,000"])
def test_append_flush_policies(benchmark, tmp_path, flush):
    values = _values(1000, 100)
    flush_messages = {"none": 2**63 - 1, "every batch": 1, "every 10,000": 10_000}[flush]

    def run(path):
        with Log.open(path, flush_messages=flush_messages) as log:
            t = time.perf_counter()
            for _ in range(100):
                log.append(values)
            return time.perf_counter() - t
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: run(tmp_path / f"f{next(counter)}-0"), rounds=1)
    secs = run(tmp_path / "g-0")
    record_figure(f"append flush={flush}", records_per_s=round(100_000 / secs), ms_per_batch=round(secs * 10, 3))
