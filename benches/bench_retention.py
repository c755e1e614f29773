"""Compaction throughput (MB/s of input) and peak memory on a log with many distinct keys
(64 MB / 200k keys by default; PYLOG_BENCH_LARGE=1: 1 GB / 1M keys), and a retention pass
over 10,000 segments."""

from __future__ import annotations

import os
import resource
import time
import tracemalloc

from benches.conftest import LARGE, record_figure
from pylog import Log, Record

INPUT_BYTES = (1 << 30) if LARGE else (64 << 20)
KEYS = 1_000_000 if LARGE else 200_000


def test_compaction_throughput_and_memory(benchmark, tmp_path):
    path = tmp_path / "c-0"
    value = b"v" * 100
    now = int(time.time() * 1000)
    per_batch = 1000
    with Log.open(path, cleanup_policy="compact", segment_bytes=64 << 20, min_cleanable_dirty_ratio=0.0,
                  file_delete_delay_ms=0) as log:
        i = 0
        while log.size_bytes < INPUT_BYTES:
            log.append([Record(value, key=b"key-%08d" % ((i + j) % KEYS), timestamp=now) for j in range(per_batch)])
            i += per_batch
        log.roll()
        size = log.size_bytes
        tracemalloc.start()
        t = time.perf_counter()
        result = benchmark.pedantic(lambda: log.compact(force=True), rounds=1)
        secs = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    record_figure("compaction", input_mb=round(size / 1e6), keys=KEYS, mb_per_s=round(size / 1e6 / secs, 1),
                  peak_python_mb=round(peak / 1e6, 1), passes=result.passes,
                  max_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def test_retention_pass_over_10000_segments(benchmark, tmp_path):
    path = tmp_path / "r-0"
    now = int(time.time() * 1000)
    with Log.open(path, segment_bytes=300, retention_ms=3_600_000, file_delete_delay_ms=0) as log:
        for i in range(10_000):
            log.append([Record(b"x" * 200, timestamp=now - 7_200_000 + i * 500)])
        t = time.perf_counter()
        removed = benchmark.pedantic(lambda: log.enforce_retention(now), rounds=1)
        secs = time.perf_counter() - t
        t = time.perf_counter()
        log.enforce_retention(now)
        idle = time.perf_counter() - t
    record_figure("retention pass over 10,000 segments", seconds=round(secs, 2), segments_removed=len(removed),
                  second_pass_ms=round(idle * 1000, 1))
    assert os.path.isdir(path)
