"""pylog/errors.py: the hierarchy, and that each error raised by real damage or a bad call
says what is wrong and where (file, byte position), with ``path`` set for file errors."""

from __future__ import annotations

import os

import pytest

import pylog
from pylog import Log, LogManager, Record
from pylog.checkpoint import read_checkpoint
from pylog.cli.main import main as cli_main
from pylog.errors import (
    CorruptCheckpointError, CorruptFileError, CorruptIndexError, CorruptRecordError, CorruptSnapshotError,
    DuplicateSequenceError, IncompleteBatchError, InvalidArgumentError, InvalidRecordError, LogDirNotFoundError,
    PylogError, RecordFormatError,
)
from pylog.index import OffsetIndex
from pylog.producer_state import read_snapshot
from pylog.segment import LogFile
from pylog.spark import plan

CORRUPT_FILE_ERRORS = [CorruptRecordError, CorruptIndexError, CorruptSnapshotError, CorruptCheckpointError]


# -- the hierarchy -------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", CORRUPT_FILE_ERRORS)
def test_every_corrupt_file_error_is_a_corrupt_file_error_and_no_other_ones_kind(cls):
    assert issubclass(cls, CorruptFileError) and issubclass(cls, PylogError)
    assert not any(issubclass(cls, other) for other in CORRUPT_FILE_ERRORS if other is not cls)


def test_argument_errors_are_not_format_errors():
    assert issubclass(InvalidArgumentError, ValueError)
    assert not issubclass(InvalidArgumentError, RecordFormatError)
    assert not issubclass(InvalidRecordError, CorruptFileError)
    assert not issubclass(IncompleteBatchError, CorruptFileError)  # a torn tail is the end, not damage
    assert issubclass(CorruptRecordError, RecordFormatError)


def test_every_public_error_is_exported_and_no_private_base_is():
    assert "CorruptFileError" in pylog.__all__
    assert not [n for n in pylog.__all__ if n.startswith("_")]


def test_duplicate_sequence_error_says_it_is_never_raised():
    assert "Never raised" in DuplicateSequenceError.__doc__


@pytest.mark.parametrize("cls", CORRUPT_FILE_ERRORS)
def test_the_message_names_the_file_and_the_position(cls):
    e = cls("bad bytes", path="/data/orders-0/00000000000000000000.log", position=42)
    assert (e.path, e.position, e.reason) == ("/data/orders-0/00000000000000000000.log", 42, "bad bytes")
    assert str(e) == "bad bytes (at /data/orders-0/00000000000000000000.log, position 42)"
    assert str(cls("bad bytes")) == "bad bytes"


# -- raised by real damage -------------------------------------------------------------------------
@pytest.fixture
def log_path(tmp_path):
    path = tmp_path / "orders-0"
    with Log.open(path) as log:
        log.append([Record(b"value-%d" % i, key=b"k") for i in range(10)])
    return path


def test_a_flipped_bit_in_a_segment_is_a_corrupt_record_error_naming_file_and_position(log_path):
    """A damaged batch with a whole batch after it is corruption (a damaged last batch is
    a torn tail, which a read-only open stops before: tests/log/test_torn_tail.py)."""
    segment = log_path / "00000000000000000000.log"
    first_batch_bytes = segment.stat().st_size
    with Log.open(log_path) as log:
        log.append([b"after"])
    data = bytearray(segment.read_bytes())
    data[first_batch_bytes - 3] ^= 0x01
    segment.write_bytes(bytes(data))
    with Log.open(log_path, read_only=True) as log:
        with pytest.raises(CorruptFileError) as e:
            list(log.records())
    assert isinstance(e.value, CorruptRecordError)
    assert (e.value.path, e.value.position) == (str(segment), 0)
    assert str(segment) in str(e.value) and "position 0" in str(e.value) and "CRC" in str(e.value).upper()


def test_a_ragged_index_is_a_corrupt_index_error_naming_the_file(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes(13))
    with pytest.raises(CorruptFileError) as e:
        OffsetIndex(path, 0, writable=False).sanity_check()
    assert isinstance(e.value, CorruptIndexError)
    assert e.value.path == str(path) and str(path) in str(e.value) and "13" in str(e.value)


def test_a_damaged_snapshot_is_a_corrupt_snapshot_error_naming_the_file(tmp_path):
    path = tmp_path / "00000000000000000010.snapshot"
    path.write_bytes(b"\x00\x01" + bytes(30))
    with pytest.raises(CorruptFileError) as e:
        read_snapshot(path)
    assert isinstance(e.value, CorruptSnapshotError)
    assert e.value.path == str(path) and str(path) in str(e.value)


def test_a_malformed_checkpoint_is_a_corrupt_checkpoint_error_naming_file_and_line(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("0\n1\norders 0\n")
    with pytest.raises(CorruptFileError) as e:
        read_checkpoint(str(path), lambda parts: (parts[0], int(parts[1]), int(parts[2])))
    assert isinstance(e.value, CorruptCheckpointError)
    assert e.value.path == str(path) and "line 3" in str(e.value) and str(path) in str(e.value)


# -- bad calls ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("records, what", [
    ([Record(b"v", timestamp=2**64)], "timestamp"),
    ([Record(b"v", headers=[(b"k", b"v")])], "header key"),
    ([(b"k", 12)], "value"),
    ([12345], "int"),
])
def test_a_record_python_cannot_encode_is_an_argument_error_not_a_format_error(log_path, records, what):
    with Log.open(log_path) as log:
        with pytest.raises(InvalidArgumentError, match=what) as e:
            log.append(records)
        assert not isinstance(e.value, RecordFormatError)
        assert log.log_end_offset == 10


def test_truncating_a_log_file_past_its_end_is_an_argument_error_naming_the_file(log_path):
    f = LogFile(str(log_path / "00000000000000000000.log"), writable=True)
    with pytest.raises(InvalidArgumentError) as e:
        f.truncate_to(f.size_bytes + 1)
    assert f.path in str(e.value)
    f.release()


def test_the_cli_and_spark_open_a_missing_log_dir_the_same_way(tmp_path, capsys):
    missing = str(tmp_path / "nowhere")
    for read_only in (True, False):
        with pytest.raises(LogDirNotFoundError, match="no log dir at .*nowhere"):
            LogManager.open_existing(missing, read_only=read_only)
    with pytest.raises(LogDirNotFoundError, match="no log dir at .*nowhere"):
        plan.open_log_dir(missing)
    assert not os.path.exists(missing)
    assert cli_main(["verify", missing]) == 1
    assert "no such directory" in capsys.readouterr().err
