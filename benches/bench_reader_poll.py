"""A long-lived reader polling an idle log at its end: the cost of one poll must not grow
with the number of segments (no directory listing per poll), so the per-poll time at
10,000 segments is compared with the one at 10, in the same run. And what a roll of the
writer costs such a reader, which then lists the directory again: its relist of 10,000
segments against the ``listdir`` alone."""

from __future__ import annotations

import os
import time

from benches.bench_open import _build
from benches.conftest import best_of, record_figure, record_ratio
from pylog import Log

POLLS = 2000


def test_idle_reader_poll_at_the_end_vs_segments(benchmark, tmp_path):
    per_poll_s = {}
    for segments in (10, 10_000):
        path = tmp_path / f"poll{segments}-0"
        _build(path, segments)
        with Log.open(path, read_only=True) as reader:
            end = reader.log_end_offset
            assert len(reader.segments) >= segments and reader.read(end).size_bytes == 0

            def poll(isolation="uncommitted"):
                return reader.read(end, isolation=isolation)
            if segments == 10_000:
                benchmark.pedantic(poll, rounds=20, iterations=100)
            per_poll_s[segments] = best_of(poll, repeat=5, number=POLLS)
            committed = best_of(lambda: poll("committed"), repeat=5, number=POLLS)
            listing = min(_timed(lambda: os.listdir(path)) for _ in range(5))
        record_figure(f"idle reader poll segments={segments}", poll_us=round(per_poll_s[segments] * 1e6, 1),
                      committed_poll_us=round(committed * 1e6, 1), listdir_us=round(listing * 1e6, 1))
    ratio = per_poll_s[10_000] / per_poll_s[10]
    record_ratio("idle reader poll at the end: 10,000 vs 10 segments", ratio, 1.5,
                 f"{per_poll_s[10_000] * 1e6:.1f} us vs {per_poll_s[10] * 1e6:.1f} us", higher_is_better=False)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def test_reader_relist_after_a_roll_vs_listing(benchmark, tmp_path):
    path = tmp_path / "relist-0"
    _build(path, 10_000)
    with Log.open(path, read_only=True) as reader:
        benchmark.pedantic(lambda: reader.refresh(relist=True), rounds=5)
        relist = best_of(lambda: reader.refresh(relist=True), repeat=5)
        assert len(reader.segments) >= 10_000
    listing = best_of(lambda: os.listdir(path), repeat=5)
    record_figure("reader relist segments=10000", relist_ms=round(relist * 1000, 1),
                  listdir_ms=round(listing * 1000, 2))
    record_ratio("a reader's relist after a roll, 10,000 segments, vs listing the directory", relist / listing, 3.0,
                 f"{relist * 1000:.0f} ms vs {listing * 1000:.0f} ms", higher_is_better=False)
