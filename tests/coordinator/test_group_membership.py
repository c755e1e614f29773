"""``GroupMembership`` with several members in one process (a server's clients, or two
Consumers): they share the process's lease, which outlives the first to leave. The group
coordinator's memberships share one open lock file, however many groups it sees."""

from __future__ import annotations

import pytest

import os

from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_membership import GroupMembership
from pylog.layout import CLIENTS_LOCK_FILE
from pylog.errors import UnknownMemberIdError


def _join(membership, member_id=None) -> str:
    return membership.join(member_id, topics=["t"], assignors=["range"], session_timeout_ms=30_000,
                           rebalance_timeout_ms=30_000, client_id="c")


def test_a_member_stays_alive_after_another_member_of_its_process_left(tmp_path):
    membership = GroupMembership(str(tmp_path), "g")
    try:
        first = _join(membership)
        second = _join(membership)
        _join(membership, first)  # the first rejoins: the generation with both completes
        membership.leave(first)
        state = membership.heartbeat(second)  # the lease of the process still holds for it
        assert list(state["members"]) == [second]
        assert membership.live_members(state) == [second]
        membership.leave(second)
        with pytest.raises(UnknownMemberIdError):
            membership.heartbeat(second)
    finally:
        membership.close()


def _lock_file_descriptors(root) -> int:
    """This process's open descriptors of ``root``'s clients lock file."""
    path = os.path.join(os.path.realpath(root), CLIENTS_LOCK_FILE)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == path
        except OSError:  # closed meanwhile
            pass
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc (Linux)")
def test_the_group_coordinator_holds_one_lock_file_for_all_its_groups_and_keeps_them_apart(tmp_path):
    root = str(tmp_path)
    before = _lock_file_descriptors(root)
    coordinator = GroupCoordinator.for_root(root)
    try:
        members = {f"group-{i}": _join(coordinator.membership(f"group-{i}")) for i in range(40)}
        assert _lock_file_descriptors(root) - before <= 2  # the pool's and the groups' (one each used to be 40)
        for group, member in members.items():
            membership = coordinator.membership(group)
            assert membership.live_members(membership.heartbeat(member)) == [member]
        consumer_side = GroupMembership(root, "group-0")  # a Consumer of this process: a lock file of its own
        try:
            mine = _join(consumer_side)
            assert sorted(consumer_side.live_members(consumer_side.read())) == sorted([members["group-0"], mine])
            coordinator.membership("group-0").leave(members["group-0"])
            assert consumer_side.live_members(consumer_side.read()) == [mine]
        finally:
            consumer_side.close()
    finally:
        coordinator.release()
    assert _lock_file_descriptors(root) == before
