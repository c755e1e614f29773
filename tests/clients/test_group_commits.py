"""Commits of one group whose members are processes: they all go to one
``__consumer_offsets`` partition, appended by the process holding its log for the others
(no hand-off of the log), read back by every process, kept when any process is SIGKILLed
after the acknowledgement, and still refused from a member the group removed."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

import pytest

from pylog.logdir import append_service
from tests.clients.conftest import make_topic, start_worker

pytestmark = pytest.mark.skipif(not append_service.SUPPORTED, reason="appends are served only on Linux")
ROUNDS = 20


class Member:
    """A ``committer`` worker process (tests/clients/workers.py) of group "g"."""

    def __init__(self, root: str, max_poll_interval_ms: int = 300_000):
        self.proc = start_worker("committer", root, "g", str(max_poll_interval_ms), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, bufsize=0)

    def send(self, command: str) -> None:
        self.proc.stdin.write(command.encode() + b"\n")

    def answer(self, timeout_s: float = 60.0) -> str:
        """The next line the worker prints (its acknowledgement), waited for up to ``timeout_s``."""
        deadline, line = time.monotonic() + timeout_s, b""
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([self.proc.stdout], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                raise AssertionError(f"no answer from the member within {timeout_s} s")
            char = self.proc.stdout.read(1)
            if not char:
                raise AssertionError("the member exited")
            line += char
        return line.decode().strip()

    def ask(self, command: str):
        self.send(command)
        return self.answer()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def ask_all(members, command: str) -> list:
    """``command`` to every member at once, then their answers."""
    for m in members:
        m.send(command)
    return [m.answer() for m in members]


@pytest.fixture
def members(root):
    make_topic(root, "input", 6)
    started: list[Member] = []

    def start(n: int = 3, **kwargs) -> list[Member]:
        started.extend(Member(root, **kwargs) for _ in range(n))
        return started[-n:]
    yield start
    for m in started:
        m.stop()


def partitions_of(answer: str) -> list[int]:
    return [int(p) for p in answer.split()]


def committed_by_all(members) -> list[dict]:
    return [{int(p): o for p, o in json.loads(a).items()} for a in ask_all(members, "committed")]


def test_three_member_processes_commit_at_once_through_the_holder_and_all_read_every_commit(members):
    group = members(3)
    owned = [partitions_of(a) for a in ask_all(group, "join 3")]
    assert sorted(p for ps in owned for p in ps) == list(range(6))
    for i, m in enumerate(group):
        m.send(f"commit {100 + i} {ROUNDS}")
    assert [m.answer() for m in group] == ["committed"] * 3
    expected = {p: 100 + i for i, ps in enumerate(owned) for p in ps}
    assert committed_by_all(group) == [expected] * 3
    stats = [json.loads(a) for a in ask_all(group, "stats")]
    assert sum(s["hand_offs"] for s in stats) == 0  # the offsets partition's log never changed process
    assert max(s["served"] for s in stats) >= 2 * ROUNDS  # one process appended the others' commits


@pytest.mark.parametrize("victim_is_holder", [True, False], ids=["holder-killed", "member-killed"])
def test_a_commit_acknowledged_before_a_sigkill_is_read_by_the_survivors(members, victim_is_holder):
    group = members(3)
    owned = [partitions_of(a) for a in ask_all(group, "join 3")]
    assert ask_all(group, "commit 1 1") == ["committed"] * 3
    served = [json.loads(a)["served"] for a in ask_all(group, "stats")]
    holder = max(range(3), key=served.__getitem__)
    assert served[holder] >= 2
    victim_index = holder if victim_is_holder else (holder + 1) % 3
    victim, victim_partitions = group[victim_index], owned[victim_index]
    survivors = [m for m in group if m is not victim]
    assert victim.ask("commit 7 1") == "committed"
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    for seen in committed_by_all(survivors):
        assert {p: seen[p] for p in victim_partitions} == {p: 7 for p in victim_partitions}
    # the survivors go on committing: a killed holder's log is taken over
    ask_all(survivors, "join 2")
    assert ask_all(survivors, "commit 9 1") == ["committed"] * 2
    assert committed_by_all(survivors) == [dict.fromkeys(range(6), 9)] * 2


def test_a_commit_from_a_member_process_the_group_removed_is_refused(members):
    steady = members(2)
    zombie = members(1, max_poll_interval_ms=500)[0]
    ask_all(steady + [zombie], "join 3")
    assert ask_all(steady + [zombie], "commit 3 1") == ["committed"] * 3
    # the zombie stops polling: its heartbeat thread leaves after max_poll_interval_ms
    ask_all(steady, "join 2")
    assert zombie.ask("commit 5 1") == "refused UnknownMemberIdError"
    assert committed_by_all(steady) == [dict.fromkeys(range(6), 3)] * 2


def test_a_forked_child_does_not_keep_serving_what_its_parent_gave_up(members, root):
    from pylog.coordinator.group_coordinator import GroupCoordinator
    coordinator = GroupCoordinator.for_root(root)
    coordinator.commit_offsets("g", {("input", 0): 1})  # this process holds the offsets partition and serves it
    assert coordinator.pool.served_appends == 0
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # lives on, holding whatever it inherited, until the test ends
        os.close(write_end)
        os.read(read_end, 1)
        os._exit(0)
    try:
        os.close(read_end)
        coordinator.release()  # gives the log up: another process must be able to take it and serve
        group = members(2)
        ask_all(group, "join 2")
        assert ask_all(group, "commit 4 1") == ["committed"] * 2
        stats = [json.loads(a) for a in ask_all(group, "stats")]
        assert max(s["served"] for s in stats) >= 1
    finally:
        os.close(write_end)
        os.waitpid(child, 0)
