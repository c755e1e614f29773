"""Every replica in its own process (``ProcessReplicaSet``, ``python -m
pylog.replication.broker``), the leader included: leaders SIGKILLed or stalled, Kafka's
Produce errors, consumers bounded by the high watermark, and the partition state changed
by compare-and-set from several processes (docs/replication.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from pylog import Log
from pylog.errors import (
    FencedLeaderEpochError, InvalidArgumentError, LogClosedError, NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError, NotLeaderOrFollowerError, PylogWarning, ReplicaTransportError, ReplicationTimeoutError,
)
from pylog.record.encode import encode_batch
from pylog.replication import ProcessReplicaSet
from pylog.replication.broker_client import BrokerClient, close_process, start_process
from pylog.replication import wire
from pylog.replication.protocol import FENCED_LEADER_EPOCH, LeaderAndIsrRequest, ProduceRequest, ProduceResponse
from pylog.replication.state import PartitionState, alter_partition, read_state, update_state
from tests.replication.epochs import checkpoint_mismatch
from tests.replication.processes import replica_log, replica_values
from tests.waiting import wait_until


def test_produce_and_leader_and_isr_bytes_as_documented():
    produce = ProduceRequest(b"", -1, 30_000, 4)
    frame = wire.encode_produce_request(5, produce)
    assert frame.hex() == "0000001400000000000500000004ffff0000753000000000"
    assert wire.decode_request(frame[4:]) == (wire.PRODUCE, 5, produce)
    lai = LeaderAndIsrRequest(1, 1, 4, 9, (1, 2), (0, 1, 2), ("127.0.0.1", 9093))
    frame = wire.encode_leader_and_isr_request(8, lai)
    assert frame.hex() == ("00000041000400000008000000010000000100000004000000090000000200000001000000020000"
                           "000300000000000000010000000200093132372e302e302e3100002385")
    assert wire.decode_request(frame[4:]) == (wire.LEADER_AND_ISR, 8, lai)
    answer = ProduceResponse("NOT_ENOUGH_REPLICAS", 4, -1, -1, "ISR (0,) is smaller than 2")
    assert wire.decode_produce_response(wire.encode_produce_response(3, answer)[4:]) == (3, answer)


def test_a_malformed_leader_and_isr_is_refused_clearly():
    frame = wire.encode_leader_and_isr_request(8, LeaderAndIsrRequest(1, 1, 4, 9, (1, 2), (0, 1, 2), ("h", 1)))
    with pytest.raises(ReplicaTransportError, match="malformed LeaderAndIsr request"):
        wire.decode_request(frame[4:-6])
    with pytest.raises(ReplicaTransportError, match="2 bytes after its fields"):
        wire.decode_request(frame[4:] + b"xx")


def test_the_leader_process_is_sigkilled_after_acknowledging_acks_all_records_and_the_new_leader_has_them(tmp_path):
    sent = [b"%d" % i for i in range(30)]
    with ProcessReplicaSet(tmp_path, "events-0", replicas=3, min_insync_replicas=2) as rs:
        for value in sent:
            rs.append([value], acks="all")
        old, epoch = rs.leader, rs.leader_epoch
        proc = rs.process(old)
        rs.fail_replica(old)  # SIGKILL
        assert proc.returncode == -signal.SIGKILL
        assert rs.leader != old and rs.leader_epoch == epoch + 1 and old not in rs.isr
        assert rs.state.replicas == (0, 1, 2)
        assert replica_values(rs, rs.leader) == sent
        wait_until(lambda: rs.high_watermark == len(sent), "the new leader's high watermark to reach the old one's")
        assert [r.value for r in rs.records()] == sent
        rs.append([b"after"], acks="all")
        rs.restart_replica(old)  # recovers its log, follows, rejoins the ISR
        wait_until(lambda: old in rs.isr, "the old leader to catch up and rejoin the ISR")
        assert replica_values(rs, old) == sent + [b"after"]
    for r in range(3):
        with Log.open(tmp_path / f"broker-{r}" / "events-0") as log:
            assert [rec.value for rec in log.records()] == sent + [b"after"]
            assert log.check() == [] and checkpoint_mismatch(log) is None


def test_a_stale_leader_process_that_comes_back_is_fenced_by_the_epoch_and_truncates(tmp_path):
    with ProcessReplicaSet(tmp_path, "events-0", replicas=3, min_insync_replicas=2) as rs:
        rs.append([b"a", b"b"], acks="all")
        stale, stale_epoch = rs.leader, rs.leader_epoch
        stale_client = BrokerClient(rs.address(stale))
        rs.fail_replica(stale, sig=signal.SIGSTOP)  # it stalls; the controller elects another leader
        new_epoch = rs.leader_epoch
        assert rs.leader != stale and new_epoch == stale_epoch + 1
        rs.append([b"c"], acks="all")
        os.kill(rs.process(stale).pid, signal.SIGCONT)  # back, still believing it leads stale_epoch
        try:
            # a producer that missed the election: the stale leader writes alone, commits nothing
            lonely = stale_client.produce(encode_batch([b"lonely"]), acks=1, leader_epoch=stale_epoch)
            assert lonely.first_offset == 2
            with pytest.raises(ReplicationTimeoutError):
                stale_client.produce(encode_batch([b"never"]), acks="all", timeout_ms=300, leader_epoch=stale_epoch)
            with pytest.raises(NotLeaderOrFollowerError, match=f"not the leader of epoch {new_epoch}"):
                stale_client.produce(encode_batch([b"x"]), acks=1, leader_epoch=new_epoch)
            with pytest.raises(FencedLeaderEpochError):
                rs.client(rs.leader).produce(encode_batch([b"x"]), acks=1, leader_epoch=stale_epoch)
            # its ISR change is refused: the record names another leader epoch
            state = rs.state
            assert alter_partition(rs.state_path, stale, stale_epoch, state.partition_epoch, (stale,)) == (False, state)
            assert rs.isr == state.isr and stale not in rs.isr
        finally:
            stale_client.close()
        rs.restart_replica(stale)  # LeaderAndIsr: follow the new leader; cut by leader epochs
        leader = rs.leader
        wait_until(lambda: replica_log(rs.address(stale))[1] == replica_log(rs.address(leader))[1],
                   "the stale leader to cut its own records and copy the new leader's")
        assert replica_values(rs, stale) == [b"a", b"b", b"c"]
        older = LeaderAndIsrRequest(1, stale, stale_epoch, 0, (stale,), (0, 1, 2), rs.address(stale))
        assert rs.client(stale, controller=True).leader_and_isr(older) == FENCED_LEADER_EPOCH


def test_produce_answers_kafkas_errors_and_consumers_stop_at_the_high_watermark(tmp_path):
    with ProcessReplicaSet(tmp_path, "events-0", replicas=2, min_insync_replicas=2,
                           replica_lag_time_max_ms=600_000) as rs:
        rs.append([b"a"], acks="all")
        follower = 1 - rs.leader
        _stall(rs.process(follower))  # unknown to the controller: still in the ISR
        with pytest.raises(ReplicationTimeoutError, match="not on every ISR replica"):
            rs.append([b"b"], acks="all", timeout_ms=200)
        rs.append([b"c"], acks=1)
        assert [r.value for r in rs.records()] == [b"a"]  # b and c are above the high watermark
        assert replica_values(rs, rs.leader) == [b"a", b"b", b"c"]

        outcome = []
        producer = threading.Thread(target=lambda: outcome.append(_raised(lambda: rs.append([b"d"], acks="all"))))
        producer.start()
        wait_until(lambda: replica_log(rs.address(rs.leader))[0].log_end_offset == 4, "d to be written")
        rs.fail_replica(follower)  # the controller takes it out of the ISR: the high watermark moves on
        producer.join()
        assert isinstance(outcome[0], NotEnoughReplicasAfterAppendError), outcome
        assert [r.value for r in rs.records()] == [b"a", b"b", b"c", b"d"]
        with pytest.raises(NotEnoughReplicasError):
            rs.append([b"e"], acks="all")
        assert rs.append([b"e"], acks=1).first_offset == 4


def test_a_replica_killed_before_checkpointing_its_high_watermark_does_not_take_its_log_end_for_it(tmp_path):
    path = tmp_path / "broker-0" / "events-0"
    proc, address = start_process(path, 0)
    client = BrokerClient(address)
    try:
        # leader of an ISR whose other member never fetches: nothing is committed
        assert client.leader_and_isr(LeaderAndIsrRequest(1, 0, 1, 1, (0, 1), (0, 1), address)) is None
        client.produce(encode_batch([b"a", b"b"]), acks=1)
        assert replica_log(address)[0].high_watermark == 0
    finally:
        client.close()
        close_process(proc, signal.SIGKILL)  # before any replication-offset-checkpoint was written
    proc, address = start_process(path, 0)
    try:
        resp, _ = replica_log(address)
        assert (resp.log_end_offset, resp.high_watermark) == (2, 0)
    finally:
        close_process(proc)


@pytest.mark.parametrize("unclean", [False, True])
def test_every_isr_replica_down_waits_for_one_or_elects_an_out_of_sync_one_when_unclean(tmp_path, unclean):
    with ProcessReplicaSet(tmp_path, "events-0", replicas=2, unclean_leader_election_enable=unclean) as rs:
        rs.append([b"a"], acks="all")
        rs.fail_replica(1)  # out of the ISR
        rs.append([b"b"], acks=1)
        rs.fail_replica(0)  # the last ISR replica: offline
        assert rs.leader == -1
        rs.restart_replica(1)
        if not unclean:
            assert rs.leader == -1  # consistency: wait for the ISR replica
            rs.restart_replica(0)
            assert rs.leader == 0 and [r.value for r in rs.records()] == [b"a", b"b"]
        else:
            assert rs.leader == 1 and rs.isr == (1,)  # availability: b is lost
            assert [r.value for r in rs.records()] == [b"a"]
            rs.restart_replica(0)
            wait_until(lambda: replica_values(rs, 0) == [b"a"], "the old leader to cut b")


def _stall(proc) -> None:
    """SIGSTOP the process and wait until it stopped."""
    proc.send_signal(signal.SIGSTOP)
    os.waitpid(proc.pid, os.WUNTRACED)


def _raised(call):
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - the test looks at which
        return e


def test_alter_partition_is_a_compare_and_set_refusing_stale_leaders(tmp_path):
    path = str(tmp_path / "events-0.state")
    update_state(path, lambda _: PartitionState(1, 4, (0, 1, 2), partition_epoch=7))
    assert alter_partition(path, 1, 3, 7, (1,))[0] is False  # an older leader epoch
    assert alter_partition(path, 0, 4, 7, (0,))[0] is False  # not the leader
    assert alter_partition(path, 1, 4, 6, (1,))[0] is False  # missed a change
    assert alter_partition(path, 1, 4, 7, (0, 2))[0] is False  # an ISR without the leader
    accepted, now = alter_partition(path, 1, 4, 7, (2, 1))
    assert accepted and now == read_state(path) and (now.isr, now.partition_epoch) == ((1, 2), 8)


CAS_LOOP = """
import sys
from pylog.replication.state import alter_partition, read_state
path, leader, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
done = 0
while done < rounds:
    s = read_state(path)
    done += alter_partition(path, s.leader, s.leader_epoch, s.partition_epoch, s.isr)[0]
"""


def test_processes_changing_the_partition_state_at_once_lose_no_change(tmp_path):
    path = str(tmp_path / "events-0.state")
    update_state(path, lambda _: PartitionState(0, 1, (0, 1)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", CAS_LOOP, path, "0", "40"], env=env) for _ in range(4)]
    assert [p.wait() for p in procs] == [0] * 4
    assert read_state(path).partition_epoch == 160


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tgkill, /proc/<pid>/task: Linux")
def test_a_replica_process_stops_on_sigterm_whichever_of_its_threads_takes_it(tmp_path):
    """The kernel hands a process's SIGTERM to any thread that does not block it; Python runs
    the handler only in the main thread, so a main thread waiting without end never saw one
    taken by another thread, and close() waited for ever. Sent to each thread in turn here."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    tgkill = 234  # SYS_tgkill on x86_64; aarch64 has 131
    if os.uname().machine == "aarch64":
        tgkill = 131
    proc, _ = start_process(tmp_path / "broker-0" / "events-0", 0)
    try:
        threads = sorted(int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid)
        assert threads, "the replica process runs threads besides its main one"
        assert libc.syscall(tgkill, proc.pid, threads[-1], signal.SIGTERM) == 0, ctypes.get_errno()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def test_closing_a_process_that_ignores_sigterm_kills_it_after_the_timeout_with_a_warning():
    code = "import signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\n"
    with pytest.warns(PylogWarning, match=f"replica process {proc.pid} did not stop within 0.5 s of SIGTERM"):
        assert close_process(proc, stop_timeout_s=0.5) == -signal.SIGKILL


def test_a_produce_waits_for_its_answer_past_the_connections_own_timeout(tmp_path):
    """A Produce with ``timeout_ms`` beyond the client's socket timeout gets the leader's
    REQUEST_TIMED_OUT answer, not a broken connection at the socket's timeout."""
    with ProcessReplicaSet(tmp_path, "events-0", replicas=2, min_insync_replicas=2,
                           replica_lag_time_max_ms=600_000) as rs:
        rs.append([b"a"], acks="all")
        _stall(rs.process(1 - rs.leader))  # still in the ISR
        client = BrokerClient(rs.address(rs.leader), timeout_s=0.5)
        try:
            with pytest.raises(ReplicationTimeoutError):
                client.produce(encode_batch([b"b"]), acks="all", timeout_ms=1500, leader_epoch=rs.leader_epoch)
        finally:
            client.close()
            rs.process(1 - rs.leader).send_signal(signal.SIGCONT)


def test_failing_a_replica_that_is_down_already_changes_nothing_and_closed_sets_refuse_controller_calls(tmp_path):
    rs = ProcessReplicaSet(tmp_path, "events-0", replicas=2)
    try:
        rs.fail_replica(1)
        rs.fail_replica(1)
        rs.fail_replica(1, sig=signal.SIGSTOP)
        assert rs.isr == (0,) and rs.process(1) is None
        with pytest.raises(InvalidArgumentError):
            rs.fail_replica(0, sig=0)
        with pytest.raises(InvalidArgumentError):
            rs.address(9)
    finally:
        rs.close()
    for call in (lambda: rs.restart_replica(1), lambda: rs.elect_leader(), lambda: rs.fail_replica(0),
                 lambda: rs.append([b"x"]), lambda: list(rs.records())):
        with pytest.raises(LogClosedError):
            call()
    assert rs.process(1) is None


def test_records_reads_past_a_fetch_that_ends_inside_a_batch(tmp_path):
    """A consumer Fetch answers at most 1 MiB and may end inside a batch, as Kafka's does:
    ``records`` stops before the partial batch and fetches it whole next time."""
    with ProcessReplicaSet(tmp_path, "big-0", replicas=1) as rs:
        for i in range(12):  # batches of ~100 KB: 1.2 MB, so the first fetch cuts the 11th
            rs.append([b"%06d" % (i * 100 + j) + b"x" * 994 for j in range(100)])
        got = [int(r.value[:6]) for r in rs.records()]
        assert got == list(range(1200))
        assert [int(r.value[:6]) for r in rs.records(1050)] == list(range(1050, 1200))
