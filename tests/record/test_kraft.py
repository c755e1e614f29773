"""Byte-level cases of KRaft control record values (docs/format/kraft-snapshot.md)."""

from __future__ import annotations

import struct

import pytest

from pylog.errors import CorruptCheckpointError, InvalidRecordError
from pylog.record.kraft import control_text, snapshot_title


def test_snapshot_titles():
    assert snapshot_title("00000000000000001234-0000000007.checkpoint") == "Snapshot end offset: 1234, epoch: 7"
    assert snapshot_title("bootstrap.checkpoint") == "KRaft bootstrap snapshot"
    with pytest.raises(CorruptCheckpointError, match="not a KRaft snapshot name"):
        snapshot_title("00000000000000001234-7.checkpoint")


def test_tagged_fields_are_skipped():
    # SnapshotHeader with one tagged field (tag 0, 3 bytes) after its fields
    value = struct.pack(">hq", 0, 99) + bytes([1, 0, 3]) + b"xyz"
    assert control_text(3, value) == 'SnapshotHeader {"version":0,"lastContainedLogTimestamp":99}'


def test_leader_change_version_1_shows_the_zero_directory_id():
    value = struct.pack(">hi", 1, 3) + bytes([2]) + struct.pack(">i", 3) + b"\x00" + bytes([1]) + b"\x00"
    assert control_text(2, value) == ('LeaderChange: {"version":1,"leaderId":3,"voters":[{"voterId":3,'
                                      '"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA"}],"grantingVoters":[]}')


def test_transaction_markers_and_unknown_types_are_not_kraft_records():
    assert control_text(0, struct.pack(">hi", 0, 5)) is None
    assert control_text(7, b"") is None


@pytest.mark.parametrize("type_id, value, message", [
    (3, struct.pack(">hq", 0, 99)[:-1], "ends at byte 9"),
    (4, struct.pack(">h", 1) + b"\x00", "version 1; versions 0 to 0"),
    (5, None, "null value"),
    (6, struct.pack(">h", 0) + b"\x00", "null array"),
    (6, struct.pack(">h", 0) + b"\xff" * 6, "longer than 5 bytes"),
])
def test_malformed_values_raise(type_id, value, message):
    with pytest.raises(InvalidRecordError, match=message):
        control_text(type_id, value)
