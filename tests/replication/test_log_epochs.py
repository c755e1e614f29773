"""The leader-epoch cache kept by ``Log`` on every path: leader and follower appends,
truncation at both ends, recovery, and directories a Kafka broker wrote."""

from __future__ import annotations

import os
import shutil

import pytest

from pylog import Log
from pylog.checkpoint import LeaderEpochCheckpoint
from pylog.errors import InvalidArgumentError
from pylog.log.segments import batches_from
from pylog.record import decode_batches, encode_batch
from tests.conftest import SAMPLES, needs_samples, sample_partitions
from tests.replication.epochs import checkpoint_mismatch

#: Names Kafka writes in a partition directory (besides segment, index and snapshot files).
KAFKA_PARTITION_FILES = {"leader-epoch-checkpoint", "partition.metadata"}


def checkpoint_of(log) -> list[tuple[int, int]]:
    return LeaderEpochCheckpoint(os.path.join(log.path, "leader-epoch-checkpoint")).read()


def batch_epochs(log) -> list[tuple[int, int]]:
    return [(b.base_offset, b.partition_leader_epoch)
            for b in batches_from(log.segments, log.log_start_offset, log.log_end_offset)]


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "t-0", auto_high_watermark=True) as log:
        yield log


def test_leader_appends_stamp_the_epoch_and_record_each_new_one(log):
    log.append([b"a", b"b"])
    log.replica_view.leader_epoch = 3
    log.append([b"c"])
    log.append([b"d"])
    assert batch_epochs(log) == [(0, 0), (2, 3), (3, 3)]
    assert checkpoint_of(log) == [(0, 0), (3, 2)]


def test_append_batches_stamps_the_epoch_too(log):
    log.replica_view.leader_epoch = 2
    log.append_batches(encode_batch([b"x", b"y"], partition_leader_epoch=0))
    assert batch_epochs(log) == [(0, 2)] and checkpoint_of(log) == [(2, 0)]


def test_follower_appends_record_the_epochs_they_copy(log):
    log.append_as_follower(encode_batch([b"a"], base_offset=0, partition_leader_epoch=1)
                           + encode_batch([b"b", b"c"], base_offset=1, partition_leader_epoch=4))
    assert checkpoint_of(log) == [(1, 0), (4, 1)]
    assert log.replica_view.leader_epoch == 4  # a follower that leads next never stamps an older epoch


def test_the_leader_epoch_cannot_be_set_outside_int32(log):
    with pytest.raises(InvalidArgumentError):
        log.replica_view.leader_epoch = -1


def test_truncate_to_cuts_the_epochs_at_the_end(log):
    for epoch in (0, 1, 2):
        log.replica_view.leader_epoch = epoch
        log.append([b"v"] * 3)
    log.truncate_to(6)
    assert checkpoint_of(log) == [(0, 0), (1, 3)]
    log.truncate_to(4)  # whole batches go: the log ends at 3
    assert checkpoint_of(log) == [(0, 0)]
    log.truncate_to(0)
    assert checkpoint_of(log) == []


def test_delete_records_cuts_the_epochs_at_the_start(log):
    for epoch in (0, 1, 2):
        log.replica_view.leader_epoch = epoch
        log.append([b"v"] * 3)
    log.delete_records(4)
    assert checkpoint_of(log) == [(1, 4), (2, 6)]


def test_truncate_fully_and_start_at_empties_the_log_for_good_at_a_later_offset(tmp_path):
    with Log.open(tmp_path / "t-0", auto_high_watermark=False, segment_bytes=200) as log:
        for epoch in (0, 1):
            log.replica_view.leader_epoch = epoch
            log.append([b"v" * 50], producer_id=7, producer_epoch=0, base_sequence=epoch)
        log.replica_view.truncate_fully_and_start_at(40)
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (40, 40, 40)
        assert [s.base_offset for s in log.segments] == [40] and checkpoint_of(log) == []
        log.append_as_follower(encode_batch([b"w"], base_offset=40, partition_leader_epoch=5))
    with Log.open(tmp_path / "t-0", auto_high_watermark=False) as log:
        assert (log.log_start_offset, log.log_end_offset) == (40, 41) and checkpoint_of(log) == [(5, 40)]
        assert [r.value for r in log.records()] == [b"w"] and log.check() == []
        info = log.append([b"x"], producer_id=7, producer_epoch=0, base_sequence=0)  # its old sequences are gone
        assert info.first_offset == 41


def test_retention_cuts_the_epochs_at_the_start(tmp_path):
    with Log.open(tmp_path / "t-0", segment_bytes=200, retention_bytes=250) as log:
        for epoch in range(6):
            log.replica_view.leader_epoch = epoch
            log.append([b"v" * 50])
        log.enforce_retention()
        assert log.log_start_offset > 0
        assert checkpoint_of(log)[0] == (log.log_start_offset, log.log_start_offset)
        assert checkpoint_mismatch(log) is None


def test_end_offset_for_epoch_answers_offsets_for_leader_epoch(log):
    for epoch, n in ((1, 2), (3, 3), (4, 1)):
        log.replica_view.leader_epoch = epoch
        log.append([b"v"] * n)
    assert log.replica_view.end_offset_for_epoch(1) == (1, 2)
    assert log.replica_view.end_offset_for_epoch(2) == (1, 2)
    assert log.replica_view.end_offset_for_epoch(3) == (3, 5)
    assert log.replica_view.end_offset_for_epoch(4) == (4, 6)
    assert log.replica_view.end_offset_for_epoch(0) == (0, 0)
    assert log.replica_view.end_offset_for_epoch(9) == (-1, -1)
    with pytest.raises(InvalidArgumentError):
        log.replica_view.end_offset_for_epoch(-2)


def _three_epochs(path) -> None:
    with Log.open(path) as log:
        for epoch in (0, 2, 5):
            log.replica_view.leader_epoch = epoch
            log.append([b"v"] * 2)


@pytest.mark.parametrize("damage", ["missing", "malformed", "not increasing"])
def test_recovery_rebuilds_a_missing_or_wrong_checkpoint_from_the_batches(tmp_path, damage):
    path = tmp_path / "t-0"
    _three_epochs(path)
    cp = path / "leader-epoch-checkpoint"
    if damage == "missing":
        cp.unlink()
    else:
        cp.write_text("0\n2\n0 0\nnonsense\n" if damage == "malformed" else "0\n2\n5 0\n2 2\n")
    with Log.open(path) as log:
        assert checkpoint_of(log) == [(0, 0), (2, 2), (5, 4)]


def test_recovery_drops_epochs_of_batches_lost_in_a_crash(tmp_path):
    path = tmp_path / "t-0"
    _three_epochs(path)
    seg = path / "00000000000000000000.log"
    first = next(iter(decode_batches(seg.read_bytes())))
    with open(seg, "r+b") as f:  # the epoch-2 batch is torn, the epoch-5 one gone
        f.truncate(first.size + 5)
    os.remove(tmp_path / ".kafka_cleanshutdown")
    with Log.open(path) as log:
        assert log.log_end_offset == 2
        assert checkpoint_of(log) == [(0, 0), (2, 2)]  # epoch 2 had begun at the new log end
        log.append([b"w"])
        assert batch_epochs(log)[-1] == (2, 2)


def test_recovery_adds_epochs_of_batches_the_checkpoint_missed(tmp_path):
    path = tmp_path / "t-0"
    _three_epochs(path)
    LeaderEpochCheckpoint(path / "leader-epoch-checkpoint").write([(0, 0)])
    os.remove(tmp_path / ".kafka_cleanshutdown")
    with Log.open(path) as log:
        assert checkpoint_of(log) == [(0, 0), (2, 2), (5, 4)]


@needs_samples
def test_appending_after_a_brokers_epoch_7_batches_never_goes_back(tmp_path):
    src = SAMPLES / "real" / "mixed-gzip-headers-0"
    broker = LeaderEpochCheckpoint(src / "leader-epoch-checkpoint").read()
    assert broker[-1][0] == 7
    shutil.copytree(src, tmp_path / src.name)
    with Log.open(tmp_path / src.name) as log:
        info = log.append([b"after the broker"])
        assert batch_epochs(log)[-1] == (info.first_offset, 7)
        assert checkpoint_of(log) == broker
        assert log.replica_view.end_offset_for_epoch(6) == (6, 14)


@needs_samples
@pytest.mark.parametrize("src", [p for p in sample_partitions() if (p / "leader-epoch-checkpoint").exists()],
                         ids=lambda p: p.name)
def test_appending_to_a_brokers_directory_keeps_its_checkpoint_and_file_names(tmp_path, src):
    broker = LeaderEpochCheckpoint(src / "leader-epoch-checkpoint").read()
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    with Log.open(dst) as log:
        log.append([b"x"])
        log.replica_view.leader_epoch = broker[-1][0] + 1
        log.append([b"y"])
        latest = batch_epochs(log)
        assert latest[-2][1] >= broker[-1][0] and latest[-1][1] == broker[-1][0] + 1
        assert checkpoint_of(log)[: len(broker)] == broker
        assert checkpoint_mismatch(log) is None
    stray = {n for n in os.listdir(dst) if n not in KAFKA_PARTITION_FILES
             and not n.endswith((".log", ".index", ".timeindex", ".txnindex", ".snapshot"))}
    assert stray == set()


def test_a_log_whose_batches_carry_no_epoch_is_scanned_once(tmp_path):
    path = tmp_path / "t-0"
    with Log.open(path) as log:
        log.append_as_follower(encode_batch([b"a"], base_offset=0, partition_leader_epoch=-1))
    assert not (path / "leader-epoch-checkpoint").exists()  # nothing to say yet
    with Log.open(path) as log:
        assert checkpoint_of(log) == []
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n0\n"


def test_a_failed_checkpoint_write_takes_the_new_epochs_append_back(tmp_path):
    from pylog.errors import StorageError
    from tests.reliability.faulty_io import FaultyIO
    io = FaultyIO()
    with Log.open(tmp_path / "t-0", io=io) as log:
        log.append([b"a", b"b"])
        log.replica_view.leader_epoch = 3
        io.fail_path_suffix = "leader-epoch-checkpoint.tmp"
        with pytest.raises(StorageError):
            log.append([b"c"])
        assert log.log_end_offset == 2 and log.replica_view.end_offset_for_epoch(0) == (0, 2)
        assert checkpoint_of(log) == [(0, 0)]
        io.fail_path_suffix = None
        log.append([b"c"])
        assert checkpoint_of(log) == [(0, 0), (3, 2)] and checkpoint_mismatch(log) is None
