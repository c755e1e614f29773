"""Opening: clean open, unclean recovery and read-only open time vs number of segments
(10 .. 10,000), and a clean and a read-only open of 10,000 segments against listing the
directory."""

from __future__ import annotations

import os
import time

import pytest

from benches.conftest import record_figure, record_ratio
from pylog import Log
from pylog.layout import CLEAN_SHUTDOWN_FILE


def _build(path, segments):
    with Log.open(path, segment_bytes=300) as log:
        for _ in range(segments):
            log.append([b"x" * 200])


@pytest.mark.parametrize("segments", [10, 100, 1000, 10_000])
def test_open_and_recovery_vs_segments(benchmark, tmp_path, segments):
    path = tmp_path / "o-0"
    _build(path, segments)
    benchmark.pedantic(lambda: Log.open(path).close(), rounds=1)
    clean = min(_timed_open(path) for _ in range(3))
    os.remove(tmp_path / CLEAN_SHUTDOWN_FILE)
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    t = time.perf_counter()
    Log.open(path)._dir.unlock()  # recovers every segment, then "dies"
    unclean = time.perf_counter() - t
    read_only = min(_timed_open(path, read_only=True) for _ in range(3))
    listing = min(_timed(lambda: os.listdir(path)) for _ in range(5))
    record_figure(f"open segments={segments}", clean_ms=round(clean * 1000, 1),
                  unclean_ms=round(unclean * 1000, 1), read_only_ms=round(read_only * 1000, 1),
                  listdir_ms=round(listing * 1000, 2))
    if segments == 10_000:
        record_ratio("clean open of 10,000 segments vs listing the directory", clean / listing, 3.0,
                     f"{clean * 1000:.0f} ms vs {listing * 1000:.0f} ms", higher_is_better=False)
        record_ratio("read-only open of 10,000 segments vs listing the directory", read_only / listing, 3.0,
                     f"{read_only * 1000:.0f} ms vs {listing * 1000:.0f} ms", higher_is_better=False)


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _timed_open(path, *, read_only=False):
    t = time.perf_counter()
    log = Log.open(path, read_only=read_only)
    elapsed = time.perf_counter() - t
    log.close()
    return elapsed
