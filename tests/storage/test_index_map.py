"""Indexes read through a read-only memory map of their file (pylog/index/base.py): the
map is there after a lookup, costs no private memory, is shared between processes, and
the C and pure-Python searches agree."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pylog import Log
from pylog.index import OffsetIndex, TimeIndex
from pylog.index import base
from pylog.layout import INT64_MAX, INT64_MIN

ROOT = Path(__file__).resolve().parents[2]


def mapped_paths() -> set[str]:
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}


def anonymous_bytes() -> int:
    """Private anonymous memory of this process (what a copy of an index would add)."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Anonymous line in smaps_rollup")


def test_a_lookup_maps_the_index_file_and_release_unmaps_it(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, base_offset=100)
    for i in range(1, 1000):
        idx.append(100 + i, 100 * i)
    idx.trim()
    reader = OffsetIndex(path, base_offset=100, writable=False)
    assert str(path) not in mapped_paths()
    assert reader.lookup(555) == (555, 45500)
    assert reader.is_mapped and str(path) in mapped_paths()
    reader.release()
    assert not reader.is_mapped and str(path) not in mapped_paths()
    assert reader.lookup(556) == (556, 45600)  # mapped again on use
    reader.close()
    idx.close()


def test_a_lookup_past_the_map_maps_the_entries_written_since(tmp_path):
    idx = TimeIndex(tmp_path / "00000000000000000000.timeindex", base_offset=0)
    idx.append(1000, 1)
    assert idx.lookup(1500) == (1000, 1)
    for i in range(2, 2000):
        idx.append(1000 * i, i)
        if i % 97 == 0:
            assert idx.lookup(1000 * i + 1) == (1000 * i, i)
    assert idx.lookup(10**12) == (1999000, 1999) and idx.lookup(1500) == (1000, 1)
    idx.close()


@pytest.mark.parametrize("cls, key_bytes", [(OffsetIndex, 4), (TimeIndex, 8)])
def test_c_and_python_searches_agree(cls, key_bytes):
    if base._c_search is None:
        pytest.skip("the C speedups are not built")
    rng = random.Random(7)
    for n in (0, 1, 2, 3, 17, 512, 4097):
        keys = sorted(rng.sample(range(-50, 10 * n + 50), n))
        values = sorted(rng.randrange(-10, 10 * n + 10) for _ in range(n))
        buf = b"".join(cls.entry.pack(k, v) for k, v in zip(keys, values))
        for column in (base.KEY, base.VALUE):
            for target in rng.sample(range(-60, 10 * n + 60), min(40, 10 * n + 120)) + [INT64_MIN, INT64_MAX]:
                for right in (False, True):
                    want = base._search_py(cls.entry, buf, n, column, target, right)
                    assert base._c_search(buf, n, cls.entry.size, column, target, right) == want
        if n > 2:  # the second entry a search reads lies above the first: both say so
            bad = bytearray(buf)
            cls.entry.pack_into(bad, (n // 4) * cls.entry.size, keys[-1] + 1, values[0])
            target = keys[n // 4]
            assert base._search_py(cls.entry, bytes(bad), n, base.KEY, target, True) == -1
            assert base._c_search(bytes(bad), n, cls.entry.size, base.KEY, target, True) == -1


def test_truncation_renames_a_new_file_over_when_a_page_would_go(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, base_offset=0)
    for i in range(1, 1200):  # 9,592 bytes: three pages
        idx.append(i, 10 * i)
    inode = os.stat(path).st_ino
    idx.truncate_to(1100)  # 8,792 bytes: still three pages, cut in place
    assert os.stat(path).st_ino == inode and os.path.getsize(path) == 1099 * 8
    idx.truncate_to(300)  # 2,392 bytes: one page, a new file renamed over
    assert os.stat(path).st_ino != inode and os.path.getsize(path) == 299 * 8
    assert idx.lookup(10**6) == (299, 2990) and len(idx) == 299
    idx.append(300, 3000)
    idx.flush()
    assert OffsetIndex(path, base_offset=0, writable=False).entries()[-2:] == [(299, 2990), (300, 3000)]
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    idx.close()


def test_a_corrupt_middle_entry_is_rebuilt_on_the_lookup_that_reads_it(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, index_interval_bytes=0) as log:
        for i in range(600):
            log.append([b"v%d" % i])
    index = d / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    struct.pack_into(">ii", data, 8 * (len(data) // 16), 5, 999_999)  # an entry out of order
    index.write_bytes(bytes(data))
    for read_only in (True, False):
        with Log.open(d, read_only=read_only) as log:
            assert [r.offset for r in log.read(300, 1).records()][0] == 300
            assert [r.value for r in log.records()] == [b"v%d" % i for i in range(600)]


def _synthetic_log(d, segments: int, entries: int) -> int:
    """A log of ``segments`` small segments whose ``.index`` files hold ``entries`` entries each
    (all naming the segment's first batch, of 10 records): big indexes without millions of
    appends.
    Returns the bytes of index in all."""
    with Log.open(d, segment_bytes=1 << 20) as log:
        for s in range(segments):
            log.append([b"r%d" % i for i in range(10)])
            log.roll()
    index = b"".join(struct.pack(">ii", k, 0) for k in range(1, entries + 1))
    names = sorted(p for p in os.listdir(d) if p.endswith(".index"))
    for name in names[:segments]:
        (d / name).write_bytes(index)
    return segments * len(index)


LOOKUP_EVERY_SEGMENT = """
import gc, os, sys
from pylog import Log
from tests.storage.test_index_map import anonymous_bytes
log = Log.open(sys.argv[1], read_only=True)
gc.collect()
before = anonymous_bytes()
for seg in log.segments[:-1]:
    assert seg.translate_offset(seg.base_offset + 5) is not None
gc.collect()
print(anonymous_bytes() - before, flush=True)
"""


def test_looking_up_one_offset_in_each_segment_costs_no_private_copy_of_its_index(tmp_path):
    d = tmp_path / "t-0"
    index_bytes = _synthetic_log(d, segments=64, entries=65536)  # 32 MiB of .index
    out = subprocess.run([sys.executable, "-c", LOOKUP_EVERY_SEGMENT, str(d)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert out.returncode == 0, out.stderr
    grown = int(out.stdout)
    assert grown < 0.05 * index_bytes, f"private memory grew by {grown} bytes for {index_bytes} of index"


READER_HOLDING_MAPS = """
import sys
from pylog import Log
log = Log.open(sys.argv[1], read_only=True)
for seg in log.segments[:-1]:
    for k in range(1, 65536, 509):  # touch pages all over each index
        seg.translate_offset(seg.base_offset + k % 8)
        seg.offset_index.lookup(seg.base_offset + k)
print("mapped", flush=True)
sys.stdin.readline()  # until every reader holds its maps
rss = shared = 0
with open("/proc/self/smaps") as f:
    current = None
    for line in f:
        parts = line.split()
        if "-" in parts[0] and len(parts) >= 5:
            current = parts[-1] if len(parts) == 6 else None
        elif current and current.endswith(".index") and parts[0] in ("Rss:", "Shared_Clean:"):
            if parts[0] == "Rss:":
                rss += int(parts[1])
            else:
                shared += int(parts[1])
print(rss, shared, flush=True)
sys.stdin.readline()  # holds its maps until told to stop
"""


def test_eight_reader_processes_share_the_index_pages(tmp_path):
    d = tmp_path / "t-0"
    _synthetic_log(d, segments=16, entries=65536)
    readers = [subprocess.Popen([sys.executable, "-c", READER_HOLDING_MAPS, str(d)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(8)]
    try:
        assert [p.stdout.readline() for p in readers] == ["mapped\n"] * 8
        for p in readers:  # all eight hold their maps now: each measures its share
            p.stdin.write("measure\n")
            p.stdin.flush()
        figures = [tuple(map(int, p.stdout.readline().split())) for p in readers]
        for rss_kib, shared_kib in figures:
            assert rss_kib > 0 and shared_kib >= 0.9 * rss_kib, figures
    finally:
        for p in readers:
            p.stdin.close()  # end of input: the reader stops
        for p in readers:
            p.wait(timeout=60)
    assert [p.returncode for p in readers] == [0] * 8, [p.stderr.read() for p in readers]



def test_a_release_leaves_the_map_a_lookup_holds_readable(tmp_path):
    """The bound on open files releases a segment's maps from whichever thread passes it,
    maybe while a lookup in another thread reads them: a release drops the index's
    reference, never unmaps pages a lookup still holds."""
    path = tmp_path / "00000000000000000000.index"
    writer = OffsetIndex(path, base_offset=0)
    for i in range(1, 5000):
        writer.append(i, 10 * i)
    writer.trim()
    idx = OffsetIndex(path, base_offset=0, writable=False)
    held = idx._buffer()  # what a lookup in flight holds
    idx.release()
    assert not idx.is_mapped
    assert base._search_py(OffsetIndex.entry, held, 4999, base.KEY, 2500, True) == 2500
    if base._c_search is not None:
        assert base._c_search(held, 4999, 8, base.KEY, 2500, True) == 2500
    del held
    assert str(path) not in mapped_paths()
    assert idx.lookup(2500) == (2500, 25000)
    writer.close()
