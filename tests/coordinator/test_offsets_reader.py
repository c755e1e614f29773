"""The committed-offsets reader on partitions written here: latest record per key wins,
tombstones delete, aborted and open transactions are left out."""

from __future__ import annotations

import pytest

from pylog import Log
from pylog.coordinator.offsets_reader import committed_offsets, read_group_state
from pylog.coordinator.offsets_records import GROUP_RECORDS, OffsetAndMetadata
from pylog.errors import InvalidRecordError, LogDirNotFoundError, MissingKeyError
from tests.coordinator.wire import i16, i32, i64, string


def commit(group: str, topic: str, partition: int, offset: int | None) -> tuple[bytes, bytes | None]:
    """An offset commit as (key, value) bytes written out by hand (value v3; None: a tombstone)."""
    key = i16(1) + string(group) + string(topic) + i32(partition)
    return key, None if offset is None else i16(3) + i64(offset) + i32(-1) + string("") + i64(1000 + offset)


def offsets_of(log_dir) -> dict:
    return {g: {tp: om.offset for tp, om in tps.items()} for g, tps in committed_offsets(log_dir).items()}


def test_latest_commit_wins_and_tombstones_delete(tmp_path):
    with Log.open(tmp_path / "__consumer_offsets-0") as log:
        log.append([commit("g", "t", 0, 5), commit("g", "t", 1, 7)])
        log.append([commit("g", "t", 0, 9), commit("g", "t", 1, None)])
    with Log.open(tmp_path / "__consumer_offsets-1") as log:
        log.append([commit("h", "t", 0, 3)])
    (tmp_path / "other-0").mkdir()
    assert offsets_of(tmp_path) == {"g": {("t", 0): 9}, "h": {("t", 0): 3}}
    assert committed_offsets(tmp_path)["g"][("t", 0)] == OffsetAndMetadata(9, "", 1009, None, None)


def test_only_committed_transactions_count(tmp_path):
    with Log.open(tmp_path / "__consumer_offsets-0") as log:
        log.append([commit("g", "t", 0, 1)])
        log.append([commit("g", "t", 0, 50)], producer_id=7, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(7, 0, commit=False)
        log.append([commit("g", "t", 1, 60)], producer_id=8, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append_txn_marker(8, 0, commit=True)
        log.append([commit("g", "t", 2, 70)], producer_id=9, producer_epoch=0, base_sequence=0,
                   is_transactional=True)  # still open
    assert offsets_of(tmp_path) == {"g": {("t", 0): 1, ("t", 1): 60}}


def test_group_metadata_and_unknown_types(tmp_path):
    group_key = GROUP_RECORDS.encode_key(2, {"group": "g"})
    group_value = GROUP_RECORDS.encode_value(2, 3, {"protocolType": "consumer", "generation": 2, "protocol": "range",
                                                    "leader": "m", "members": []})
    with Log.open(tmp_path / "__consumer_offsets-0") as log:
        log.append([(group_key, group_value), (i16(42) + string("g"), b"\x00\x00"), (group_key, None),
                    (GROUP_RECORDS.encode_key(2, {"group": "k"}), group_value)])
    state = read_group_state(tmp_path)
    assert list(state.groups) == ["k"]
    assert (state.groups["k"].generation, state.groups["k"].state) == (2, "Empty")


def test_a_record_breaking_its_schema_names_partition_and_offset(tmp_path):
    with Log.open(tmp_path / "__consumer_offsets-4") as log:
        log.append([commit("g", "t", 0, 1), (commit("g", "t", 0, 1)[0], i16(3) + b"\x00")])
    with pytest.raises(InvalidRecordError, match=r"record at offset 1: OffsetCommitValue v3.*__consumer_offsets-4"):
        committed_offsets(tmp_path)


def test_a_record_without_a_key_is_an_error(tmp_path):
    with Log.open(tmp_path / "__consumer_offsets-2") as log:
        log.append([commit("g", "t", 0, 1), (None, b"v")])
    with pytest.raises(MissingKeyError, match="record at offset 1 of .*__consumer_offsets-2 has no key"):
        committed_offsets(tmp_path)


def test_a_missing_log_dir_is_an_error(tmp_path):
    with pytest.raises(LogDirNotFoundError, match="nowhere"):
        committed_offsets(tmp_path / "nowhere")
