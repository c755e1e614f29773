"""Lookup latency: random ``read(offset)`` and ``offset_for_timestamp`` on logs of 10k, 100k,
1M records (10M with PYLOG_BENCH_LARGE=1). The curve must be flat.

Mapped indexes against the private arrays they replaced (read with ``np.fromfile``, both
columns converted to native int64, checked whole), side by side: the first lookup in a full
10 MiB index, warm lookups, and the private memory of one lookup in each of 10,000 segments."""

from __future__ import annotations

import gc
import os
import random
import struct
import time

import numpy as np
import pytest

from benches.conftest import LARGE, best_of, record_figure, record_ratio
from pylog import Log, Record
from pylog.index import OffsetIndex

SIZES = [10_000, 100_000, 1_000_000] + ([10_000_000] if LARGE else [])
FULL_INDEX_BYTES = 10 * 1024 * 1024
LATENCY: dict[int, tuple[float, float]] = {}
LOGS: dict[int, object] = {}


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
    LATENCY[n], LOGS[n] = (read_us, ts_us), path
    record_figure(f"lookup n={n:,}", read_offset_us=round(read_us, 1), offset_for_timestamp_us=round(ts_us, 1))
    if n == max(SIZES) and len(LOGS) > 1:
        _compare_largest_with_smallest()


def _compare_largest_with_smallest(rounds: int = 5, reads: int = 1000):
    """The flatness ratio from the two logs read in alternating rounds (best round each), so
    that a busy moment of the machine falls on both rather than on one size's single pass."""
    small, large = min(LOGS), max(LOGS)
    best = {small: float("inf"), large: float("inf")}
    with Log.open(LOGS[small], read_only=True) as a, Log.open(LOGS[large], read_only=True) as b:
        for r in range(rounds):
            for n, log in ((small, a), (large, b)):
                rng = random.Random(r)
                offsets = [rng.randrange(n) for _ in range(reads)]
                t = time.perf_counter()
                for o in offsets:
                    log.read(o, 4096).records()
                best[n] = min(best[n], (time.perf_counter() - t) / reads * 1e6)
    record_ratio(f"read(offset) latency {large:,} vs {small:,} records", best[large] / best[small], 1.2,
                 f"{best[large]:.0f} us vs {best[small]:.0f} us, best of {rounds} alternating rounds",
                 higher_is_better=False)


class ArrayIndex:
    """The offset index as it was before the map: on first use the whole file read into
    private native columns (``np.fromfile``, ``astype``), its valid prefix and positions
    checked whole; then ``searchsorted`` on the columns."""

    dtype = np.dtype([("k", ">i4"), ("v", ">i4")])

    def __init__(self, path, base_offset):
        self.path, self.base_offset, self.keys = path, base_offset, None

    def lookup(self, offset):
        if self.keys is None:
            raw = np.fromfile(self.path, dtype=self.dtype, count=os.path.getsize(self.path) // 8)
            keys, vals = raw["k"].astype(np.int64), raw["v"].astype(np.int64)
            bad = np.flatnonzero(keys[1:] <= keys[:-1])
            self.n = int(bad[0]) + 1 if len(bad) else len(keys)
            if self.n > 1 and np.any(np.diff(vals[: self.n]) < 0):
                raise ValueError("positions go backwards")
            self.keys, self.vals = keys, vals
        i = int(np.searchsorted(self.keys[: self.n], offset - self.base_offset, side="right")) - 1
        return (self.base_offset, 0) if i < 0 else (self.base_offset + int(self.keys[i]), int(self.vals[i]))


def _full_index(path) -> int:
    entries = FULL_INDEX_BYTES // 8
    raw = np.empty(entries, ArrayIndex.dtype)
    raw["k"] = np.arange(1, entries + 1)
    raw["v"] = np.arange(entries) * 64
    raw.tofile(path)
    return entries


def test_cold_and_warm_lookups_in_a_full_10mib_index(benchmark, tmp_path):
    path = tmp_path / "00000000000000000000.index"
    entries = _full_index(path)
    rng = random.Random(3)
    targets = [rng.randrange(entries) for _ in range(5000)]

    def first_lookup(cls):
        index = cls(path, 0)
        return index.lookup(targets[0])

    benchmark.pedantic(lambda: first_lookup(lambda p, b: OffsetIndex(p, b, writable=False)), rounds=5)
    assert first_lookup(ArrayIndex) == first_lookup(lambda p, b: OffsetIndex(p, b, writable=False))
    mapped_cold = best_of(lambda: first_lookup(lambda p, b: OffsetIndex(p, b, writable=False)), repeat=20)
    array_cold = best_of(lambda: first_lookup(ArrayIndex), repeat=10)
    mapped, arrays = OffsetIndex(path, 0, writable=False), ArrayIndex(path, 0)
    assert [mapped.lookup(t) for t in targets] == [arrays.lookup(t) for t in targets]
    mapped_warm = best_of(lambda: [mapped.lookup(t) for t in targets], repeat=7) / len(targets)
    array_warm = best_of(lambda: [arrays.lookup(t) for t in targets], repeat=7) / len(targets)
    record_figure("first lookup, full 10 MiB index", mapped_us=round(mapped_cold * 1e6, 1),
                  private_arrays_us=round(array_cold * 1e6, 1))
    record_figure("warm lookup, full 10 MiB index", mapped_us=round(mapped_warm * 1e6, 2),
                  private_arrays_us=round(array_warm * 1e6, 2))
    record_ratio("first lookup in a full 10 MiB index: arrays / map", array_cold / mapped_cold, 10.0,
                 f"{mapped_cold * 1e6:.0f} us vs {array_cold * 1e6:.0f} us")
    record_ratio("warm lookup: arrays / map", array_warm / mapped_warm, 1.0,
                 f"{mapped_warm * 1e6:.2f} us vs {array_warm * 1e6:.2f} us")
    mapped.close()


def _anonymous_bytes() -> int:
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Anonymous:"))


def _index_maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith((".index", ".timeindex")))


def test_one_lookup_in_each_of_10000_segments(benchmark, tmp_path):
    """10,000 segments of one batch each, their ``.index`` files hard links to one 256 KiB
    index (32,768 entries: the disk holds one, the log sees 2.5 GiB of index), so that private
    memory per segment can be set against the index bytes it looks up in."""
    segments, entries = 10_000, 32_768
    d = tmp_path / "m-0"
    with Log.open(d) as log:
        log.append([b"r%d" % i for i in range(10)])
    batch = bytearray((d / "00000000000000000000.log").read_bytes())
    shared_index = tmp_path / "shared.index"
    shared_index.write_bytes(b"".join(struct.pack(">ii", k, 0) for k in range(1, entries + 1)))
    for s in range(segments):
        base = 10 * s
        struct.pack_into(">q", batch, 0, base)  # the base offset is outside the batch's CRC
        (d / f"{base:020d}.log").write_bytes(batch)
        index = d / f"{base:020d}.index"
        index.unlink(missing_ok=True)
        os.link(shared_index, index)
    (d / f"{10 * segments:020d}.log").write_bytes(b"")
    index_bytes = segments * entries * 8
    log = Log.open(d, read_only=True)
    gc.collect()
    before, t = _anonymous_bytes(), time.perf_counter()
    for seg in log.segments[:-1]:
        assert seg.translate_offset(seg.base_offset + 5).last_offset == seg.base_offset + 9
    elapsed = time.perf_counter() - t
    gc.collect()
    grown, maps = _anonymous_bytes() - before, _index_maps()
    benchmark.pedantic(lambda: log.segments[0].translate_offset(5), rounds=3)
    log.close()
    record_figure("one lookup in each of 10,000 segments", private_growth_mib=round(grown / 2**20, 1),
                  index_gib=round(index_bytes / 2**30, 2), index_maps_held=maps,
                  per_segment_us=round(elapsed / segments * 1e6, 1))
    record_ratio("private memory of 10,000 lookups / index bytes (%)", 100 * grown / index_bytes, 5.0,
                 f"{grown / 2**20:.1f} MiB for {index_bytes / 2**30:.2f} GiB of index, {maps} maps held",
                 higher_is_better=False)
