"""pylog writes __remote_log_metadata, Kafka reads it: DumpLogSegments with
``--remote-log-metadata-decoder`` decodes every record pylog's RemoteLogMetadataWriter appends
(each state of a segment's life and of a partition's deletion) and prints what pylog prints."""

from __future__ import annotations

import uuid

from pylog import LogManager
from pylog.remote.metadata import (
    COPY_SEGMENT_FINISHED, DELETE_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, METADATA_TOPIC, RemoteLogMetadataWriter,
    RemoteSegmentInfo,
)
from tests.kafka.test_dump_parity import assert_same_dump


def test_kafkas_dump_log_segments_decodes_what_pylogs_writer_appends(kafka_tool, tmp_path):
    topic_id = uuid.uuid4().bytes
    with LogManager(tmp_path) as manager:
        writer = RemoteLogMetadataWriter(manager, partitions=1)
        for start, custom in ((0, None), (100, b"abc")):
            info = writer.copy_started(RemoteSegmentInfo(
                "events", topic_id, 0, uuid.uuid4().bytes, start, start + 99, 1_700_000_000_000 + start,
                segment_leader_epochs={0: start, 2: start + 50}, segment_size_bytes=4096, txn_index_empty=start > 0,
                custom_metadata=custom))
            writer.update(info, COPY_SEGMENT_FINISHED)
        writer.update(info, DELETE_SEGMENT_STARTED)
        writer.update(info, DELETE_SEGMENT_FINISHED)
        for state in ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED"):
            writer.partition_deleted("events", topic_id, 0, state)
    out = assert_same_dump(kafka_tool, [tmp_path / f"{METADATA_TOPIC}-0" / f"{0:020d}.log"],
                           "--remote-log-metadata-decoder")
    payloads = [line for line in out if " payload: " in line]
    assert len(payloads) == 9
    assert sum("state=COPY_SEGMENT_FINISHED" in line for line in payloads) == 2
    assert any("customMetadata=Optional[CustomMetadata{3 bytes}]" in line for line in payloads)
    assert not any("Error at offset" in line for line in out)
