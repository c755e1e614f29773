"""Disk full and failed writes: a failed append takes itself back whole (``.log`` cut back,
no index entry, offsets unchanged) and raises StorageError; rolls, flushes, compaction,
close and reopen raise StorageError too; the process never dies of SIGBUS; once space is
freed the log holds every acknowledged record, once each, also after a crash. A close of
many things (a LogManager, a producer, a group consumer, a ReplicaSet) that fails still
releases every one of them, and raises once.

The fault-injecting seam fails writes to one kind of file; the real full disk is a
size-limited tmpfs (root only), filled to the page, with the writer in a subprocess so
that a SIGBUS shows as a signal death instead of killing pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pylog import Log, LogManager
from pylog.clients import Consumer, Producer
from pylog.errors import StorageError
from pylog.replication import ReplicaSet
from tests.reliability.faulty_io import FaultyIO
from tests.reliability.full_disk import Filler, mounted_tmpfs, value
from tests.waiting import poll_until

ROOT = Path(__file__).resolve().parents[2]
FS_BYTES = 1 << 20


def _state(log: Log):
    """Everything an append could change, as readers and the files see it."""
    seg = log.active_segment
    sizes = {name: os.path.getsize(os.path.join(log.path, name)) for name in sorted(os.listdir(log.path))}
    return (log.log_end_offset, log.recovery_point, log.high_watermark, log.last_stable_offset,
            [(r.offset, r.value) for r in log.records()], seg.offset_index.entries(), seg.time_index.entries(),
            seg.txn_index.entries(), sizes)


# -- the fault-injecting seam: a write to one kind of file fails ------------------------------------------

def _log_with_faults(tmp_path, appends: int, **config) -> tuple[FaultyIO, Log]:
    """A log written through the fault-injecting seam, holding ``appends`` records (with
    increasing timestamps, so every indexed append adds a time-index entry too)."""
    io = FaultyIO()
    log = Log.open(tmp_path / "t-0", io=io, **config)
    for i in range(appends):
        log.append([value(i)], timestamp=1000 + i)
    return io, log


@pytest.mark.parametrize("suffix", [".index", ".timeindex", "recovery-point-offset-checkpoint.tmp"])
def test_a_write_failing_after_the_log_write_takes_the_append_back(tmp_path, suffix):
    io, log = _log_with_faults(tmp_path, 5, index_interval_bytes=0, flush_messages=1)  # entries every append
    before = _state(log)
    io.fail_path_suffix = suffix
    with pytest.raises(StorageError):
        log.append([value(5)], timestamp=1005)
    assert io.faults == 1
    assert _state(log) == before
    assert log.check() == []
    io.fail_path_suffix = None
    assert log.append([value(5)], timestamp=1005).first_offset == 5
    log.close()
    with Log.open(log.path) as log:
        assert [(r.offset, r.value) for r in log.records()] == [(i, value(i)) for i in range(6)]
        assert log.check() == []


def test_a_failed_transaction_index_write_takes_the_abort_marker_back(tmp_path):
    io, log = _log_with_faults(tmp_path, 0)
    log.append([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    before = _state(log)
    io.fail_path_suffix = ".txnindex"
    with pytest.raises(StorageError):
        log.append_txn_marker(7, 0, commit=False)
    assert _state(log) == before  # the transaction is still open: nothing is stable
    io.fail_path_suffix = None
    assert log.append_txn_marker(7, 0, commit=False).first_offset == 2
    assert [txn[:3] for txn in log.active_segment.txn_index.entries()] == [(7, 0, 2)]
    assert list(log.records(isolation="committed")) == []
    log.close()
    with Log.open(log.path) as log:
        assert log.last_stable_offset == 3 and list(log.records(isolation="committed")) == []


def test_a_failed_roll_leaves_the_old_segment_active(tmp_path):
    io, log = _log_with_faults(tmp_path, 5)
    io.fail_path_suffix = ".snapshot.tmp"
    with pytest.raises(StorageError):
        log.roll()
    assert [s.base_offset for s in log.segments] == [0]
    assert not [name for name in os.listdir(log.path) if name.endswith(".tmp")]
    io.fail_path_suffix = None
    assert log.roll().base_offset == 5
    assert log.recovery_point == 5  # a roll that returns made everything before it durable
    log.close()


# -- a real full disk ---------------------------------------------------------------------------------------

APPEND_ON_FULL_DISK = textwrap.dedent("""
    import os, signal, sys
    from pylog import Log, StorageError
    from tests.reliability.full_disk import Filler, value
    mnt, warm_appends, flush_messages, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    log = Log.open(os.path.join(mnt, "t-0"), index_interval_bytes=0, flush_messages=flush_messages)
    filler = Filler(os.path.join(mnt, "filler"))

    def append(i):
        log.append([value(i)], timestamp=1_000_000 + i)  # an offset and a time entry every append
        print(i, flush=True)  # acknowledged

    for i in range(warm_appends):
        append(i)
    filler.fill()
    i = warm_appends
    while i < total:  # the disk stays full: every new page the log or an index needs fails once
        try:
            append(i)
            i += 1
        except StorageError:
            assert log.log_end_offset == i, f"a failed append moved the log end to {log.log_end_offset}"
            filler.free_page()
    filler.free_all()
    for i in range(total, total + 20):
        append(i)
    log.flush()
    assert [r.offset for r in log.records()] == list(range(total + 20))
    assert log.check() == []
    os.kill(os.getpid(), signal.SIGKILL)  # a crash: no close
""")

CASES = {  # appends before the disk fills, flush_messages, appends in all
    "first-index-entry": (1, 2**62, 60),
    "index-page-boundaries": (300, 2**62, 600),  # time index page 1 at entry 341, offset index at 512
    "flush-every-append": (300, 1, 600),  # each flush writes checkpoints, which need a page too
}


def _run(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def _how_it_ended(out: subprocess.CompletedProcess) -> str:
    if out.returncode < 0:
        return f"writer killed by {signal.Signals(-out.returncode).name}:\n{out.stderr[-3000:]}"
    return f"writer exited with {out.returncode}:\n{out.stderr[-3000:]}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_appends_on_a_full_disk_fail_whole_and_lose_nothing(tmp_path, case):
    warm, flush_messages, total = CASES[case]
    with mounted_tmpfs(tmp_path / "fs", FS_BYTES) as mnt:
        out = _run(APPEND_ON_FULL_DISK, mnt, warm, flush_messages, total)
        assert out.returncode == -signal.SIGKILL, _how_it_ended(out)
        acked = [int(line) for line in out.stdout.split()]
        assert acked == list(range(total + 20))
        with Log.open(os.path.join(mnt, "t-0")) as log:
            assert [(r.offset, r.value) for r in log.records()] == [(i, value(i)) for i in acked]
            assert log.check() == []
            assert log.append([b"after"]).first_offset == len(acked)


MAINTENANCE_ON_FULL_DISK = textwrap.dedent("""
    import os, sys
    from pylog import Log, Record, StorageError
    from tests.reliability.full_disk import Filler, value
    mnt = sys.argv[1]
    path = os.path.join(mnt, "t-0")
    config = dict(segment_bytes=2048, index_interval_bytes=0, cleanup_policy="compact",
                  min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
    n = 120
    filler = Filler(os.path.join(mnt, "filler"))

    def refused(action, what):
        try:
            action()
        except StorageError:
            return
        raise AssertionError(f"{what} on a full disk did not raise StorageError")

    def check_all_there(log):
        assert [(r.offset, r.value) for r in log.records()] == [(i, value(i)) for i in range(n)]
        assert log.check() == []

    def key(i):  # the first records keep their keys: cleaning their segment must write
        return b"u%d" % i if i < 5 else b"k%d" % (i % 10)

    log = Log.open(path, **config)
    for i in range(n):
        log.append([Record(value(i), key=key(i))])
    filler.fill()
    bases = [s.base_offset for s in log.segments]
    refused(log.roll, "roll")
    assert [s.base_offset for s in log.segments] == bases, "a failed roll left a new segment"
    refused(log.flush, "flush (checkpoint write)")
    refused(log.compact, "compaction")
    assert not [name for name in os.listdir(path) if name.endswith(".cleaned")], os.listdir(path)
    check_all_there(log)
    refused(log.close, "close")
    assert not [name for name in os.listdir(mnt) if name.endswith(".tmp")], os.listdir(mnt)

    for name in os.listdir(path):  # a reopen that must rebuild indexes needs space for them
        if name.endswith((".index", ".timeindex")):
            os.remove(os.path.join(path, name))
    filler.fill()
    refused(lambda: Log.open(path, **config), "reopen")

    filler.free_all()
    log = Log.open(path, **config)
    check_all_there(log)
    log.roll()
    assert log.recovery_point == log.log_end_offset == n
    assert not log.compact().skipped
    assert {r.key: r.value for r in log.records()} == {key(i): value(i) for i in range(n)}
    log.append([Record(b"after", key=b"k0")])
    log.close()
    with Log.open(path, **config) as log:
        assert log.log_end_offset == n + 1 and log.check() == []
""")


def test_roll_flush_compaction_close_and_reopen_on_a_full_disk_raise_storage_error(tmp_path):
    with mounted_tmpfs(tmp_path / "fs", FS_BYTES) as mnt:
        out = _run(MAINTENANCE_ON_FULL_DISK, mnt)
        assert out.returncode == 0, _how_it_ended(out)


def test_a_group_consumer_closing_on_a_full_disk_raises_once_and_lets_the_group_go_on(tmp_path):
    """Its last commit and its leaving both need a write. close() raises the StorageError,
    yet releases everything: a second close (``with``) does nothing, and another member
    takes the partitions at once instead of after the session timeout. Before, close
    stopped at the failed leave: the member's files stayed held, and every close raised."""
    with mounted_tmpfs(tmp_path / "fs", FS_BYTES) as mnt:
        root = os.path.join(mnt, "d")
        os.makedirs(root)
        with LogManager(root) as m:
            m.create_topic("t", 2)
        with Producer(root) as p:
            for i in range(10):
                p.send("t", b"%d" % i, partition=i % 2)
        filler = Filler(os.path.join(mnt, "filler"))
        first = Consumer(root, "g", auto_offset_reset="earliest", session_timeout_ms=60_000)
        first.subscribe(["t"])
        poll_until(first, lambda: len(first.assignment()) == 2, "both partitions")
        filler.fill()
        with pytest.raises(StorageError):
            with first:
                first.close()
        filler.free_all()
        with Consumer(root, "g", auto_offset_reset="earliest", session_timeout_ms=60_000) as second:
            second.subscribe(["t"])
            poll_until(second, lambda: len(second.assignment()) == 2, "both partitions, well before the "
                       "60 s session timeout of the first member", timeout_s=20)


def _closing_on_a_full_disk_raises_once_and_releases(mnt, close, paths) -> None:
    """``close()`` on a full disk raises StorageError; once space is back, each log of
    ``paths`` opens for writing here (nothing kept it) and holds its one record ``x``."""
    filler = Filler(os.path.join(mnt, "filler"))
    filler.fill()
    with pytest.raises(StorageError):
        close()
    filler.free_all()
    for path in paths:
        with Log.open(path) as log:
            assert [r.value for r in log.records()] == [b"x"]


def test_a_log_manager_closing_on_a_full_disk_closes_every_log_and_raises_once(tmp_path):
    """Each log's close needs a write (its producer snapshot). The first failure used to end
    ``LogManager.close``: the other logs stayed open, their directories locked."""
    with mounted_tmpfs(tmp_path / "fs", FS_BYTES) as mnt:
        manager = LogManager(os.path.join(mnt, "d"))
        logs = [manager.create_topic(topic, 1).log(0) for topic in ("a", "b", "c")]
        for log in logs:
            log.append([b"x"])
        _closing_on_a_full_disk_raises_once_and_releases(mnt, manager.close, [log.path for log in logs])


def test_a_replica_set_closing_on_a_full_disk_closes_every_replica_and_raises_once(tmp_path):
    with mounted_tmpfs(tmp_path / "fs", FS_BYTES) as mnt:
        rs = ReplicaSet(os.path.join(mnt, "rs"), "b-0", replicas=3, min_insync_replicas=2, fetchers=False)
        rs.append([b"x"], acks="all", timeout_ms=10_000)
        _closing_on_a_full_disk_raises_once_and_releases(mnt, rs.close, [rs.log(r).path for r in rs.replica_ids])


def test_a_producer_closing_on_a_full_disk_lets_go_of_every_log(tmp_path):
    """The producer's writer pool closes each log it holds (a producer snapshot each). The
    first that failed used to keep the others open and locked in this process."""
    with mounted_tmpfs(tmp_path / "fs", FS_BYTES) as mnt:
        root = os.path.join(mnt, "d")
        with LogManager(root) as m:
            paths = [m.create_topic(topic, 1).log(0).path for topic in ("a", "b", "c")]
        producer = Producer(root)
        for topic in ("a", "b", "c"):
            producer.send(topic, b"x").get(10)
        _closing_on_a_full_disk_raises_once_and_releases(mnt, producer.close, paths)
