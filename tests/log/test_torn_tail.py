"""What opening says and does about an invalid tail: a recovery that truncates logs it (as
Kafka does) and reports it; a tail that does not validate under a clean-shutdown marker
(the marker lies) is recovered by a writable open, and a read-only open stops at the last
valid batch and says so; ``pylog describe`` and ``verify`` show it, ``verify --repair``
repairs it."""

from __future__ import annotations

import json
import logging
import os

import pytest

from pylog import Log, LogManager
from pylog.layout import CLEAN_SHUTDOWN_FILE
from tests.cli.test_cli import pylog

FIRST_SEGMENT = "00000000000000000000.log"


def _closed_log_dir(root, batches: int = 3):
    """A log dir of topic t (one partition), closed cleanly: its marker is present."""
    with LogManager(root) as m:
        t = m.create_topic("t", 1)
        for i in range(batches):
            t.append([b"value-%d" % i])
    assert (root / CLEAN_SHUTDOWN_FILE).exists()
    return root / "t-0" / FIRST_SEGMENT


def _last_batch_position(segment_file) -> int:
    with Log.open(segment_file.parent, read_only=True) as log:
        return [h.position for h in log.active_segment.headers()][-1]


def _flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {
    "torn": lambda path: os.truncate(path, os.path.getsize(path) - 5),
    "crc": _flip_last_byte,
    "zeros": lambda path: open(path, "ab").write(b"\0" * 64),
    "garbage": lambda path: open(path, "ab").write(b"\x00" * 8 + b"\x00\x00\x00\x50" + b"\x07" * 30),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_writable_open_recovers_a_tail_the_clean_shutdown_marker_vouched_for(tmp_path, damage, caplog):
    segment_file = _closed_log_dir(tmp_path)
    position = _last_batch_position(segment_file) if damage in ("torn", "crc") else os.path.getsize(segment_file)
    DAMAGE[damage](segment_file)
    size = os.path.getsize(segment_file)
    with caplog.at_level(logging.WARNING, logger="pylog"), Log.open(tmp_path / "t-0") as log:
        assert log.load_report.truncated_bytes == size - position
        assert [(t.path, t.position, t.bytes) for t in log.load_report.truncations] == [
            (str(segment_file), position, size - position)]
        end = 2 if damage in ("torn", "crc") else 3
        assert log.log_end_offset == end
        assert log.append([b"after"]).first_offset == end
    assert f"found invalid batch at position {position} in {segment_file}, truncating {size - position} bytes" \
        in caplog.text
    with Log.open(tmp_path / "t-0", read_only=True) as log:
        assert [r.value for r in log.records()][-1] == b"after"
        assert log.check() == []


@pytest.mark.parametrize("damage", ["torn", "crc"])
def test_a_read_only_open_stops_at_the_last_valid_batch_and_says_so(tmp_path, damage, caplog):
    segment_file = _closed_log_dir(tmp_path)
    position = _last_batch_position(segment_file)
    DAMAGE[damage](segment_file)
    before = segment_file.read_bytes()
    with caplog.at_level(logging.WARNING, logger="pylog"), Log.open(tmp_path / "t-0", read_only=True) as log:
        assert [r.value for r in log.records()] == [b"value-0", b"value-1"]
        assert log.log_end_offset == 2
        assert [(t.position, t.bytes) for t in log.load_report.truncations] == [(position, len(before) - position)]
        assert log.load_report.truncated_bytes == 0  # nothing was cut
    assert f"found invalid batch at position {position} in {segment_file}" in caplog.text
    assert "pylog verify --repair" in caplog.text
    assert segment_file.read_bytes() == before


def test_commands_get_past_a_torn_tail_under_the_marker(tmp_path):
    segment_file = _closed_log_dir(tmp_path)
    _flip_last_byte(segment_file)
    described = pylog("describe", tmp_path)
    assert described.returncode == 0, described.stderr
    assert "found invalid batch at position" in described.stderr.decode()
    assert "pylog verify --repair" in described.stderr.decode()
    consumed = pylog("consume", tmp_path, "--topic", "t")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.decode().split() == ["value-0", "value-1"]
    produced = pylog("produce", tmp_path, "--topic", "t", stdin=b"new\n")
    assert produced.returncode == 0, produced.stderr
    consumed = pylog("consume", tmp_path, "--topic", "t")
    assert consumed.stdout.decode().split() == ["value-0", "value-1", "new"]
    assert pylog("verify", tmp_path).returncode == 0


def test_verify_reports_an_invalid_tail_and_repair_truncates_it(tmp_path):
    segment_file = _closed_log_dir(tmp_path)
    position = _last_batch_position(segment_file)
    DAMAGE["crc"](segment_file)
    size = os.path.getsize(segment_file)
    checked = pylog("verify", tmp_path)
    assert checked.returncode == 1
    assert f"found invalid batch at position {position} in {segment_file}" in checked.stdout.decode()
    assert os.path.getsize(segment_file) == size
    repaired = pylog("verify", "--repair", tmp_path)
    assert f"found invalid batch at position {position} in {segment_file}, truncating {size - position} bytes" \
        in repaired.stdout.decode()
    assert repaired.returncode == 0, repaired.stdout
    assert os.path.getsize(segment_file) == position
    assert pylog("verify", tmp_path).returncode == 0


def test_a_recovery_after_a_crash_logs_and_reports_what_it_cut(tmp_path, caplog):
    segment_file = _closed_log_dir(tmp_path)
    os.remove(tmp_path / CLEAN_SHUTDOWN_FILE)
    position = os.path.getsize(segment_file)
    with open(segment_file, "ab") as f:
        f.write(b"\x01" * 40)
    with caplog.at_level(logging.WARNING, logger="pylog"), Log.open(tmp_path / "t-0") as log:
        assert log.load_report.truncated_bytes == 40
        assert [(t.position, t.bytes) for t in log.load_report.truncations] == [(position, 40)]
    assert f"found invalid batch at position {position} in {segment_file}, truncating 40 bytes" in caplog.text


def test_an_intact_log_under_the_marker_is_not_recovered(tmp_path, caplog):
    _closed_log_dir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="pylog"), Log.open(tmp_path / "t-0") as log:
        assert log.load_report.clean and log.load_report.recovered_segments == []
        assert log.load_report.truncations == []
    assert caplog.text == ""


def test_a_damaged_batch_with_whole_batches_after_it_is_corruption_not_a_tail(tmp_path):
    segment_file = _closed_log_dir(tmp_path)
    data = bytearray(segment_file.read_bytes())
    data[70] ^= 0xFF  # inside the records of the first of three batches
    segment_file.write_bytes(bytes(data))
    with Log.open(tmp_path / "t-0") as log:
        assert log.load_report.truncations == [] and log.log_end_offset == 3
        assert any("record batch is corrupt" in problem for problem in log.check())
    assert segment_file.read_bytes() == bytes(data)


def _flip_base_offset_high_bits(segment_file, position: int) -> None:
    """Damage the last batch's base offset (outside its CRC) so that it cannot be right."""
    data = bytearray(segment_file.read_bytes())
    data[position + 2] ^= 0x7F
    segment_file.write_bytes(bytes(data))


def test_after_a_crash_with_no_writer_alive_a_read_only_open_stops_before_an_invalid_tail(tmp_path, caplog):
    segment_file = _closed_log_dir(tmp_path)
    position = _last_batch_position(segment_file)
    _flip_base_offset_high_bits(segment_file, position)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # as a crash leaves it
    before = segment_file.read_bytes()
    with caplog.at_level(logging.WARNING, logger="pylog"), Log.open(tmp_path / "t-0", read_only=True) as log:
        assert log.log_end_offset == 2
        assert [r.value for r in log.records()] == [b"value-0", b"value-1"]
    assert f"found invalid batch at position {position} in {segment_file}" in caplog.text
    assert segment_file.read_bytes() == before
    described = pylog("describe", "--json", tmp_path)
    assert described.returncode == 0, described.stderr
    [row] = json.loads(described.stdout)
    assert row["log_end_offset"] == 2
    assert [(t["path"], t["position"], t["bytes"]) for t in row["invalid_tail"]] == [
        (str(segment_file), position, len(before) - position)]
    checked = pylog("verify", tmp_path)
    assert checked.returncode == 1
    assert f"found invalid batch at position {position} in {segment_file}" in checked.stdout.decode()


def test_a_read_only_open_beside_a_live_writer_trusts_its_tail(tmp_path):
    _closed_log_dir(tmp_path)
    with Log.open(tmp_path / "t-0") as writer:
        writer.append([b"value-3"])
        with Log.open(tmp_path / "t-0", read_only=True) as reader:
            assert reader.log_end_offset == 4
            assert reader.load_report.truncations == []
