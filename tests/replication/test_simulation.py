"""A seeded simulation of a replicated partition: random appends with random acks,
follower pauses and lag, replica crashes, restarts and elections; after every step the
invariants of docs/replication.md hold. A few seeds by default, hundreds with ``--soak``.

A crash closes the replica's files without its clean-shutdown marker, so its next start
recovers the log (the page cache survives, as when a process is killed);
tests/replication/test_transport.py kills follower processes with SIGKILL.
"""

from __future__ import annotations

import os
import random

import pytest

from pylog.errors import (
    LeaderNotAvailableError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError, ReplicationTimeoutError,
)
from pylog.log.segments import batches_from
from tests.replication.driven import LAG_MS, Clock, driven_set
from tests.replication.epochs import checkpoint_mismatch

REPLICAS = (0, 1, 2)
STEPS = 120
NOT_ACKNOWLEDGED = (NotEnoughReplicasError, NotEnoughReplicasAfterAppendError, ReplicationTimeoutError,
                    LeaderNotAvailableError)


class Simulation:
    def __init__(self, root, seed: int):
        self.root = root
        self.rng = random.Random(seed)
        self.rs = self.replica_set(root)
        self.acked: dict[int, bytes] = {}        # offset -> value, acknowledged with acks=all
        self.seen: dict[int, bytes] = {}         # offset -> value, read by the consumer
        self.next_read = 0
        self.hw_by_epoch: dict[int, int] = {}
        self.counter = 0
        self.log_lines: list[str] = []

    def replica_set(self, root):
        self.clock = Clock()
        return driven_set(root, clock=self.clock, min_insync_replicas=2)

    # -- actions -----------------------------------------------------------------------------------
    def step(self) -> None:
        rs, rng = self.rs, self.rng
        live = [r for r in REPLICAS if rs.replica(r).online]
        down = [r for r in REPLICAS if r not in live]
        action = rng.choices(["append", "replicate", "pause", "resume", "lag", "crash", "restart", "elect",
                              "preferred"], [30, 20, 6, 8, 5, 5, 8, 3, 2])[0]
        self.log_lines.append(f"{action} leader={rs.leader} epoch={rs.leader_epoch} isr={rs.isr} live={live}")
        if action == "append":
            self.append(rng.choice([0, 1, "all", "all"]))
        elif action == "replicate":
            rs.replicate()
        elif action == "pause":
            rs.pause(rng.choice(REPLICAS))
        elif action == "resume":
            rs.resume(rng.choice(REPLICAS))
        elif action == "lag":
            self.clock.advance(rng.choice([LAG_MS // 2, LAG_MS + 1]))
            rs.check_isr()
        elif action == "crash" and len(live) > 1:
            self.crash(rng.choice(live))
        elif action == "restart" and down:
            rs.restart_replica(rng.choice(down))
        elif action == "elect":
            self.elect()
        elif action == "preferred":
            rs.preferred_leader_election()

    def elect(self) -> None:
        """A clean election of a random replica, when it may lead."""
        try:
            self.rs.elect_leader(leader=self.rng.choice(REPLICAS))
        except LeaderNotAvailableError:
            pass

    def append(self, acks) -> None:
        n = self.rng.randint(1, 4)
        values = [b"v%d" % (self.counter + i) for i in range(n)]
        self.counter += n
        try:
            info = self.rs.append(values, acks=acks)
        except NOT_ACKNOWLEDGED:
            return
        if acks == "all":
            for i, v in enumerate(values):
                self.acked[info.first_offset + i] = v

    def crash(self, replica_id: int) -> None:
        """The replica dies: its files closed, no clean-shutdown marker (recovery on restart)."""
        rep = self.rs.replica(replica_id)
        log_dir = os.path.dirname(rep.path)
        self.rs.fail_replica(replica_id)
        marker = os.path.join(log_dir, ".kafka_cleanshutdown")
        if os.path.exists(marker):
            os.remove(marker)

    # -- invariants --------------------------------------------------------------------------------
    def check(self) -> None:
        rs = self.rs
        if rs.leader < 0:
            return  # offline: nothing to read; checked again once an ISR replica is back
        leader = rs.log(rs.leader)
        hw = leader.high_watermark
        previous = self.hw_by_epoch.get(rs.leader_epoch, 0)
        assert hw >= previous, f"high watermark went back from {previous} to {hw} in epoch {rs.leader_epoch}"
        self.hw_by_epoch[rs.leader_epoch] = hw
        on_leader = {r.offset: r.value for r in leader.records(end_offset=leader.log_end_offset)}
        for offset, value in self.acked.items():
            assert on_leader.get(offset) == value, f"acknowledged offset {offset} lost: {on_leader.get(offset)!r}"
        for offset, value in self.seen.items():
            assert on_leader.get(offset) == value, f"consumed offset {offset} taken back"
        for r in rs.records(self.next_read):
            assert r.offset < hw, f"consumer saw offset {r.offset} at or above the high watermark {hw}"
            self.seen[r.offset] = r.value
            self.next_read = r.offset + 1
        reference = _batches_below(leader, hw)
        for rid in REPLICAS:
            log = rs.log(rid)
            if log is None or rs.replica(rid).needs_truncation:
                continue  # a replica back from a crash agrees once it cut where it diverged
            mine = _batches_below(log, min(hw, log.log_end_offset))
            assert mine == reference[: len(mine)], f"replica {rid} disagrees with the leader below the HW"
            assert checkpoint_mismatch(log) is None, checkpoint_mismatch(log)

    def check_files(self) -> None:
        """Log.check() and Kafka's (kafka-python's) batch validation on every live replica."""
        from kafka.record.default_records import DefaultRecordBatch
        for rid in REPLICAS:
            log = self.rs.log(rid)
            if log is None:
                continue
            assert log.check() == [], (rid, log.check())
            for seg in log.segments:
                data = seg.read_slice(0, seg.size_bytes)
                for b in batches_from([seg], seg.base_offset, seg.next_offset):
                    kb = DefaultRecordBatch(bytearray(data[b.position:b.position + b.size]))
                    assert kb.validate_crc(), f"replica {rid}: batch at {b.base_offset} fails Kafka's CRC check"
                    assert [r.offset for r in kb] == list(range(b.base_offset, b.last_offset + 1))


def _batches_below(log, bound: int) -> list[tuple]:
    """(base offset, last offset, leader epoch, CRC) of the batches wholly below ``bound``."""
    if bound <= log.log_start_offset:
        return []
    return [(b.base_offset, b.last_offset, b.partition_leader_epoch, b.crc)
            for b in batches_from(log.segments, log.log_start_offset, bound) if b.last_offset < bound]


def run(root, seed: int, steps: int) -> None:
    sim = Simulation(root, seed)
    try:
        for i in range(steps):
            sim.step()
            try:
                sim.check()
                if i % 20 == 19:
                    sim.check_files()
            except AssertionError as e:
                raise AssertionError(f"seed {seed}, step {i}: {e}\n" + "\n".join(sim.log_lines[-15:])) from None
        for r in REPLICAS:  # the end: everyone back, caught up, and in agreement
            sim.rs.resume(r)
            if not sim.rs.replica(r).online:
                sim.rs.restart_replica(r)
        for _ in range(50):
            if not sim.rs.replicate():
                break
        sim.check()
        sim.check_files()
    finally:
        sim.rs.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeded_simulation(tmp_path, seed, soak):
    seeds = range(seed * 1000, seed * 1000 + 100) if soak else [seed]
    for s in seeds:
        run(tmp_path / f"seed-{s}", s, STEPS)
