"""A read-only ``Log`` follows the leader-epoch cache of a writer in another process: new
epochs, truncations and a missing ``leader-epoch-checkpoint`` (rebuilt in memory, never
written)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pylog import Log
from pylog.record import encode_batch

WRITER = textwrap.dedent("""
    import sys
    from pylog import Log
    log = Log.open(sys.argv[1], auto_high_watermark=False)
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "append":  # EPOCH COUNT: one batch of COUNT records in EPOCH
            log.replica_view.leader_epoch = int(args[0])
            log.append([b"v"] * int(args[1]))
        elif command == "truncate":
            log.truncate_to(int(args[0]))
        else:
            break
        print("done", log.log_end_offset, flush=True)
    log.close()
""")


class Writer:
    """The partition's writer in another process; each command returns once it is done."""

    def __init__(self, path, tmp_path):
        script = tmp_path / "writer.py"
        script.write_text(WRITER)
        self.proc = subprocess.Popen([sys.executable, str(script), str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert self.proc.stdout.readline().strip() == "ready"

    def do(self, command: str) -> int:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().split()
        assert answer[:1] == ["done"], answer
        return int(answer[1])

    def close(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


@pytest.fixture
def writer(tmp_path):
    w = Writer(tmp_path / "t-0", tmp_path)
    yield w
    if w.proc.poll() is None:
        w.proc.kill()
        w.proc.wait()


def test_a_read_only_log_follows_the_writers_new_epochs_and_truncations(tmp_path, writer):
    writer.do("append 0 2")
    with Log.open(tmp_path / "t-0", read_only=True) as reader:
        assert reader.replica_view.end_offset_for_epoch(0) == (0, 2)
        assert writer.do("append 3 2") == 4
        assert reader.replica_view.end_offset_for_epoch(0) == (0, 2)  # epoch 3 began at 2
        assert reader.replica_view.end_offset_for_epoch(3) == (3, 4)
        assert writer.do("append 5 1") == 5
        assert reader.replica_view.end_offset_for_epoch(4) == (3, 4) and reader.replica_view.end_offset_for_epoch(5) == (5, 5)
        assert writer.do("truncate 2") == 2
        assert reader.replica_view.end_offset_for_epoch(3) == (-1, -1)  # newer than every epoch left
        assert reader.replica_view.end_offset_for_epoch(0) == (0, 2)
        assert writer.do("append 7 3") == 5
        assert reader.replica_view.end_offset_for_epoch(0) == (0, 2) and reader.replica_view.end_offset_for_epoch(7) == (7, 5)
    writer.close()


def test_a_read_only_log_rebuilds_a_missing_epoch_checkpoint_in_memory_only(tmp_path):
    path = tmp_path / "t-0"
    with Log.open(path, auto_high_watermark=False) as log:
        log.append_as_follower(encode_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=1)
                               + encode_batch([b"c"], base_offset=2, partition_leader_epoch=4))
    os.remove(path / "leader-epoch-checkpoint")
    before = sorted(os.listdir(path))
    with Log.open(path, read_only=True) as reader:
        assert reader.replica_view.end_offset_for_epoch(1) == (1, 2)
        assert reader.replica_view.end_offset_for_epoch(4) == (4, 3)
        assert reader.replica_view.leader_epoch == 4
    assert sorted(os.listdir(path)) == before
