"""Kafka tiers, pylog reads: a real broker copies a topic's closed segments with Kafka's reference
LocalTieredStorage and records them in ``__remote_log_metadata`` (tests/kafka/tiered_by_kafka.py);
pylog dumps that metadata as Kafka's tool does, finds the storage laid out as docs/tiered.md
says, and reads the tiered segments, alone or under the broker's local ones, as Kafka's
consumer and admin client read them."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest

from pylog import Log, LogManager
from pylog.cli.main import main as pylog_main
from pylog.coordinator.schema import uuid_text
from pylog.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pylog.record.remote_metadata import decode_event
from pylog.remote.layouts import RemoteLayoutWarning
from tests.kafka import tiered_by_kafka as scenario
from tests.kafka.tiered_by_kafka import METADATA_TOPIC, PARTITIONS, TOPIC

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
#: LocalTieredStorage's names: <topic>-<partition>-<topic id> directories holding
#: <20-digit start offset>-<segment id>.<kind> files, ids as Kafka's Uuid.toString() prints them.
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)-(?P<topic_id>[A-Za-z0-9_-]{22})$")
SEGMENT_FILE = re.compile(r"^(?P<start>\d{20})-(?P<id>[A-Za-z0-9_-]{22})(?P<suffix>\.[a-z_]+)$")
#: The files LocalTieredStorage writes for every segment; a .txnindex besides where it has aborts.
SEGMENT_SUFFIXES = {".log", ".index", ".timeindex", ".snapshot", ".leader_epoch_checkpoint"}
TXN_INDEX = ".txnindex"
FINISHED = 1  # COPY_SEGMENT_FINISHED in RemoteLogSegmentState


@pytest.fixture(scope="module")
def tiered(kafka_module_broker_factory, tmp_path_factory) -> scenario.TieredByKafka:
    storage_root = tmp_path_factory.mktemp("local-tiered-storage")
    broker = kafka_module_broker_factory(**scenario.server_properties(storage_root))
    return scenario.tier(broker)


# -- what Kafka wrote ----------------------------------------------------------------------------

def _metadata_logs(tiered) -> list[Path]:
    return sorted(tiered.broker.log_dir.glob(f"{METADATA_TOPIC}-*/*.log"))


def _metadata_events(tiered) -> list[dict]:
    """Every record of the broker's __remote_log_metadata partitions, decoded, in offset order."""
    events = []
    for partition_dir in sorted(tiered.broker.log_dir.glob(f"{METADATA_TOPIC}-*")):
        with Log.open(partition_dir, read_only=True) as log:
            events += [decode_event(r.value) for r in log.records()]
    return events


def _copied_segments(tiered) -> dict[str, dict]:
    """Segment id -> its RemoteLogSegmentMetadataRecord, for each segment whose copy finished."""
    events = _metadata_events(tiered)
    finished = {uuid_text(e["remoteLogSegmentId"]["id"]) for e in events
                if e["record"] == "RemoteLogSegmentMetadataUpdateRecord" and e["remoteLogSegmentState"] == FINISHED}
    return {uuid_text(e["remoteLogSegmentId"]["id"]): e for e in events
            if e["record"] == "RemoteLogSegmentMetadataRecord" and uuid_text(e["remoteLogSegmentId"]["id"]) in finished}


def _topic_id(tiered) -> str:
    text = (tiered.broker.partition_dir(TOPIC, 0) / "partition.metadata").read_text()
    return re.search(r"^topic_id: (\S+)$", text, re.M).group(1)


def _partition_dir_name(tiered, partition: int) -> str:
    return f"{TOPIC}-{partition}-{_topic_id(tiered)}"


def _remote_end_offset(tiered, partition: int) -> int:
    """One past the last offset of the partition's tiered segments."""
    return max(s["endOffset"] for s in _copied_segments(tiered).values()
               if s["remoteLogSegmentId"]["topicIdPartition"]["partition"] == partition) + 1


# -- 1. the metadata, dumped -----------------------------------------------------------------------

def test_pylog_dump_of_kafkas_remote_log_metadata_equals_kafkas_dump_log_segments(tiered, kafka_tool):
    files = ",".join(map(str, _metadata_logs(tiered)))
    kafka = kafka_tool(DUMP_LOG_SEGMENTS, "--files", files, "--remote-log-metadata-decoder").stdout.splitlines()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = pylog_main(["dump", "--files", files, "--remote-log-metadata-decoder"])
    assert (status, err.getvalue()) == (0, "")
    assert out.getvalue().splitlines() == kafka
    assert sum("state=COPY_SEGMENT_FINISHED" in line for line in kafka) == len(_copied_segments(tiered)) > 0


# -- 2. LocalTieredStorage's layout ----------------------------------------------------------------

def test_local_tiered_storage_holds_a_topic_partition_topic_id_directory_per_partition(tiered):
    names = sorted(p.name for p in tiered.storage_dir.iterdir())
    assert names == [_partition_dir_name(tiered, p) for p in PARTITIONS]
    assert all(PARTITION_DIR.match(name) for name in names)


def test_local_tiered_storage_names_each_copied_segments_files_after_its_start_offset_and_id(tiered):
    expected = set()
    for segment_id, s in _copied_segments(tiered).items():
        partition_dir = _partition_dir_name(tiered, s["remoteLogSegmentId"]["topicIdPartition"]["partition"])
        suffixes = SEGMENT_SUFFIXES | ({TXN_INDEX} if not s["txnIndexEmpty"] else set())
        expected |= {f"{partition_dir}/{s['startOffset']:020d}-{segment_id}{suffix}" for suffix in suffixes}
    found = {str(p.relative_to(tiered.storage_dir)) for p in tiered.storage_dir.rglob("*") if p.is_file()}
    assert found == expected
    assert all(SEGMENT_FILE.match(Path(name).name) for name in found)
    assert any(name.endswith(TXN_INDEX) for name in found), "the aborted transaction's segment was tiered"


def test_each_tiered_log_file_is_the_segment_its_metadata_describes(tiered):
    for segment_id, s in _copied_segments(tiered).items():
        partition = s["remoteLogSegmentId"]["topicIdPartition"]["partition"]
        log = tiered.storage_dir / _partition_dir_name(tiered, partition) / f"{s['startOffset']:020d}-{segment_id}.log"
        assert log.stat().st_size == s["segmentSizeInBytes"]


def test_the_metadata_ends_where_kafkas_latest_tiered_offset_is(tiered):
    assert {p: _remote_end_offset(tiered, p) - 1 for p in PARTITIONS} == tiered.latest_tiered


def test_the_broker_keeps_only_the_segments_above_the_tiered_ones(tiered):
    for p in PARTITIONS:
        assert [int(log.stem) for log in scenario.local_logs(tiered.broker, p)] == [_remote_end_offset(tiered, p)]
    assert {p: _remote_end_offset(tiered, p) for p in PARTITIONS} == tiered.earliest_local


# -- 3. pylog reads what Kafka tiered --------------------------------------------------------------

@pytest.fixture(scope="module", params=["file", "s3"])
def remote(request, tiered) -> tuple[str, dict | None]:
    """The LocalTieredStorage directory as a URL, and its storage options: in place, or copied
    to a bucket on the loopback S3 endpoint."""
    if request.param == "file":
        return f"file://{tiered.storage_dir}", None
    s3 = request.getfixturevalue("s3")
    url = s3.url(s3.bucket())
    s3.upload_dir(tiered.storage_dir, url)
    return url, s3.storage_options


def _leader_epochs(log) -> dict[int, int]:
    """Offset -> the partition leader epoch of its batch, for every batch of the log."""
    epochs, offset = {}, log.log_start_offset
    while offset < log.log_end_offset:
        fetch = log.read(offset)
        for batch in fetch.batches():
            epochs.update(dict.fromkeys(range(batch.base_offset, batch.last_offset + 1), batch.partition_leader_epoch))
        offset = fetch.next_offset
    return epochs


def _pylog_records(log, isolation: str = "uncommitted") -> list[tuple]:
    epochs = _leader_epochs(log)
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers), epochs[r.offset])
            for r in log.records(isolation=isolation)]


def _kafka_records(records: list[dict], end_offset: int | None = None) -> list[tuple]:
    return [(r["offset"], r["timestamp"], r["timestampType"], r["key"], r["value"], tuple(r["headers"]),
             r["leaderEpoch"]) for r in records if end_offset is None or r["offset"] < end_offset]


def _kafka_offsets_for_times(tiered, partition: int, end_offset: int | None = None) -> dict[int, int | None]:
    """Kafka's offsetsForTimes answers; with ``end_offset``, as a log ending there answers."""
    found = {f["timestamp"]: (f["offset"] if f["offset"] >= 0 else None)
             for f in tiered.offsets[partition]["forTimestamp"]}
    if end_offset is None:
        return found
    return {ts: o if o is not None and o < end_offset else None for ts, o in found.items()}


def _assert_reads_from_every_offset(log, kafka_records: list[dict]) -> None:
    """A read from each offset starts at the first record at or after it, as a consumer's
    seek does: through the offset index of the segment holding it."""
    offsets = [r["offset"] for r in kafka_records]
    first = {start: next((r.offset for r in log.records(start)), None)
             for start in range(log.log_start_offset, log.log_end_offset)}
    assert first == {start: next((o for o in offsets if o >= start), None) for start in first}


def _assert_reads_the_tiered_segments(tiered, log, partition: int) -> None:
    end = tiered.latest_tiered[partition] + 1
    assert (log.log_start_offset, log.log_end_offset) == (tiered.offsets[partition]["earliest"], end)
    assert _pylog_records(log) == _kafka_records(tiered.records[partition], end)
    _assert_reads_from_every_offset(log, [r for r in tiered.records[partition] if r["offset"] < end])
    assert _pylog_records(log, "committed") == _kafka_records(tiered.committed[partition], end)
    expected = _kafka_offsets_for_times(tiered, partition, end)
    assert {ts: log.offset_for_timestamp(ts) for ts in expected} == expected


@pytest.mark.parametrize("partition", PARTITIONS)
def test_log_manager_on_local_tiered_storage_reads_kafkas_records_and_offsets(tiered, remote, partition):
    url, storage_options = remote
    with warnings.catch_warnings():
        warnings.simplefilter("error", RemoteLayoutWarning)  # the metadata says which segments are live
        manager = LogManager(url, read_only=True, storage_options=storage_options,
                             remote_log_metadata=tiered.broker.log_dir)
    with manager:
        assert manager.topics() == [TOPIC]
        assert manager.partitions(TOPIC) == list(PARTITIONS)
        _assert_reads_the_tiered_segments(tiered, manager.log(TOPIC, partition), partition)


@pytest.mark.parametrize("partition", PARTITIONS)
def test_log_open_on_a_local_tiered_storage_partition_reads_kafkas_records_and_offsets(tiered, remote, partition):
    """Without __remote_log_metadata, from the listing alone, saying so."""
    url, storage_options = remote
    with pytest.warns(RemoteLayoutWarning, match="without remote_log_metadata"):
        log = Log.open(f"{url}/{_partition_dir_name(tiered, partition)}", read_only=True,
                       storage_options=storage_options)
    with log:
        _assert_reads_the_tiered_segments(tiered, log, partition)


@pytest.mark.parametrize("partition", PARTITIONS)
def test_broker_log_dir_over_local_tiered_storage_reads_the_whole_partition_as_kafkas_consumer(tiered, remote,
                                                                                               partition):
    """Remote segments, then the broker's local ones: no gap, no duplicate."""
    kafka = tiered.offsets[partition]
    url, storage_options = remote
    with LogManager(tiered.broker.log_dir, read_only=True, remote_storage=url, storage_options=storage_options,
                    remote_log_metadata=tiered.broker.log_dir) as manager:
        log = manager.log(TOPIC, partition)
        assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset, log.last_stable_offset) == \
            (kafka["earliest"], tiered.earliest_local[partition], kafka["latest"], kafka["lso"])
        assert _pylog_records(log) == _kafka_records(tiered.records[partition])
        _assert_reads_from_every_offset(log, tiered.records[partition])
        assert _pylog_records(log, "committed") == _kafka_records(tiered.committed[partition])
        expected = _kafka_offsets_for_times(tiered, partition)
        assert {ts: log.offset_for_timestamp(ts) for ts in expected} == expected
        assert [log.offset_for_timestamp(spec) for spec in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP)] == \
            [kafka["earliest"], kafka["latest"], kafka["maxTimestamp"]["offset"]]


def test_kafka_tiered_every_case_the_reads_cover(tiered):
    """Keys, null keys, headers, a gzip batch, an aborted transaction below the local segments,
    tiered offset indexes with entries, and records both in remote and in local segments of each
    partition."""
    records = tiered.records[0]
    remote_end = _remote_end_offset(tiered, 0)
    assert any(r["key"] is None for r in records) and any(r["headers"] for r in records)
    assert {r["value"] for r in records} - {r["value"] for r in tiered.committed[0]} == {b"abort 0", b"abort 1"}
    assert all(r["offset"] < remote_end for r in records if r["value"].startswith((b"abort", b"gzip")))
    assert any(index.stat().st_size > 0 for index in tiered.storage_dir.rglob("*.index"))
    for p in PARTITIONS:
        offsets = [r["offset"] for r in tiered.records[p]]
        assert offsets[0] == 0 and offsets[-1] >= _remote_end_offset(tiered, p)
