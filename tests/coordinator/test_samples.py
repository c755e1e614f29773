"""Every record of the shared broker samples of ``__consumer_offsets`` decodes, and
re-encodes to the very bytes Kafka wrote (keys as Kafka's decoder read them; values checked
against the SHA-256 Kafka's decoder recorded); the reader replays them."""

from __future__ import annotations

import base64
import hashlib

import pytest

from pylog import Log
from pylog.coordinator.offsets_reader import read_group_state, replay_partition
from pylog.coordinator.offsets_records import GROUP_RECORDS, OffsetAndMetadata
from tests.conftest import SAMPLES, needs_samples
from tests.record.expected import expected_rows

pytestmark = needs_samples
MULTI_SEGMENT = "real/multi-segment-0"
LEGACY_DIR = "real/legacy-magic1-logdir"
LEGACY = f"{LEGACY_DIR}/__consumer_offsets-40"


def values_by_offset(partition) -> dict:
    with Log.open(SAMPLES / partition, read_only=True) as log:
        return {r.offset: r.value for r in log.records()}


@pytest.mark.parametrize("partition", [MULTI_SEGMENT, LEGACY])
def test_every_sample_record_decodes_and_re_encodes_to_kafkas_bytes(partition):
    values = values_by_offset(partition)
    seen = set()
    for log_path in sorted((SAMPLES / partition).glob("*.log")):
        for row in expected_rows(log_path):
            key = base64.b64decode(row["key"])
            value = values[row["offset"]]
            assert (-1 if value is None else len(value)) == row["value_len"]
            if value is not None:
                assert hashlib.sha256(value).hexdigest() == row["value_sha256"]
            rec = GROUP_RECORDS.decode(key, value)
            assert GROUP_RECORDS.encode_key(rec.type_id, rec.key) == key
            assert GROUP_RECORDS.encode_value(rec.type_id, rec.value_version, rec.value) == value
            seen.add((rec.type_id, rec.value_version))
    assert seen == {MULTI_SEGMENT: {(1, 3), (1, None), (2, 3), (2, None)},
                    LEGACY: {(1, 1), (2, 1)}}[partition]


def test_legacy_log_dir_offsets_and_group():
    state = read_group_state(SAMPLES / LEGACY_DIR)
    assert state.offsets == {"GroupA": {("foo", 0): OffsetAndMetadata(
        offset=204, metadata="", commit_timestamp=1479459073221, leader_epoch=None,
        expire_timestamp=1479545473221)}}
    group = state.groups["GroupA"]
    assert (group.state, group.protocol_type, group.generation, group.protocol) == ("Stable", "consumer", 5, "range")
    assert group.leader == group.members[0].member_id == "consumer-1-d32a0691-ea42-487b-88b8-d5943bffd3fd"
    member = group.members[0]
    assert (member.client_id, member.client_host, member.rebalance_timeout_ms, member.session_timeout_ms,
            member.group_instance_id) == ("consumer-1", "/192.168.2.20", 300000, 30000, None)


def test_multi_segment_state_before_and_after_the_group_is_deleted():
    before = replay_partition(SAMPLES / MULTI_SEGMENT, end_offset=862)
    offsets = before.offsets["my-group"]
    assert sorted(offsets) == [(t, p) for t in ("my-first-topic", "my-second-topic") for p in range(3)]
    assert offsets[("my-first-topic", 0)] == OffsetAndMetadata(1, "", 1721326478027, 0, None)
    assert offsets[("my-first-topic", 1)] == OffsetAndMetadata(0, "", 1721326478027, None, None)
    group = before.groups["my-group"]
    assert (group.state, group.generation, group.protocol, group.leader, group.members) == ("Empty", 4, None,
                                                                                            None, ())
    # offsets 862-868 are tombstones for the six offsets, then for the group itself
    after = replay_partition(SAMPLES / MULTI_SEGMENT)
    assert after.offsets == {} and after.groups == {}
