"""A log whose oldest segments are only in object storage reads as one partition: reads,
records, offsets and ListOffsets below the local log start fall through to the remote
segments (``Log.remote``), as Kafka's consumer sees a tiered partition."""

from __future__ import annotations

import shutil

import pytest

import pylog
from pylog.remote.log_dir import RemoteLogDir

BASE_TS = 1_700_000_000_000


def _records(log, **kwargs) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.timestamp) for r in log.records(**kwargs)]


@pytest.fixture
def tiered(s3, tmp_path):
    """``events-0`` with 6 segments; the first 3 copied to a bucket (as a log dir), then
    deleted locally. Returns (local log, its records before, remote part)."""
    root = tmp_path / "data"
    with pylog.Log.open(root / "events-0", segment_bytes=2048, index_interval_bytes=128) as log:
        for i in range(120):
            log.append([pylog.Record(b"value-%03d" % i * 4, key=b"k%d" % i, timestamp=BASE_TS + i * 100)])
        everything = _records(log)
        copied = log.segments[:3]
        upload = tmp_path / "upload" / "events-0"
        upload.mkdir(parents=True)
        for seg in copied:
            for path in seg.paths():
                shutil.copy(path, upload)
        local_start = log.segments[3].base_offset
    url = s3.url(s3.bucket(), "tiered")
    s3.upload_dir(tmp_path / "upload", url)
    log = pylog.Log.open(root / "events-0")
    log.delete_records(local_start)
    remote_dir = RemoteLogDir(url, storage_options=s3.storage_options)
    log.remote = remote_dir.log("events", 0)
    yield log, everything, local_start
    log.close()
    remote_dir.close()


def test_records_from_the_start_come_from_both_parts_with_no_gap_or_duplicate(tiered):
    log, everything, local_start = tiered
    assert log.local_log_start_offset == local_start > 0
    assert log.log_start_offset == 0
    assert _records(log) == everything
    assert _records(log, start_offset=local_start - 3, end_offset=local_start + 3) == \
        everything[local_start - 3:local_start + 3]


def test_a_read_below_the_local_start_stops_where_the_local_part_begins(tiered):
    log, everything, local_start = tiered
    fetch = log.read(local_start - 2, 1 << 20)
    assert [r.offset for r in fetch.records()] == [local_start - 2, local_start - 1]
    assert fetch.next_offset == local_start


def test_list_offsets_answer_over_both_parts(tiered):
    log, everything, local_start = tiered
    assert log.offset_for_timestamp(-2) == 0
    assert log.offset_for_timestamp(-1) == log.log_end_offset
    assert log.offset_for_timestamp(-3) == everything[-1][0]
    for offset in (0, 5, local_start - 1, local_start, local_start + 7):
        assert log.offset_for_timestamp(BASE_TS + offset * 100) == offset
        assert log.offset_for_timestamp(BASE_TS + offset * 100 - 50) == offset


def test_without_the_remote_part_the_local_start_is_the_start(tiered):
    log, everything, local_start = tiered
    log.remote = None
    assert log.log_start_offset == local_start
    assert _records(log) == everything[local_start:]


def test_a_manager_that_tiers_its_topic_reads_it_whole_after_local_retention(s3, tmp_path):
    url = s3.url(s3.bucket(), "tiered")
    root = tmp_path / "data"
    with pylog.LogManager(root, remote_storage=url, storage_options=s3.storage_options,
                          remote_log_manager_task_interval_ms=3_600_000) as m:
        m.create_topic("events", 1, {"remote_storage_enable": True, "segment_bytes": 2048,
                                     "local_retention_bytes": 2048, "retention_bytes": -1,
                                     "retention_ms": -1})
        log = m.log("events", 0)
        for i in range(100):
            log.append([pylog.Record(b"value-%03d" % i * 4, key=b"k%d" % i, timestamp=BASE_TS + i * 100)])
        everything = _records(log)
        m.tier()
        assert log.local_log_start_offset > 0, "local retention removed the copied segments"
        assert log.log_start_offset == 0
        assert _records(log) == everything
        assert log.offset_for_timestamp(BASE_TS + 100) == 1
    with pylog.LogManager(root, read_only=True, remote_storage=url, storage_options=s3.storage_options) as m:
        assert _records(m.log("events", 0)) == everything


@pytest.fixture
def self_tiered(s3, tmp_path):
    """A log dir that tiered ``events-0`` to a bucket (Aiven's layout) and kept only its
    active segment locally: (root, url, every record)."""
    url = s3.url(s3.bucket(), "tiered")
    root = tmp_path / "data"
    with pylog.LogManager(root, remote_storage=url, storage_options=s3.storage_options,
                          remote_log_manager_task_interval_ms=3_600_000) as m:
        m.create_topic("events", 1, {"remote_storage_enable": True, "segment_bytes": 2048,
                                     "local_retention_bytes": 2048, "retention_bytes": -1, "retention_ms": -1})
        log = m.log("events", 0)
        for i in range(60):
            log.append([pylog.Record(b"value-%03d" % i * 4, timestamp=BASE_TS + i * 100)])
        everything = _records(log)
        m.tier()
    return root, url, everything


def test_a_segment_the_metadata_lists_but_the_store_lost_is_a_corrupt_file_naming_it(s3, self_tiered):
    from pylog.errors import CorruptFileError
    from pylog.remote.store import ObjectStore

    root, url, everything = self_tiered
    store = ObjectStore.from_url(url, s3.storage_options)
    lost = next(k for k in store.list() if k.endswith(".rsm-manifest"))
    store.delete(lost)
    with pylog.LogManager(root, read_only=True, remote_storage=url, storage_options=s3.storage_options) as m:
        with pytest.raises(CorruptFileError, match="listed as copied in __remote_log_metadata.*missing"):
            m.log("events", 0)


def test_with_the_store_down_the_local_part_reads_and_the_remote_part_names_the_object(s3, self_tiered):
    from pylog.errors import StorageError

    root, url, everything = self_tiered
    proxy = s3.faulty()
    options = {**proxy.storage_options, "retries": 1, "config_kwargs": {"retries": {"max_attempts": 1}}}
    with pylog.LogManager(root, read_only=True, remote_storage=url, storage_options=options) as m:
        log = m.log("events", 0)
        local_start = log.local_log_start_offset
        s3.faulty(s3.Fault("error", times=float("inf"), method="GET"))  # the same proxy: every GET fails
        assert _records(log, start_offset=local_start) == everything[local_start:]
        with pytest.raises(StorageError, match=r"s3://.*events-.*\.(log|indexes|rsm-manifest)"):
            list(log.records())
        s3.faulty()  # up again: the remote part reads
        assert _records(log) == everything


def test_kafkas_earliest_local_and_latest_tiered_offsets(tiered):
    log, everything, local_start = tiered
    assert log.offset_for_timestamp(-4) == local_start
    assert log.offset_for_timestamp(-5) == local_start - 1
    log.remote = None
    assert (log.offset_for_timestamp(-4), log.offset_for_timestamp(-5)) == (local_start, None)
