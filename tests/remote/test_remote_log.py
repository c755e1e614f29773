"""A Kafka log dir copied to a bucket reads as it reads on disk: RemoteLog and RemoteLogDir
against the loopback S3 endpoint, compared with the local Log over the same files."""

from __future__ import annotations

import random

import pytest

import pylog
from pylog.errors import LogDirNotFoundError, OffsetOutOfRangeError, ReadOnlyError
from pylog.remote.log import RemoteLog
from pylog.remote.log_dir import RemoteLogDir

SEGMENT_BYTES = 4096


def _fill(root) -> None:
    """Two topics; ``events-0`` has several segments, headers, a committed and an aborted
    transaction, an open one at its end, and a log start moved by delete_records."""
    with pylog.LogManager(root, segment_bytes=SEGMENT_BYTES, index_interval_bytes=256) as m:
        m.create_topic("events", partitions=2)
        m.create_topic("other", partitions=1)
        log = m.log("events", 0)
        ts = 1_700_000_000_000
        for i in range(300):
            log.append([pylog.Record(b"v%d" % i * 5, key=b"k%d" % (i % 7), timestamp=ts + i * 10,
                                     headers=[("h", b"%d" % i)])])
        for pid, commit in ((7, True), (8, False)):
            log.append([pylog.Record(b"txn-%d" % pid, timestamp=ts + 5000)], producer_id=pid, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
            log.append_txn_marker(pid, 0, commit=commit)
        log.append([pylog.Record(b"after", timestamp=ts + 6000)])
        log.append([pylog.Record(b"open", timestamp=ts + 7000)], producer_id=9, producer_epoch=0,
                   base_sequence=0, is_transactional=True)
        log.append([pylog.Record(b"last", timestamp=ts + 8000)])
        log.delete_records(3)
        m.log("events", 1).append([b"one", b"two"])
        m.log("other", 0).append([(b"k", b"v")])


def _fields(records) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in records]


@pytest.fixture(scope="module")
def copied(s3, tmp_path_factory):
    """A pylog log dir on disk and the same files in a bucket: (local root, URL)."""
    root = tmp_path_factory.mktemp("remote-log") / "data"
    _fill(root)
    url = s3.url(s3.bucket(), "kafka", "data")
    s3.upload_dir(root, url)
    return root, url


def test_a_bucket_url_opens_as_a_read_only_log_dir(s3, copied):
    root, url = copied
    with pylog.LogManager(url, read_only=True, storage_options=s3.storage_options) as remote:
        assert isinstance(remote, RemoteLogDir)
        assert remote.topics() == ["events", "other"]
        assert remote.partitions("events") == [0, 1]


@pytest.mark.parametrize("isolation", ["uncommitted", "committed"])
def test_every_partition_reads_the_records_of_the_local_log(s3, copied, isolation):
    root, url = copied
    with pylog.LogManager(root, read_only=True) as local, \
            pylog.LogManager(url, read_only=True, storage_options=s3.storage_options) as remote:
        for topic, partition in (("events", 0), ("events", 1), ("other", 0)):
            mine, theirs = remote.log(topic, partition), local.log(topic, partition)
            assert _fields(mine.records(isolation=isolation)) == _fields(theirs.records(isolation=isolation))
            assert (mine.log_start_offset, mine.log_end_offset) == (theirs.log_start_offset, theirs.log_end_offset)
            assert mine.last_stable_offset == theirs.last_stable_offset


def test_the_open_transaction_at_the_end_bounds_committed_reads(s3, copied):
    root, url = copied
    with pylog.Log.open(url + "/events-0", read_only=True, storage_options=s3.storage_options) as log:
        assert isinstance(log, RemoteLog)
        values = [r.value for r in log.records(isolation="committed")]
        assert b"txn-7" in values and b"txn-8" not in values and b"open" not in values
        assert log.last_stable_offset < log.log_end_offset
        assert values[-1] == b"after"


def test_reads_at_random_offsets_and_bounds_equal_the_local_log(s3, copied):
    root, url = copied
    rng = random.Random(31)
    with pylog.Log.open(root / "events-0", read_only=True) as local, \
            pylog.Log.open(url + "/events-0", read_only=True, storage_options=s3.storage_options) as remote:
        for _ in range(40):
            offset = rng.randrange(local.log_start_offset, local.log_end_offset + 1)
            max_bytes = rng.choice([1, 200, 1000, 1 << 20])
            end = rng.randrange(offset, local.log_end_offset + 1)
            a, b = remote.read(offset, max_bytes), local.read(offset, max_bytes)
            assert (a.next_offset, _fields(a.records())) == (b.next_offset, _fields(b.records()))
            assert _fields(remote.records(offset, end)) == _fields(local.records(offset, end))


def test_offset_for_timestamp_equals_the_local_log(s3, copied):
    root, url = copied
    with pylog.Log.open(root / "events-0", read_only=True) as local, \
            pylog.Log.open(url + "/events-0", read_only=True, storage_options=s3.storage_options) as remote:
        base = 1_700_000_000_000
        for ts in (-3, -2, -1, 0, base, base + 15, base + 2995, base + 5000, base + 8000, base + 9000):
            assert remote.offset_for_timestamp(ts) == local.offset_for_timestamp(ts), ts


def test_a_random_read_costs_the_offset_index_then_one_ranged_get(s3, copied):
    root, url = copied
    proxy = s3.faulty()
    with pylog.Log.open(url + "/events-0", read_only=True, storage_options=proxy.storage_options) as log:
        _ = log.log_end_offset
        for seg in log.segments[1:4]:
            proxy.clear()
            offset = seg.base_offset + 5
            assert [r.offset for r in log.read(offset, 200).records()][:1] == [offset]
            assert proxy.count("GET") == 2  # the segment's offset index, then one range of its .log
            assert proxy.count("GET", ".timeindex") == 0
            proxy.clear()
            assert log.read(offset + 1, 100).records()[0].offset == offset + 1
            assert proxy.count("GET") <= 1  # the index is cached; the window may hold the bytes


def test_a_bucket_is_read_only(s3, copied):
    _, url = copied
    with pytest.raises(ReadOnlyError, match="read_only=True"):
        pylog.LogManager(url, storage_options=s3.storage_options)
    with pylog.Log.open(url + "/events-1", read_only=True, storage_options=s3.storage_options) as log:
        with pytest.raises(ReadOnlyError):
            log.append([b"x"])


def test_offsets_outside_the_log_and_missing_partitions_are_clear_errors(s3, copied):
    _, url = copied
    with pylog.Log.open(url + "/events-1", read_only=True, storage_options=s3.storage_options) as log:
        with pytest.raises(OffsetOutOfRangeError, match="events-1"):
            log.read(5)
    with pytest.raises(LogDirNotFoundError, match="no partition found"):
        pylog.Log.open(url + "/events-9", read_only=True, storage_options=s3.storage_options)
