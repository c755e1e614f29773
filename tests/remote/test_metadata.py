"""``__remote_log_metadata``: pylog's writer appends Kafka's records, and replaying them gives
each partition's live remote segments by Kafka's state rules (RemoteLogMetadataCache)."""

from __future__ import annotations

import contextlib
import io
import os
import uuid

import pytest

from pylog import LogManager
from pylog.cli.main import main as pylog_main
from pylog.errors import InvalidConfigError, UnknownTopicError
from pylog.remote.log_dir import open_remote_log_metadata
from pylog.remote.metadata import (
    COPY_SEGMENT_FINISHED, COPY_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, METADATA_TOPIC,
    RemoteLogMetadataWriter, RemoteSegmentInfo, metadata_partition, uuid_bytes, uuid_text,
)

TOPIC_ID = uuid_bytes("kJ1s_8ZzQ1ieXyW3hU2h6g")


def segment(start: int, end: int, partition: int = 0, **changes) -> RemoteSegmentInfo:
    fields = dict(topic="events", topic_id=TOPIC_ID, partition=partition, segment_id=uuid.uuid4().bytes,
                  start_offset=start, end_offset=end, max_timestamp_ms=1_700_000_000_000 + end,
                  segment_leader_epochs={0: start}, segment_size_bytes=100 * (end - start + 1))
    return RemoteSegmentInfo(**{**fields, **changes})


def copied(writer: RemoteLogMetadataWriter, info: RemoteSegmentInfo) -> RemoteSegmentInfo:
    info = writer.copy_started(info)
    writer.update(info, COPY_SEGMENT_FINISHED)
    return info


@pytest.fixture
def root(tmp_path):
    return tmp_path / "logs"


@pytest.fixture
def writer(root):
    with LogManager(root) as manager:
        yield RemoteLogMetadataWriter(manager, partitions=3)


@pytest.mark.parametrize("topic_id, partition, expected_of_50, expected_of_7", [
    ("AAAAAAAAAAAAAAAAAAAAAA", 0, 6, 2), ("AAAAAAAAAAAAAAAAAAAAAA", 1, 30, 2), ("AAAAAAAAAAAAAAAAAAAAAA", 5, 0, 6),
    ("AAAAAAAAAAAAAAAAAAAAAA", 123456, 32, 2), ("kJ1s_8ZzQ1ieXyW3hU2h6g", 0, 4, 4),
    ("kJ1s_8ZzQ1ieXyW3hU2h6g", 1, 36, 4), ("kJ1s_8ZzQ1ieXyW3hU2h6g", 5, 49, 5),
    ("kJ1s_8ZzQ1ieXyW3hU2h6g", 123456, 25, 4),
])
def test_metadata_partition_is_the_one_kafkas_remote_log_metadata_topic_partitioner_picks(
        topic_id, partition, expected_of_50, expected_of_7):
    """Expected values: Kafka 4.3.1's RemoteLogMetadataTopicPartitioner(50 and 7).metadataPartition."""
    assert metadata_partition(topic_id, partition) == expected_of_50
    assert metadata_partition(topic_id, partition, 7) == expected_of_7


def test_a_finished_copy_read_back_from_the_log_dir_is_live_with_every_field(writer, root):
    info = copied(writer, segment(0, 99, txn_index_empty=False, custom_metadata=b"abc",
                                  segment_leader_epochs={0: 0, 3: 40}))
    writer.manager.close()
    [live] = open_remote_log_metadata(root).live_segments("events", 0)
    assert live.state == COPY_SEGMENT_FINISHED
    fields = ("topic", "topic_id", "partition", "segment_id", "start_offset", "end_offset", "max_timestamp_ms",
              "segment_leader_epochs", "segment_size_bytes", "txn_index_empty", "custom_metadata")
    assert {f: getattr(live, f) for f in fields} == {f: getattr(info, f) for f in fields}
    assert live.segment_id_text == uuid_text(info.segment_id)


def test_events_of_a_partition_go_to_the_metadata_partition_kafka_picks(writer, root):
    copied(writer, segment(0, 9, partition=1))
    expected = metadata_partition(TOPIC_ID, 1, 3)
    sizes = {p: writer.manager.log(METADATA_TOPIC, p).log_end_offset for p in range(3)}
    assert sizes == {p: 2 if p == expected else 0 for p in range(3)}


def test_a_copy_started_and_never_finished_is_not_live(writer, root):
    finished = copied(writer, segment(0, 9))
    writer.copy_started(segment(10, 19))
    writer.manager.close()
    metadata = open_remote_log_metadata(root)
    assert [s.segment_id for s in metadata.live_segments("events", 0)] == [finished.segment_id]
    assert [s.state for s in metadata.segments("events", 0)] == [COPY_SEGMENT_FINISHED, COPY_SEGMENT_STARTED]


def test_a_segment_being_deleted_is_not_live_and_once_deleted_is_forgotten(writer, root):
    first, second = copied(writer, segment(0, 9)), copied(writer, segment(10, 19))
    writer.update(first, DELETE_SEGMENT_STARTED)
    assert [s.start_offset for s in writer.metadata.live_segments("events", 0)] == [10]
    writer.update(first, DELETE_SEGMENT_FINISHED)
    writer.manager.close()
    metadata = open_remote_log_metadata(root)
    assert [s.segment_id for s in metadata.segments("events", 0)] == [second.segment_id]
    assert metadata.segment(TOPIC_ID, 0, first.segment_id) is None


def test_a_transition_kafka_forbids_is_dropped(writer):
    info = copied(writer, segment(0, 9))
    writer.update(info, DELETE_SEGMENT_STARTED)
    writer.update(info, COPY_SEGMENT_FINISHED)  # back from deleting: Kafka drops the event
    never_started = segment(10, 19)
    writer.update(never_started, COPY_SEGMENT_FINISHED)
    assert writer.metadata.live_segments("events", 0) == []
    assert writer.metadata.segment(TOPIC_ID, 0, never_started.segment_id) is None
    assert writer.metadata.dropped == 2


def test_a_finished_partition_delete_forgets_the_partition(writer):
    copied(writer, segment(0, 9, partition=0))
    copied(writer, segment(0, 9, partition=1))
    for state in ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED"):
        writer.partition_deleted("events", TOPIC_ID, 0, state)
    assert writer.metadata.partitions() == [("events", TOPIC_ID, 1)]


def test_a_reopened_writer_replays_what_was_written_and_keeps_the_topics_partition_count(root):
    with LogManager(root) as manager:
        copied(RemoteLogMetadataWriter(manager, partitions=2), segment(0, 9))
    with LogManager(root) as manager:
        writer = RemoteLogMetadataWriter(manager)  # the default, 50, does not apply to an existing topic
        assert writer.partition_count == 2
        assert [s.end_offset for s in writer.metadata.live_segments("events", 0)] == [9]
        assert manager.topic_config(METADATA_TOPIC).retention_ms == -1


def test_pylog_dump_prints_every_record_written(writer, root):
    info = copied(writer, segment(0, 9))
    writer.update(info, DELETE_SEGMENT_STARTED)
    writer.partition_deleted("events", TOPIC_ID, 0, "DELETE_PARTITION_MARKED")
    part = metadata_partition(TOPIC_ID, 0, 3)
    writer.manager.close()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = pylog_main(["dump", "--files", str(root / f"{METADATA_TOPIC}-{part}" / f"{0:020d}.log"),
                             "--remote-log-metadata-decoder"])
    payloads = [line.split(" payload: ", 1)[1] for line in out.getvalue().splitlines() if " payload: " in line]
    assert status == 0
    assert [p.split("{", 1)[0] for p in payloads] == [
        "RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate", "RemoteLogSegmentMetadataUpdate",
        "RemotePartitionDeleteMetadata"]
    assert f"id={info.segment_id_text}}}, startOffset=0, endOffset=9, brokerId=0" in payloads[0]
    assert [p.split("state=")[1].split(",")[0] for p in payloads] == [
        COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, "DELETE_PARTITION_MARKED"]


def test_opening_a_log_dir_without_the_metadata_topic_says_so(tmp_path):
    LogManager(tmp_path).close()
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(UnknownTopicError, match=f"no {METADATA_TOPIC} partitions in {tmp_path}"):
        open_remote_log_metadata(tmp_path)
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("text", ["short", "kJ1s_8ZzQ1ieXyW3hU2h6g==x", "kJ1s_8ZzQ1ieXyW3hU2h6h", 12,
                                  b"15 bytes long.."])
def test_a_topic_id_that_is_no_kafka_uuid_is_refused(text):
    with pytest.raises(InvalidConfigError, match="is not a Kafka uuid"):
        uuid_bytes(text)


def test_the_metadata_partitions_copied_to_a_bucket_replay_as_they_do_on_disk(writer, root, s3):
    finished = copied(writer, segment(0, 9))
    writer.copy_started(segment(10, 19))
    writer.manager.close()
    url = s3.url(s3.bucket(), "broker-logs")
    s3.upload_dir(root, url)
    metadata = open_remote_log_metadata(url, storage_options=s3.storage_options)
    assert [s.segment_id for s in metadata.live_segments("events", 0)] == [finished.segment_id]
    assert len(metadata.segments("events", 0)) == 2
