"""What reads of a remote segment cost, counted at the loopback S3 endpoint's proxy: a
sequential scan fetches each byte of the ``.log`` about once, in a few large ranges; a
random read costs one ranged GET (two when the batch sought lies far past its index entry)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import random

import pytest

import pylog
from tests.waiting import wait_until

BATCHES, RECORDS_PER_BATCH, VALUE_BYTES = 60, 10, 10_000  # 100 KB batches, a 6 MB segment


@pytest.fixture(scope="module")
def segment_url(s3, tmp_path_factory):
    """One partition of one 6 MB segment of 100 KB batches, in a bucket."""
    root = tmp_path_factory.mktemp("remote-reads") / "data"
    values = [os.urandom(VALUE_BYTES) for _ in range(RECORDS_PER_BATCH)]
    with pylog.Log.open(root / "big-0", config={"segment_bytes": 64 << 20}) as log:
        for _ in range(BATCHES):
            log.append(values)
    url = s3.url(s3.bucket(), "data")
    s3.upload_dir(root, url)
    return url + "/big-0"


def _log_gets(proxy) -> list[tuple[int, int]]:
    """The byte ranges [start, end) of the GETs of the ``.log`` the proxy saw."""
    out = []
    for r in proxy.requests:
        if r.method == "GET" and r.path.endswith(".log") and r.range:
            first, last = r.range.removeprefix("bytes=").split("-")
            out.append((int(first), int(last) + 1))
    return out


@pytest.mark.parametrize("scan", ["records", "read_arrow"])
def test_a_sequential_scan_fetches_each_byte_once_in_a_few_large_ranges(s3, segment_url, scan):
    proxy = s3.faulty()
    with pylog.Log.open(segment_url, read_only=True, storage_options=proxy.storage_options) as log:
        size = log.segments[0].size_bytes
        _ = log.log_end_offset, log.segments[0].offset_index()
        proxy.clear()
        if scan == "records":
            assert sum(1 for _ in log.records(max_bytes=1 << 20)) == BATCHES * RECORDS_PER_BATCH
        else:
            assert log.read_arrow(max_bytes=1 << 20).num_rows == BATCHES * RECORDS_PER_BATCH
    ranges = _log_gets(proxy)
    assert sum(end - start for start, end in ranges) <= size * 1.1, ranges
    assert len(ranges) <= 3, ranges  # 1 MB first, then twice as much each time


def test_a_random_read_in_a_segment_of_large_batches_costs_one_ranged_get(s3, segment_url):
    proxy = s3.faulty()
    rng = random.Random(31)
    with pylog.Log.open(segment_url, read_only=True, storage_options=proxy.storage_options) as log:
        _ = log.log_end_offset, log.segments[0].offset_index()
        for offset in rng.sample(range(log.log_end_offset), 10):
            proxy.clear()
            assert log.read(offset, 1 << 20).records()[0].offset <= offset
            assert proxy.count() == 1, proxy.requests


def test_a_scan_fetches_its_next_range_while_the_caller_reads_the_last(s3, segment_url):
    proxy = s3.faulty()
    with pylog.Log.open(segment_url, read_only=True, storage_options=proxy.storage_options) as log:
        _ = log.log_end_offset
        proxy.clear()
        records = log.records(max_bytes=1 << 20)
        for _ in range(20 * RECORDS_PER_BATCH):
            next(records)  # the first two reads: the second one continues the first's window
        consumed_to = log.segments[0].size_bytes * 20 // BATCHES  # where the 20 batches read so far end
        wait_until(lambda: any(start >= consumed_to for start, _ in _log_gets(proxy)),
                   "a range past the bytes read so far fetched ahead, while nothing more is read")
        assert sum(1 for _ in records) + 20 * RECORDS_PER_BATCH == BATCHES * RECORDS_PER_BATCH
    ranges = _log_gets(proxy)
    assert sum(end - start for start, end in ranges) <= log.segments[0].size_bytes * 1.1, ranges


def test_a_scan_from_the_log_start_fetches_its_second_range_while_the_caller_reads_the_first(s3, segment_url):
    proxy = s3.faulty()
    with pylog.Log.open(segment_url, read_only=True, storage_options=proxy.storage_options) as log:
        _ = log.log_end_offset
        proxy.clear()
        records = log.records(max_bytes=1 << 20)
        assert next(records).offset == 0
        first_end = min(_log_gets(proxy))[1]  # the first read's range, from 0
        wait_until(lambda: any(start == first_end for start, _ in _log_gets(proxy)),
                   "the second range fetched ahead, while nothing more is read")
        assert sum(1 for _ in records) + 1 == BATCHES * RECORDS_PER_BATCH


_SCAN_THEN_EXIT = """
import sys
import pylog
options = {**OPTIONS, "config_kwargs": {"read_timeout": 120}}
with pylog.Log.open(URL, read_only=True, storage_options=options) as log:
    records = log.records(max_bytes=1 << 20)
    next(records)
    print("first read done", flush=True)
    sys.stdin.readline()
    for _ in range(20 * RECORDS_PER_BATCH):
        next(records)  # the next reads: the first fetched ahead, it fetches the next range ahead
    print("second read done", flush=True)
"""


def _line_within(child, timeout_s: float) -> str:
    """The child's next line, or a failure when none comes within ``timeout_s`` (never a hang)."""
    ready, _, _ = select.select([child.stdout], [], [], timeout_s)
    assert ready, f"no line from the child within {timeout_s} s"
    return child.stdout.readline()


def _ahead_fetch_sent(proxy) -> bool:
    """Whether a ``.log`` GET starts where the earlier ones end (the range fetched ahead)."""
    ranges = [tuple(int(x) for x in r.range.split("=")[1].split("-")) for r in proxy.requests
              if r.method == "GET" and ".log" in r.path and r.range]
    return any(start == end + 1 for i, (start, _) in enumerate(ranges) for _, end in ranges[:i])


def test_a_process_exits_while_its_scan_fetches_ahead_from_a_stalled_store(s3, segment_url):
    proxy = s3.faulty()
    code = (f"OPTIONS = {proxy.storage_options!r}\nURL = {segment_url!r}\nRECORDS_PER_BATCH = {RECORDS_PER_BATCH}\n"
            + _SCAN_THEN_EXIT)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "first read done\n"
        wait_until(lambda: _ahead_fetch_sent(proxy), "the range after the first read to be fetched ahead")
        # only GETs sent from now on stall: the second read's bytes, fetched ahead, still arrive
        proxy = s3.faulty(s3.Fault("stall", times=float("inf"), method="GET", path=".log", stall_s=120))
        child.stdin.write("go\n")
        child.stdin.flush()
        assert _line_within(child, 60) == "second read done\n"
        wait_until(lambda: proxy.count("GET", ".log", answer="stall") == 1, "the range fetched ahead stalled")
        assert child.wait(timeout=60) == 0  # not held until the stalled fetch gives up (120 s)
    finally:
        child.kill()
        s3.faulty()
