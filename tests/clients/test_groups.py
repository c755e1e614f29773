"""Consumer groups across real processes: exactly-once distribution, a SIGKILLed member's
partitions moving to the survivors, zombie commits refused, offsets surviving restarts."""

from __future__ import annotations

import os
import signal

import pytest

from pylog.clients import Consumer, Producer, TopicPartition
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_membership import read_group_file
from pylog.errors import IllegalGenerationError, UnknownMemberIdError
from tests.clients.conftest import make_topic, start_worker
from tests.waiting import wait_until

RECORDS_PER_PARTITION = 150


def consumed(paths) -> list:
    out = []
    for path in paths:
        if os.path.exists(path):
            with open(path) as f:
                out += [tuple(map(int, line.split())) for line in f if line.count(" ") == 1 and line.endswith("\n")]
    return out


def produce(root, start, stop):
    with Producer(root) as producer:
        for p in range(6):
            for i in range(start, stop):
                producer.send("input", b"%d" % i, partition=p)


def test_three_processes_consume_every_record_and_a_killed_members_partitions_move(root, tmp_path):
    make_topic(root, "input", 6)
    outs = [str(tmp_path / f"member-{i}.txt") for i in range(3)]
    workers = [start_worker("group", root, "g", out) for out in outs]
    half = RECORDS_PER_PARTITION // 2
    try:
        def stable_with_three():
            state = read_group_file(root, "g")
            return state is not None and state["state"] == "Stable" and len(state["members"]) == 3 and all(
                state["assignment"].values())
        wait_until(stable_with_three, what="three members in a stable group")
        produce(root, 0, half)
        wait_until(lambda: all(consumed([o]) for o in outs), what="every member consuming")
        victim = workers[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        produce(root, half, RECORDS_PER_PARTITION)
        everything = {(p, o) for p in range(6) for o in range(RECORDS_PER_PARTITION)}
        wait_until(lambda: set(consumed(outs)) >= everything, "every record consumed", 60)
    finally:
        for w in workers:
            w.kill()
            w.wait()
    records = consumed(outs)
    victim_partitions = {p for p, _ in consumed(outs[:1])}
    seen = set()
    for rec in records:
        if rec in seen:  # a duplicate: only the killed member's last uncommitted poll
            assert rec[0] in victim_partitions
        seen.add(rec)
    duplicates = len(records) - len(seen)
    assert duplicates <= 10  # at most the one poll (max_records=10) it did not commit
    survivors = {p for p, _ in consumed(outs[1:])}
    assert victim_partitions <= survivors


def test_zombie_commit_after_a_rebalance_is_refused(root):
    make_topic(root, "input", 2, [(0, [b"a"]), (1, [b"b"])])
    opts = dict(auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=20,
                max_poll_interval_ms=300)
    zombie, survivor = Consumer(root, "g", **opts), Consumer(root, "g", **opts)
    zombie.subscribe(["input"])
    zombie.poll(1000)
    old_generation = zombie.group_metadata().generation_id
    survivor.subscribe(["input"])
    # the zombie never polls again: the survivor's rebalance drops it after max_poll_interval_ms
    wait_until(lambda: survivor.poll(50) is not None and len(survivor.assignment()) == 2, what="survivor owning all")
    with pytest.raises((UnknownMemberIdError, IllegalGenerationError)):
        zombie.commit({TopicPartition("input", 0): 1})
    coordinator = GroupCoordinator.for_root(root)
    member = survivor.group_metadata()
    with pytest.raises(IllegalGenerationError):
        coordinator.commit_offsets("g", {("input", 0): 1}, generation=old_generation, member_id=member.member_id)
    coordinator.release()
    survivor.commit({TopicPartition("input", 0): 1})
    assert survivor.committed(TopicPartition("input", 0)) == 1
    survivor.close()
    zombie.close(autocommit=False)


def test_two_groups_read_independently_and_offsets_survive_restarts(root):
    make_topic(root, "input", 1, [(0, [b"%d" % i for i in range(10)])])
    tp = TopicPartition("input", 0)
    for group, take in (("a", 3), ("b", 7)):
        with Consumer(root, group, auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.assign([tp])
            got = c.poll(1000, max_records=take)[tp]
            assert [r.offset for r in got] == list(range(take))
            c.commit()
    for group, start in (("a", 3), ("b", 7)):
        with Consumer(root, group, auto_offset_reset="earliest") as c:
            c.assign([tp])
            assert c.position(tp) == start and c.committed(tp) == start


def test_a_member_that_stops_polling_leaves_and_its_partitions_move(root):
    make_topic(root, "input", 2)
    opts = dict(auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=20)
    slow = Consumer(root, "g", max_poll_interval_ms=300, **opts)
    busy = Consumer(root, "g", **opts)
    slow.subscribe(["input"])
    busy.subscribe(["input"])
    wait_until(lambda: slow.poll(10) is not None and busy.poll(10) is not None
             and len(busy.assignment()) == len(slow.assignment()) == 1, what="one partition each")
    # slow stops polling: its heartbeat thread leaves the group after max_poll_interval_ms
    wait_until(lambda: busy.poll(20) is not None and len(busy.assignment()) == 2, what="busy owning both")
    with pytest.raises(UnknownMemberIdError):
        slow.commit({TopicPartition("input", 0): 0})
    busy.close()
    slow.poll(10)  # rejoins, having lost its partition without committing
    assert slow.assignment() == {TopicPartition("input", 0), TopicPartition("input", 1)}
    slow.close()
