"""Checkpoint files (pylog/checkpoint.py), byte for byte as docs/format/checkpoints.md
specifies; malformed files raise ``CorruptCheckpointError`` naming the file."""

from __future__ import annotations

import os

import pytest

from pylog.checkpoint import OffsetCheckpoint
from pylog.errors import CorruptCheckpointError
from tests.conftest import SAMPLES

WORKED_EXAMPLE = b"0\n2\norders 0 17212\norders 1 9954\n"


@pytest.fixture
def path(tmp_path):
    return tmp_path / "recovery-point-offset-checkpoint"


# -- offset checkpoints ---------------------------------------------------------------------------
def test_spec_worked_example_bytes(path):
    OffsetCheckpoint(path).write({("orders", 1): 9954, ("orders", 0): 17212})
    assert path.read_bytes() == WORKED_EXAMPLE


def test_spec_worked_example_reads(path):
    path.write_bytes(WORKED_EXAMPLE)
    assert OffsetCheckpoint(path).read() == {("orders", 0): 17212, ("orders", 1): 9954}


def test_no_entries_is_version_and_zero(path):
    OffsetCheckpoint(path).write({})
    assert path.read_bytes() == b"0\n0\n"
    assert OffsetCheckpoint(path).read() == {}


def test_a_missing_or_empty_file_has_no_entries(path):
    assert OffsetCheckpoint(path).read() == {}
    path.write_bytes(b"")
    assert OffsetCheckpoint(path).read() == {}


def test_a_last_line_without_newline_reads(path):
    path.write_bytes(WORKED_EXAMPLE.rstrip(b"\n"))
    assert OffsetCheckpoint(path).read() == {("orders", 0): 17212, ("orders", 1): 9954}


def test_write_replaces_the_file_and_leaves_no_temporary(path):
    path.write_bytes(WORKED_EXAMPLE)
    OffsetCheckpoint(path).write({("t", 0): 1})
    assert path.read_bytes() == b"0\n1\nt 0 1\n"
    assert os.listdir(path.parent) == [path.name]


@pytest.mark.parametrize("case, text", [
    ("wrong version", b"1\n1\nt 0 1\n"),
    ("version not a number", b"x\n1\nt 0 1\n"),
    ("missing count line", b"0\n"),
    ("count not a number", b"0\none\nt 0 1\n"),
    ("count above the lines", b"0\n3\nt 0 1\nt 1 2\n"),
    ("count below the lines", b"0\n1\nt 0 1\nt 1 2\n"),
    ("offset not a number", b"0\n1\nt 0 x\n"),
    ("partition not a number", b"0\n1\nt x 1\n"),
    ("too few fields", b"0\n1\nt 0\n"),
    ("too many fields", b"0\n1\nt 0 1 2\n"),
    ("empty entry line", b"0\n1\n\n"),
    ("not UTF-8", b"0\n1\n\xff 0 1\n"),
])
def test_malformed_offset_checkpoint_raises_naming_the_file(path, case, text):
    path.write_bytes(text)
    with pytest.raises(CorruptCheckpointError) as e:
        OffsetCheckpoint(path).read()
    assert e.value.path == str(path) and str(path) in str(e.value)


def test_a_malformed_line_is_named_by_its_number(path):
    path.write_bytes(b"0\n2\nt 0 1\nt 1 x\n")
    with pytest.raises(CorruptCheckpointError, match="line 4"):
        OffsetCheckpoint(path).read()


# -- files written by Kafka ------------------------------------------------------------------------------
@pytest.mark.skipif(SAMPLES is None, reason="Kafka samples not found: set PYLOG_KAFKA_SAMPLES or put "
                                            "shared/kafka-samples beside the checkout")
def test_kafkas_checkpoint_files_read_and_write_back_the_same_bytes(tmp_path):
    offsets = sorted((SAMPLES / "real").rglob("*-offset-checkpoint"))
    assert offsets
    for src in offsets:  # Kafka writes its lines in hash order; the content is what counts
        entries = OffsetCheckpoint(src).read()
        assert len(entries) == int(src.read_text().split("\n")[1]), src
        OffsetCheckpoint(tmp_path / "offsets").write(entries)
        assert OffsetCheckpoint(tmp_path / "offsets").read() == entries
