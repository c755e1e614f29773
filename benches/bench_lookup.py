"""Lookup latency: random ``read(offset)`` and ``offset_for_timestamp`` on logs of 10k, 100k,
1M records (10M with PYLOG_BENCH_LARGE=1). The curve must be flat."""

from __future__ import annotations

import random
import time

import pytest

from benches.conftest import LARGE, record_figure, record_ratio
from pylog import Log, Record

SIZES = [10_000, 100_000, 1_000_000] + ([10_000_000] if LARGE else [])
LATENCY: dict[int, tuple[float, float]] = {}


def _build(path, n):
    values = [b"x" * 100] * 1000
    with Log.open(path, segment_bytes=256 << 20) as log:
        for b in range(n // 1000):
            log.append([Record(v, timestamp=1_000_000 + b * 1000 + i) for i, v in enumerate(values)]
                       if b % 100 == 0 else values, timestamp=1_000_000 + b * 1000)
    return path


@pytest.mark.parametrize("n", SIZES)
def test_random_lookup_latency(benchmark, tmp_path, n):
    path = _build(tmp_path / "l-0", n)
    rng = random.Random(1)
    with Log.open(path, read_only=True) as log:
        offsets = [rng.randrange(n) for _ in range(2000)]
        stamps = [1_000_000 + rng.randrange(n) for _ in range(500)]
        benchmark.pedantic(lambda: log.read(offsets[0], 4096).records(), rounds=10)
        for o in offsets[:200]:
            log.read(o, 4096)  # warm the indexes
        t = time.perf_counter()
        for o in offsets:
            log.read(o, 4096).records()
        read_us = (time.perf_counter() - t) / len(offsets) * 1e6
        t = time.perf_counter()
        for s in stamps:
            log.offset_for_timestamp(s)
        ts_us = (time.perf_counter() - t) / len(stamps) * 1e6
    LATENCY[n] = (read_us, ts_us)
    record_figure(f"lookup n={n:,}", read_offset_us=round(read_us, 1), offset_for_timestamp_us=round(ts_us, 1))
    small, large = min(LATENCY), max(LATENCY)
    if n == max(SIZES) and small != large:
        record_ratio(f"read(offset) latency {large:,} vs {small:,} records",
                     LATENCY[large][0] / LATENCY[small][0], 1.5, higher_is_better=False)
