"""``SubscriptionState``: the subscription kinds, the assignment and each partition's
position, pause and deleted flags, in memory (no log dir)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.errors import ClientStateError, InvalidArgumentError, InvalidTopicError

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def record_at(offset: int, leader_epoch: int = 3):
    """What ``consumed`` reads of a ConsumerRecord."""
    return SimpleNamespace(offset=offset, leader_epoch=leader_epoch)


def test_assigned_partitions_start_without_a_position_and_take_the_one_seeked():
    s = SubscriptionState()
    s.assign_from_user([A0, A1])
    assert s.missing_positions() == [A0, A1]
    s.seek(A0, 7, epoch=2)
    assert s.position(A0) == 7 and s.missing_positions() == [A1]
    assert s.all_consumed() == {A0: (7, 2)}


def test_a_consumed_record_moves_the_position_past_it_with_its_leader_epoch():
    s = SubscriptionState()
    s.assign_from_user([A0])
    s.seek(A0, 0)
    s.consumed(A0, record_at(4, leader_epoch=5))
    assert s.all_consumed() == {A0: (5, 5)}


def test_a_new_assignment_keeps_the_state_of_the_partitions_it_keeps():
    s = SubscriptionState()
    s.assign_from_user([A0, A1])
    s.seek(A0, 10)
    s.pause(A0)
    removed, added = s.set_assignment([A0, B0])
    assert (removed, added) == ({A1}, {B0})
    assert s.position(A0) == 10 and s.paused() == {A0}
    assert s.position(B0) is None


def test_paused_and_deleted_partitions_are_not_fetched_until_resumed_or_recreated():
    s = SubscriptionState()
    s.assign_from_user([A0, A1, B0])
    s.pause(A0)
    assert s.mark_deleted(B0) is True
    assert s.mark_deleted(B0) is False  # news once
    assert s.fetchable() == [A1]
    s.resume(A0)
    s.resume(TopicPartition("not", 9))  # not assigned: nothing to resume
    s.seek(B0, 4)
    s.recreated(B0)
    assert sorted(s.fetchable()) == [A0, A1, B0]
    assert s.position(B0) is None  # a new topic under the name: a new position


def test_fetching_starts_one_partition_further_on_each_time():
    s = SubscriptionState()
    s.assign_from_user([A0, A1, B0])
    firsts = {s.fetchable()[0] for _ in range(3)}
    assert firsts == {A0, A1, B0}


def test_topics_a_pattern_and_assigned_partitions_are_mutually_exclusive():
    s = SubscriptionState()
    s.subscribe(["a"])
    s.subscribe(pattern="b.*")  # a subscription replaces a subscription
    with pytest.raises(ClientStateError, match="assign\\(\\) after subscribe"):
        s.assign_from_user([A0])
    s.unsubscribe()
    s.assign_from_user([A0])
    with pytest.raises(ClientStateError, match="subscribe\\(\\) after assign"):
        s.subscribe(["a"])
    assert s.assignment() == {A0}


def test_a_bad_subscription_is_refused_before_anything_changes():
    s = SubscriptionState()
    s.subscribe(["a"])
    with pytest.raises(InvalidArgumentError, match="topics or a pattern, not both"):
        s.subscribe(["b"], pattern="c")
    with pytest.raises(InvalidArgumentError, match="not a regular expression"):
        s.subscribe(pattern="(")
    with pytest.raises(InvalidTopicError):
        s.subscribe(["no/slash"])
    assert s.topics == {"a"} and s.pattern is None


def test_a_pattern_matches_whole_names_and_leaves_internal_topics_out_unless_asked():
    listing = ["__consumer_offsets", "orders", "orders-eu", "xorders"]
    s = SubscriptionState()
    s.subscribe(pattern="orders.*|__.*")
    assert s.subscribed_topics(lambda: listing) == ["orders", "orders-eu"]
    s = SubscriptionState(exclude_internal_topics=False)
    s.subscribe(pattern="orders.*|__.*")
    assert s.subscribed_topics(lambda: listing) == ["__consumer_offsets", "orders", "orders-eu"]
    s.subscribe(["__consumer_offsets"])  # named topics are taken as named, without listing
    assert s.subscribed_topics(lambda: pytest.fail("listed")) == ["__consumer_offsets"]


def test_a_deleted_partition_of_a_group_assignment_asks_for_a_rejoin_and_a_user_assignment_does_not():
    grouped = SubscriptionState()
    grouped.subscribe(["a"])
    grouped.set_assignment([A0])
    grouped.mark_deleted(A0)
    assert grouped.rejoin_needed
    manual = SubscriptionState()
    manual.assign_from_user([A0])
    manual.mark_deleted(A0)
    assert not manual.rejoin_needed


def test_a_partition_not_assigned_is_refused_by_name():
    s = SubscriptionState()
    with pytest.raises(InvalidArgumentError, match="partition a-0 is not assigned"):
        s.seek(A0, 1)
