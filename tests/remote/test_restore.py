"""``pylog tiered pull``: tiered segments back into partition directories that pylog opens and
verifies clean, byte for byte what was tiered."""

from __future__ import annotations

import os
import uuid
import warnings

import pytest

from pylog import Log, LogManager
from pylog.checkpoint import read_partition_metadata
from pylog.errors import InvalidArgumentError, UnknownTopicError
from pylog.remote import aiven
from pylog.remote.layouts import RemoteLayoutWarning
from pylog.remote.restore import pull
from pylog.remote.store import ObjectStore
from tests.cli.test_cli import pylog

TIERED = {"remote_storage_enable": True, "segment_bytes": 1024}


@pytest.fixture
def tiered(tmp_path, s3):
    """A log dir that tiered topic ``events`` (2 partitions) to a bucket: (root, url, the
    bytes of each tiered segment by (partition, base offset))."""
    root, url = tmp_path / "broker", s3.url(s3.bucket(), "tiered")
    with LogManager(root, remote_storage=url, storage_options=s3.storage_options,
                    remote_log_metadata_topic_num_partitions=1) as m:
        topic = m.create_topic("events", 2, config=TIERED)
        for i in range(40):
            topic.append([(b"key-%d" % i, b"value-%d-" % i + b"x" * 100)], partition=i % 2)
        segments = {(p, seg.base_offset): open(seg.log_path, "rb").read()
                    for p in (0, 1) for seg in m.log("events", p).segments[:-1]}
        m.tier()
    return root, url, segments


def test_pull_rebuilds_each_partition_that_pylog_opens_and_verifies_clean(tmp_path, s3, tiered):
    root, url, segments = tiered
    dest = tmp_path / "restored"
    restored = pull(url, dest, remote_log_metadata=root, storage_options=s3.storage_options)
    assert [(r.topic, r.partition) for r in restored] == [("events", 0), ("events", 1)]
    for r in restored:
        files = sorted(os.listdir(r.path))
        for base in r.base_offsets:
            assert (dest / f"events-{r.partition}" / f"{base:020d}.log").read_bytes() == segments[(r.partition, base)]
            assert {f"{base:020d}.index", f"{base:020d}.timeindex"} <= set(files)
        assert sorted(base for p, base in segments if p == r.partition) == list(r.base_offsets)
        assert {"leader-epoch-checkpoint", "partition.metadata", f"{r.log_end_offset:020d}.snapshot"} <= set(files)
        assert read_partition_metadata(os.path.join(r.path, "partition.metadata"))["topic_id"] == \
            read_partition_metadata(root / f"events-{r.partition}" / "partition.metadata")["topic_id"]
        with Log.open(r.path, read_only=True) as log:
            assert [rec.offset for rec in log.records()] == list(range(r.base_offsets[0], r.log_end_offset))
    out = pylog("verify", dest)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_pull_of_one_topic_through_the_cli_prints_each_partition(tmp_path, s3, tiered):
    root, url, _ = tiered
    options = [f"--storage-option=key={s3.storage_options['key']}",
               f"--storage-option=secret={s3.storage_options['secret']}",
               f"--storage-option=client_kwargs.endpoint_url={s3.endpoint_url}"]
    out = pylog("tiered", "pull", url, tmp_path / "restored", "--topic", "events", "--remote-log-metadata", root,
                *options)
    assert out.returncode == 0, out.stderr.decode()
    lines = out.stdout.decode().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["events-0", "events-1"]
    assert all(line.split("\t")[3] == str(tmp_path / "restored" / line.split("\t")[0]) for line in lines)


def test_without_the_metadata_a_retried_upload_is_restored_once_with_a_warning(tmp_path, s3, tiered):
    _, url, segments = tiered
    store = ObjectStore.from_url(url, s3.storage_options)
    first = sorted(k for k in store.list() if k.endswith(".log") and "/0/" in k)[0]
    key = aiven.parse_object_key(first)
    retry = uuid.uuid4().bytes
    for suffix in aiven.SUFFIXES:  # the objects of a copy retried under a new segment id
        store.put(aiven.object_key("", key.topic, key.topic_id, 0, key.start_offset, retry, suffix),
                  store.read(str(key.with_suffix(suffix))))
    with pytest.warns(RemoteLayoutWarning, match="retried uploads may be double-counted"):
        [restored] = pull(url, tmp_path / "restored", topic="events", storage_options=s3.storage_options)[:1]
    assert list(restored.base_offsets) == sorted(base for p, base in segments if p == 0)


def test_pull_refuses_a_partition_directory_already_there_and_writes_nothing(tmp_path, s3, tiered):
    root, url, _ = tiered
    dest = tmp_path / "restored"
    (dest / "events-1").mkdir(parents=True)
    with pytest.raises(InvalidArgumentError, match="events-1 already exists"):
        pull(url, dest, remote_log_metadata=root, storage_options=s3.storage_options)
    assert os.listdir(dest) == ["events-1"]


def test_pull_of_a_topic_not_there_says_so(tmp_path, s3, tiered):
    root, url, _ = tiered
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnknownTopicError, match="no partition of topic 'other'"):
            pull(url, tmp_path / "restored", topic="other", remote_log_metadata=root,
                 storage_options=s3.storage_options)
    assert not (tmp_path / "restored").exists()


def test_pull_of_a_log_dir_copied_to_a_bucket_gives_its_segments_back(tmp_path, s3):
    with LogManager(tmp_path / "logs", segment_bytes=1024) as m:
        topic = m.create_topic("plain")
        for i in range(30):
            topic.append([b"value-%d" % i])
        logs = {seg.base_offset: open(seg.log_path, "rb").read() for seg in m.log("plain", 0).segments}
    url = s3.url(s3.bucket(), "copy")
    s3.upload_dir(tmp_path / "logs", url)
    [restored] = pull(url, tmp_path / "restored", storage_options=s3.storage_options)
    restored_dir = tmp_path / "restored" / "plain-0"
    assert {b: (restored_dir / f"{b:020d}.log").read_bytes() for b in restored.base_offsets} == logs


def test_pull_of_zstd_compressed_chunks_writes_the_segments_original_bytes(tmp_path, s3):
    with LogManager(tmp_path / "logs", segment_bytes=1024) as m:
        topic = m.create_topic("zipped")
        for i in range(12):
            topic.append([b"value-%d-" % i + b"z" * 200])
        seg = m.log("zipped", 0).segments[0]
        original = open(seg.log_path, "rb").read()
        indexes = {"offset": b"", "timestamp": b"", "producer_snapshot": b"", "leader_epoch": b""}
        url = s3.url(s3.bucket(), "aiven")
        store = ObjectStore.from_url(url, s3.storage_options)
        aiven.upload_segment(store, "", "zipped", uuid.uuid4().bytes, 0, uuid.uuid4().bytes, seg.log_path, indexes,
                             chunk_size=256, compression=True)
    assert store.size(next(k for k in store.list() if k.endswith(".log"))) < len(original)
    with pytest.warns(RemoteLayoutWarning):
        [restored] = pull(url, tmp_path / "restored", storage_options=s3.storage_options)
    assert (tmp_path / "restored" / "zipped-0" / f"{0:020d}.log").read_bytes() == original
    assert pylog("verify", tmp_path / "restored").returncode == 0
