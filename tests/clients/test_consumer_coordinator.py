"""``ConsumerCoordinator``: group membership, rebalances and commits driven through a
subscription state alone (no Consumer), on a real log dir and group file."""

from __future__ import annotations

import pytest

from pylog.clients.consumer_coordinator import ConsumerCoordinator, OffsetAndMetadata
from pylog.clients.subscription_state import ConsumerRebalanceListener, SubscriptionState, TopicPartition
from pylog.errors import UnknownMemberIdError
from tests.clients.conftest import make_topic
from tests.waiting import wait_until

PARTITIONS = {TopicPartition("t", p) for p in range(4)}


class Recorder(ConsumerRebalanceListener):
    def __init__(self):
        self.calls = []

    def on_partitions_revoked(self, revoked):
        self.calls.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned):
        self.calls.append(("assigned", assigned))


@pytest.fixture
def members(root):
    """``join(listener=None) -> (coordinator, subscriptions)``: a member of group "g"
    subscribed to "t"; all closed at the end."""
    made = []

    def join(listener=None, assignor="range"):
        subscriptions = SubscriptionState()
        subscriptions.subscribe(["t"], listener=listener)
        coordinator = ConsumerCoordinator(root, "g", subscriptions, assignors=(assignor,), session_timeout_ms=10_000,
                                          heartbeat_interval_ms=100, max_poll_interval_ms=300_000, client_id="test",
                                          enable_auto_commit=False, auto_commit_interval_ms=5000,
                                          list_topics=lambda: ["t"])
        coordinator.subscribe()
        made.append(coordinator)
        return coordinator, subscriptions
    yield join
    for coordinator in made:
        coordinator.close()


def test_two_members_split_the_partitions_through_their_subscription_states(root, members):
    make_topic(root, "t", 4)
    listener = Recorder()
    first, first_state = members(listener)
    first.poll()
    wait_until(lambda: first.poll() or first_state.assignment() == PARTITIONS, "the first member owning all")
    assert listener.calls == [("assigned", PARTITIONS)]
    second, second_state = members()

    def split():
        first.poll()
        second.poll()
        return first_state.assignment() and second_state.assignment() and first.generation == second.generation
    wait_until(split, "a generation with both members")
    assert first_state.assignment() | second_state.assignment() == PARTITIONS
    assert not first_state.assignment() & second_state.assignment()
    assert ("revoked", PARTITIONS) in listener.calls  # range is eager: everything is given up first


def test_positions_commit_with_their_epoch_and_come_back_as_positions(root, members):
    make_topic(root, "t", 4)
    coordinator, subscriptions = members()
    wait_until(lambda: coordinator.poll() or subscriptions.assignment() == PARTITIONS, "the assignment")
    tp = TopicPartition("t", 2)
    subscriptions.seek(tp, 42, epoch=3)
    committed = coordinator.commit_sync()
    assert committed == {tp: OffsetAndMetadata(42, "", 3)}
    assert coordinator.committed(tp).offset == 42
    fresh = SubscriptionState()
    fresh.assign_from_user(PARTITIONS)
    reader = ConsumerCoordinator(root, "g", fresh, assignors=("range",), session_timeout_ms=10_000,
                                 heartbeat_interval_ms=100, max_poll_interval_ms=300_000, client_id="test",
                                 enable_auto_commit=False, auto_commit_interval_ms=5000, list_topics=lambda: ["t"])
    try:
        reader.refresh_committed_offsets()
    finally:
        reader.close()
    assert fresh.all_consumed() == {tp: (42, 3)}
    assert set(fresh.missing_positions()) == PARTITIONS - {tp}


def test_a_member_that_left_cannot_commit_while_the_group_has_members(root, members):
    make_topic(root, "t", 4)
    first, first_state = members()
    wait_until(lambda: first.poll() or first_state.assignment() == PARTITIONS, "the assignment")
    second, second_state = members()
    wait_until(lambda: first.poll() or second.poll() or second_state.assignment(), "the second member's share")
    first.leave_group()
    assert first.group_metadata().generation_id == -1
    wait_until(lambda: second.poll() or second_state.assignment() == PARTITIONS, "the survivor owning all")
    with pytest.raises(UnknownMemberIdError):
        first.commit_sync({TopicPartition("t", 0): 1})
    assert first.committed(TopicPartition("t", 0)) is None
