"""``GroupMembership`` with several members in one process (a server's clients, or two
Consumers): they share the process's lease, which outlives the first to leave."""

from __future__ import annotations

import pytest

from pylog.coordinator.group_membership import GroupMembership
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
