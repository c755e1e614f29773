"""A seeded simulation of a partition whose replicas are processes (``ProcessReplicaSet``):
random appends with random acks, SIGKILL of any replica (the leader too, also right after
a replica behind it came back), stalls (SIGSTOP), restarts and elections. After every step, over TCP: no record acknowledged with
``acks="all"`` (``min_insync_replicas=2``, clean elections) is lost; a consumer sees nothing
at or above the high watermark, and nothing it saw is taken back; the leader's high
watermark never moves back within its epoch; the replicas hold the same bytes below their
high watermarks. On disk, each killed replica's directory (recovered, in a copy) and every
directory at the end passes ``Log.check()``, with a leader-epoch-checkpoint matching its
batches. A few seeds by default, hundreds with ``--soak``.
"""

from __future__ import annotations

import shutil
import signal

import pytest

from pylog import Log
from pylog.record.batch import decode_batches
from pylog.replication import ProcessReplicaSet
from tests.replication.epochs import checkpoint_mismatch
from tests.replication.processes import batches, replica_log
from tests.replication.test_simulation import REPLICAS, Simulation
from tests.waiting import wait_until

STEPS = 30


class ProcessSimulation(Simulation):
    """The thread simulation's appends and elections, on replica processes."""

    def replica_set(self, root):
        return ProcessReplicaSet(root / "rs", "events-0", replicas=REPLICAS, min_insync_replicas=2)

    # -- actions -----------------------------------------------------------------------------------
    def step(self) -> None:
        rs, rng = self.rs, self.rng
        live = list(rs.live_replicas)
        down = [r for r in REPLICAS if r not in live]
        action = rng.choices(["append", "crash", "restart", "failover", "elect", "preferred"],
                             [50, 12, 10, 6, 5, 3])[0]
        self.log_lines.append(f"{action} state={rs.state.to_json().decode()} live={live}")
        if action == "append":
            self.append(rng.choice([0, 1, "all", "all"]))
        elif action == "crash" and len(live) > 1:
            self.crash(rng.choice(live), rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGSTOP]))
        elif action == "restart" and down:
            rs.restart_replica(rng.choice(down))
        elif action == "failover" and down and rs.leader in live:
            rs.restart_replica(rng.choice(down))  # back, maybe behind: it must not lead before it caught up
            self.crash(rs.leader, signal.SIGKILL)
        elif action == "elect":
            self.elect()
        elif action == "preferred":
            rs.preferred_leader_election()

    def crash(self, replica_id: int, sig: int) -> None:
        self.rs.fail_replica(replica_id, sig=sig)
        if sig == signal.SIGKILL:
            check_directory_after_crash(self.rs.path(replica_id), self.root / "copy")

    # -- invariants --------------------------------------------------------------------------------
    def check(self) -> None:
        rs = self.rs
        state = rs.state
        if state.leader < 0:
            return  # offline: checked again once an ISR replica is back
        logs = {r: replica_log(rs.address(r)) for r in rs.live_replicas}
        leader_resp, leader_raw = logs[state.leader]
        on_leader = {rec.offset: rec.value for b in decode_batches(leader_raw) for rec in b}
        for offset, value in self.acked.items():
            assert on_leader.get(offset) == value, f"acknowledged offset {offset} lost: {on_leader.get(offset)!r}"
        self.consume(state.leader_epoch)
        for offset, value in self.seen.items():
            assert on_leader.get(offset) == value, f"consumed offset {offset} taken back"
        hw = leader_resp.high_watermark
        for r, (resp, raw) in logs.items():
            below = min(resp.high_watermark, hw)
            mine, reference = batches(raw, below), batches(leader_raw, below)
            assert mine == reference, f"replica {r} disagrees with the leader {state.leader} below offset {below}"

    def consume(self, epoch: int) -> None:
        """Read on from the last offset read, as a consumer (up to the high watermark)."""
        client = self.rs.client(self.rs.leader)
        while True:
            resp, raw = client.consume(self.next_read)
            assert resp.error is None, resp.error
            previous = self.hw_by_epoch.get(epoch, 0)
            assert resp.high_watermark >= previous, \
                f"high watermark went back from {previous} to {resp.high_watermark} in epoch {epoch}"
            self.hw_by_epoch[epoch] = resp.high_watermark
            records = [rec for b in decode_batches(raw) for rec in b if rec.offset >= self.next_read]
            if not records:
                return
            for rec in records:
                assert rec.offset < resp.high_watermark, \
                    f"consumer saw offset {rec.offset} at or above the high watermark {resp.high_watermark}"
                self.seen[rec.offset] = rec.value
            self.next_read = records[-1].offset + 1

    def finish(self) -> None:
        """Everyone back and caught up; then, stopped, every directory checked and equal."""
        rs = self.rs
        for r in REPLICAS:
            if r not in rs.live_replicas:
                rs.restart_replica(r)
        wait_until(lambda: rs.isr == REPLICAS and len({replica_log(rs.address(r))[1] for r in REPLICAS}) == 1
                   and rs.high_watermark == replica_log(rs.address(rs.leader))[0].log_end_offset,
                   "every replica to catch up and join the ISR")
        self.check()
        rs.close()
        raws = []
        for r in REPLICAS:
            with Log.open(rs.path(r)) as log:
                assert log.check() == [], (r, log.check())
                assert checkpoint_mismatch(log) is None, checkpoint_mismatch(log)
                raws.append(log.read(log.log_start_offset, 1 << 30).raw())
        assert raws[0] == raws[1] == raws[2], "the replicas differ after catching up"


def check_directory_after_crash(path, copy) -> None:
    """A SIGKILLed replica's directory, recovered in a copy (the original is left to the
    replica's own recovery): it passes Log.check() and its epochs match its batches."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy / "events-0")
    with Log.open(copy / "events-0") as log:
        assert log.check() == [], log.check()
        assert checkpoint_mismatch(log) is None, checkpoint_mismatch(log)


def run(root, seed: int, steps: int) -> None:
    root.mkdir(parents=True)
    sim = ProcessSimulation(root, seed)
    try:
        for i in range(steps):
            sim.step()
            try:
                sim.check()
            except AssertionError as e:
                raise AssertionError(f"seed {seed}, step {i}: {e}\n" + "\n".join(sim.log_lines[-15:])) from None
        sim.finish()
    finally:
        sim.rs.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeded_process_simulation(tmp_path, seed, soak):
    seeds = range(seed * 1000, seed * 1000 + 100) if soak else [seed]
    for s in seeds:
        run(tmp_path / f"seed-{s}", s, STEPS * 4 if soak else STEPS)
