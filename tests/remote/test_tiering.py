"""Tiering: a LogManager with ``remote_storage=`` copies the closed segments of topics with
``remote_storage_enable`` to object storage in the Aiven layout, records them in
``__remote_log_metadata``, deletes local segments only once copied and past local retention,
and applies total retention to what was copied."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from pylog import LogManager
from pylog.config import LogConfig
from pylog.errors import InvalidConfigError, PylogWarning, StorageError
from pylog.remote import aiven
from pylog.remote.log_dir import open_remote_log_metadata
from pylog.remote.store import ObjectStore
from pylog.retention.delete import enforce_retention
from tests.waiting import wait_until


# -- the settings ----------------------------------------------------------------------------------

def test_the_tiering_settings_have_kafkas_names_and_defaults():
    kafka = LogConfig().to_kafka()
    assert {k: kafka[k] for k in ("remote.storage.enable", "local.retention.ms", "local.retention.bytes",
                                  "remote.log.manager.task.interval.ms")} == {
        "remote.storage.enable": "false", "local.retention.ms": "-2", "local.retention.bytes": "-2",
        "remote.log.manager.task.interval.ms": "30000"}
    assert LogConfig.from_kafka({"remote.storage.enable": "true", "local.retention.ms": "1000"}) == LogConfig(
        remote_storage_enable=True, local_retention_ms=1000)


def test_local_retention_minus_two_means_total_retention():
    cfg = LogConfig(retention_ms=5000, retention_bytes=1 << 20)
    assert (cfg.resolved_local_retention_ms, cfg.resolved_local_retention_bytes) == (5000, 1 << 20)
    cfg = cfg.replace(local_retention_ms=100, local_retention_bytes=4096)
    assert (cfg.resolved_local_retention_ms, cfg.resolved_local_retention_bytes) == (100, 4096)


@pytest.mark.parametrize("settings, message", [
    ({"local_retention_ms": -3}, "local_retention_ms must be at least -2"),
    ({"local_retention_bytes": -3}, "local_retention_bytes must be at least -2"),
    ({"remote_log_manager_task_interval_ms": 0}, "remote_log_manager_task_interval_ms must be at least 1"),
    ({"remote_storage_enable": True, "retention_ms": 1000, "local_retention_ms": 2000},
     "local_retention_ms must not be more than retention_ms"),
    ({"remote_storage_enable": True, "retention_ms": 1000, "local_retention_ms": -1},
     "local_retention_ms must not be -1 as retention_ms is 1000"),
    ({"remote_storage_enable": True, "retention_bytes": 1000, "local_retention_bytes": 2000},
     "local_retention_bytes must not be more than retention_bytes"),
    ({"remote_storage_enable": True, "retention_bytes": 1000, "local_retention_bytes": -1},
     "local_retention_bytes must not be -1 as retention_bytes is 1000"),
    ({"remote_storage_enable": True, "cleanup_policy": "compact"}, "compacted topics cannot be tiered"),
])
def test_tiering_settings_kafka_refuses_are_refused(settings, message):
    with pytest.raises(InvalidConfigError, match=message):
        LogConfig(**settings)


def test_local_retention_above_total_retention_is_allowed_while_tiering_is_off():
    assert LogConfig(retention_ms=1000, local_retention_ms=2000).local_retention_ms == 2000


# -- tiering ---------------------------------------------------------------------------------------

TIERED = {"remote_storage_enable": True, "segment_bytes": 1024}
#: One __remote_log_metadata partition: creating Kafka's 50 costs seconds per test.
ONE_METADATA_PARTITION = {"remote_log_metadata_topic_num_partitions": 1}
TASK_THREAD = "pylog-remote-log-manager"


@pytest.fixture
def bucket_url(s3):
    return s3.url(s3.bucket(), "tiered")


def open_tiering(root, url, storage_options, **settings) -> LogManager:
    return LogManager(root, remote_storage=url, storage_options=storage_options, **ONE_METADATA_PARTITION, **settings)


def fill(topic, batches: int = 24, timestamp: int | None = None) -> None:
    for i in range(batches):
        topic.append([(b"key-%d" % i, b"value-%d-" % i + b"x" * 100)], partition=0, timestamp=timestamp)


def live(manager, partition: int = 0) -> list:
    """The partition's live remote segments, as ``__remote_log_metadata`` in the log dir says."""
    return open_remote_log_metadata(manager.root).live_segments("events", partition)


def objects(url, storage_options) -> dict[str, int]:
    return ObjectStore.from_url(url, storage_options).list()


def test_tier_copies_each_closed_segment_in_the_aiven_layout_byte_for_byte(tmp_path, s3, bucket_url):
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        fill(m.create_topic("events", config=TIERED))
        log = m.log("events", 0)
        closed = log.segments[:-1]
        local_bytes = {seg.base_offset: open(seg.log_path, "rb").read() for seg in closed}
        result = m.tier()
        segments = live(m)
        assert result.copied == {("events", 0): [seg.base_offset for seg in closed]}
        assert [(s.start_offset, s.end_offset) for s in segments] == [
            (seg.base_offset, nxt.base_offset - 1) for seg, nxt in zip(closed, log.segments[1:])]
        store = ObjectStore.from_url(bucket_url, s3.storage_options)
        for info in segments:
            keys = {suffix: aiven.object_key("", "events", info.topic_id, 0, info.start_offset, info.segment_id, suffix)
                    for suffix in aiven.SUFFIXES}
            assert store.read(keys["log"]) == local_bytes[info.start_offset]
            assert aiven.read_manifest(store, keys["rsm-manifest"]).compression is False
        assert m.tier().copied == {}  # each segment once
        topic_id = (tmp_path / "events-0" / "partition.metadata").read_text().split("topic_id: ")[1]
        assert segments[0].topic_id_text == topic_id


def test_a_segment_above_the_last_stable_offset_waits_for_its_transaction(tmp_path, s3, bucket_url):
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        topic = m.create_topic("events", config=TIERED)
        log = m.log("events", 0)
        log.append([b"open transaction"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        fill(topic)
        assert log.last_stable_offset == 0
        assert m.tier().copied == {} and live(m) == []
        log.append_txn_marker(7, 0, commit=True)
        fill(topic, 10)
        assert [s.start_offset for s in live(m)] == [] and m.tier().copied != {}
        assert live(m)[-1].end_offset < log.last_stable_offset


def test_local_segments_go_by_local_retention_and_only_once_copied(tmp_path, s3, bucket_url):
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        fill(m.create_topic("events", config={**TIERED, "local_retention_bytes": 2048}))
        log = m.log("events", 0)
        assert enforce_retention(log, now_ms=2**62) == []  # nothing copied yet: nothing goes
        m.tier()
        copied_end = live(m)[-1].end_offset
        assert log.local_log_start_offset > 0
        assert sum(seg.size_bytes for seg in log.segments[:-1]) <= 2048 + 1024
        assert live(m)[0].start_offset == 0 and copied_end == log.segments[-1].base_offset - 1
        assert [r.offset for r in log.records()] == list(range(log.log_end_offset))  # whole, through the remote part


def test_nothing_is_deleted_locally_while_the_store_is_down(tmp_path, s3, bucket_url):
    faulty = s3.faulty(s3.Fault("error", times=float("inf"), method="PUT"))
    options = {**faulty.storage_options, "retries": 1, "config_kwargs": {"retries": {"max_attempts": 1}}}
    with open_tiering(tmp_path, bucket_url, options) as m:
        fill(m.create_topic("events", config={**TIERED, "local_retention_bytes": 0, "retention_ms": 1}))
        log = m.log("events", 0)
        before = [seg.base_offset for seg in log.segments]
        with pytest.raises(StorageError):
            m.tier()
        assert [seg.base_offset for seg in log.segments] == before
        assert live(m) == []
        s3.faulty()  # the store is back
        m.tier(now_ms=0)
        assert [s.start_offset for s in live(m)] == before[:-1]
        assert [seg.base_offset for seg in log.segments] == before[-1:]


def test_total_retention_deletes_remote_segments_and_their_objects(tmp_path, s3, bucket_url):
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        fill(m.create_topic("events", config={**TIERED, "retention_ms": 60_000}), timestamp=1_000_000)
        fill(m.topic("events"), 12, timestamp=2_000_000)
        m.tier(now_ms=1_000_000)
        log = m.log("events", 0)
        copied = live(m)
        old = [s for s in copied if s.max_timestamp_ms < 1_500_000]
        assert old and len(old) < len(copied)
        result = m.tier(now_ms=1_000_000 + 60_001 + 1)
        assert result.deleted_remote == {("events", 0): [s.start_offset for s in old]}
        assert [s.segment_id for s in live(m)] == [s.segment_id for s in copied[len(old):]]
        keys = objects(bucket_url, s3.storage_options)
        assert not any(aiven.parse_object_key(k).segment_id == s.segment_id_text for k in keys for s in old)
        assert log.local_log_start_offset >= old[-1].end_offset + 1
    metadata = open_remote_log_metadata(tmp_path)
    assert [s.start_offset for s in metadata.live_segments("events", 0)] == [s.start_offset for s in copied[len(old):]]


def test_appends_do_not_wait_for_an_upload(tmp_path, s3, bucket_url):
    faulty = s3.faulty(s3.Fault("stall", method="PUT", path=".log", stall_s=5))
    with open_tiering(tmp_path, bucket_url, faulty.storage_options) as m:
        fill(m.create_topic("events", config=TIERED))
        log = m.log("events", 0)
        tiering = threading.Thread(target=m.tier)
        tiering.start()
        wait_until(lambda: faulty.count("PUT", ".log") >= 1, "the first upload to stall")
        end = log.append([b"while the upload stalls"]).last_offset
        assert tiering.is_alive(), "the append waited for the upload"
        tiering.join()
        assert end == log.log_end_offset - 1 and live(m)


def test_the_background_task_tiers_every_interval_and_stops_on_close(tmp_path, s3, bucket_url):
    m = open_tiering(tmp_path, bucket_url, s3.storage_options, remote_log_manager_task_interval_ms=20)
    fill(m.create_topic("events", config=TIERED))
    wait_until(lambda: len(live(m)) == len(m.log("events", 0).segments) - 1, "the task to copy the closed segments")
    assert [t.name for t in threading.enumerate()].count(TASK_THREAD) == 1
    m.close()
    assert TASK_THREAD not in [t.name for t in threading.enumerate()]


def test_tier_without_remote_storage_says_so(tmp_path):
    with LogManager(tmp_path) as m:
        with pytest.raises(InvalidConfigError, match="has no remote_storage"):
            m.tier()


KILLED_TIERING = """
import json, sys
from pylog import LogManager
root, url, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
LogManager(root, remote_storage=url, storage_options=options, remote_log_metadata_topic_num_partitions=1).tier()
"""


def killed_at_failpoint(failpoint: str):
    def run(root, url, s3) -> None:
        child = subprocess.run([sys.executable, "-c", KILLED_TIERING, str(root), url, json.dumps(s3.storage_options)],
                               env={**os.environ, "PYLOG_FAILPOINTS": failpoint}, capture_output=True, timeout=120)
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    return run


def killed_while_uploading(root, url, s3) -> None:
    """SIGKILL once the segment's .log object is written and its .indexes upload hangs."""
    faulty = s3.faulty(s3.Fault("stall", method="PUT", path=".indexes", stall_s=120))
    child = subprocess.Popen([sys.executable, "-c", KILLED_TIERING, str(root), url,
                              json.dumps(faulty.storage_options)], stderr=subprocess.PIPE)
    try:
        wait_until(lambda: faulty.count("PUT", ".indexes") >= 1 or child.poll() is not None, "the upload to hang")
        assert child.poll() is None, child.stderr.read().decode()
    finally:
        child.kill()
        child.wait()
        child.stderr.close()
        s3.faulty()


@pytest.mark.parametrize("kill", [killed_at_failpoint("tier.copy.started"), killed_at_failpoint("tier.copy.uploaded"),
                                  killed_while_uploading],
                         ids=["after COPY_SEGMENT_STARTED", "after the upload", "during the upload"])
def test_a_copy_killed_midway_is_never_live_and_is_copied_again_under_a_new_id(tmp_path, s3, bucket_url, kill):
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        fill(m.create_topic("events", config=TIERED), 12)
        first = m.log("events", 0).segments[0].base_offset
    kill(tmp_path, bucket_url, s3)
    metadata = open_remote_log_metadata(tmp_path)
    [dead] = metadata.segments("events", 0)
    assert (dead.state, dead.start_offset, metadata.live_segments("events", 0)) == ("COPY_SEGMENT_STARTED", first, [])
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        m.tier()
        again = live(m)
        assert again[0].start_offset == first and dead.segment_id not in {s.segment_id for s in again}
        assert open_remote_log_metadata(tmp_path).segment(dead.topic_id, 0, dead.segment_id) is None
    names = {aiven.parse_object_key(k).segment_id for k in objects(bucket_url, s3.storage_options)}
    assert dead.segment_id_text not in names and again[0].segment_id_text in names


def test_deleting_a_tiered_topic_deletes_its_remote_segments_and_a_new_topic_of_its_name_starts_empty(
        tmp_path, s3, bucket_url):
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        fill(m.create_topic("events", config=TIERED))
        m.tier()
        assert live(m)
        m.delete_topic("events")
        assert objects(bucket_url, s3.storage_options) == {}
        assert open_remote_log_metadata(tmp_path).partitions() == []
        m.create_topic("events", config=TIERED).append([b"new"])
        assert [r.value for r in m.log("events", 0).records()] == [b"new"]


@pytest.mark.filterwarnings("ignore:.*tiered segments are unreachable:pylog.errors.PylogWarning")  # the task's
def test_while_the_store_is_down_appends_go_on_and_the_task_copies_once_it_is_back(tmp_path, s3, bucket_url):
    faulty = s3.faulty(s3.Fault("error", times=float("inf")))  # every request: listings too
    options = {**faulty.storage_options, "retries": 1, "config_kwargs": {"retries": {"max_attempts": 1}}}
    with open_tiering(tmp_path, bucket_url, options, remote_log_manager_task_interval_ms=20) as m:
        with pytest.warns(PylogWarning, match="events-0: its tiered segments are unreachable"):
            topic = m.create_topic("events", config={**TIERED, "local_retention_bytes": 0})
            fill(topic)
        with pytest.raises(StorageError):
            m.tier()
        wait_until(lambda: faulty.count(answer="error") >= 10, "the task's rounds to fail a few times")
        fill(topic, 6)
        log = m.log("events", 0)
        assert [r.offset for r in log.records()] == list(range(30))
        s3.faulty()  # the store is back
        wait_until(lambda: live(m) and log.local_log_start_offset == live(m)[-1].end_offset + 1,
                   "the task to copy the segments and delete them locally")
        assert (live(m)[0].start_offset, log.log_end_offset) == (0, 30)



def test_a_round_lets_reads_find_the_copies_before_it_deletes_their_local_segments(tmp_path, s3, bucket_url):
    """The background task's round alone (no listing after it yet): the partition reads whole."""
    with open_tiering(tmp_path, bucket_url, s3.storage_options) as m:
        fill(m.create_topic("events", config={**TIERED, "local_retention_bytes": 0}))
        log = m.log("events", 0)
        m._remote_log_manager.run_once()  # what the task runs, before it lists the store again
        assert log.local_log_start_offset > 0
        assert [r.offset for r in log.records()] == list(range(log.log_end_offset))



def test_reads_through_the_remote_part_never_see_a_gap_while_the_task_tiers(tmp_path, s3, bucket_url):
    """The task copies segments while a reader reads the whole partition again and again: the
    remote part must know of each copy before its local segment is deleted."""
    with open_tiering(tmp_path, bucket_url, s3.storage_options, remote_log_manager_task_interval_ms=10) as m:
        topic = m.create_topic("events", config={**TIERED, "local_retention_bytes": 0})
        log = m.log("events", 0)
        failures, done = [], threading.Event()

        def read_all() -> None:
            while not done.is_set():
                end = log.log_end_offset
                try:
                    offsets = [r.offset for r in log.records(0, end)]
                    assert offsets == list(range(end)), offsets
                except Exception as e:  # noqa: BLE001 - any failure of a read is the finding
                    failures.append(e)
                    return
        reader = threading.Thread(target=read_all)
        reader.start()
        try:
            for batch in range(6):
                fill(topic, 6)
                wait_until(lambda: log.local_log_start_offset >= 5 * batch or failures, "the task to tier a batch")
        finally:
            done.set()
            reader.join()
        assert failures == [] and log.local_log_start_offset > 0
