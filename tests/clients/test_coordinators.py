"""What the coordinators write is Kafka's records: offset commits byte for byte as the
schema codec encodes them, group metadata with the consumer protocol inside, tombstones on
deletion; and Kafka's assignors."""

from __future__ import annotations

import os

import pytest

from pylog.clients import Consumer, ConsumerRebalanceListener, TopicPartition
from pylog.coordinator.assignors import range_assign, round_robin_assign, sticky_assign
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.offsets_reader import read_group_state
from pylog.coordinator.offsets_records import GROUP_RECORDS, OFFSET_COMMIT
from pylog.errors import GroupNotEmptyError
from tests.clients.conftest import make_topic


def test_offset_commit_records_are_the_schema_codecs_bytes(root):
    coordinator = GroupCoordinator.for_root(root)
    try:
        records = coordinator.offset_records("grüppe", {("tópic", 7): 123, ("a", 0): 2**40})
    finally:
        coordinator.release()
    for key, value in records:
        rec = GROUP_RECORDS.decode(key, value)
        assert rec.type_id == OFFSET_COMMIT and rec.value_version == 3
        assert GROUP_RECORDS.encode_key(rec.type_id, rec.key) == key
        assert GROUP_RECORDS.encode_value(rec.type_id, 3, rec.value) == value


def test_group_metadata_records_and_tombstones_on_deletion(root):
    make_topic(root, "t", 2)
    with Consumer(root, "g", auto_offset_reset="earliest") as c:
        c.subscribe(["t"])
        c.poll(200)
        assert c.assignment() == {TopicPartition("t", 0), TopicPartition("t", 1)}
        state = read_group_state(root)
        group = state.groups["g"]
        assert (group.state, group.protocol, group.generation) == ("Stable", "range", 1)
        coordinator = GroupCoordinator.for_root(root)
        with pytest.raises(GroupNotEmptyError):
            coordinator.delete_group("g")
        c.commit()
    state = read_group_state(root)
    assert state.groups["g"].state == "Empty" and set(state.offsets["g"]) == {("t", 0), ("t", 1)}
    assert coordinator.delete_group("g") == 3
    coordinator.release()
    state = read_group_state(root)
    assert "g" not in state.offsets and "g" not in state.groups


SUBS = {"m1": ["a", "b"], "m2": ["a", "b"], "m3": ["a"]}
COUNTS = {"a": 4, "b": 3}


def test_range_assignor_gives_each_topic_in_contiguous_ranges():
    assert range_assign(SUBS, COUNTS) == {"m1": [("a", 0), ("a", 1), ("b", 0), ("b", 1)],
                                          "m2": [("a", 2), ("b", 2)], "m3": [("a", 3)]}


def test_round_robin_assignor_deals_partitions_in_turn():
    assert round_robin_assign(SUBS, COUNTS) == {"m1": [("a", 0), ("a", 3), ("b", 1)],
                                                "m2": [("a", 1), ("b", 0), ("b", 2)], "m3": [("a", 2)]}


def test_sticky_assignor_keeps_ownership_and_balances():
    subs = {m: ["a"] for m in ("m1", "m2", "m3")}
    owned = {"m1": [("a", p) for p in range(4)], "m2": [], "m3": []}
    out = sticky_assign(subs, {"a": 6}, owned)
    assert sorted(len(v) for v in out.values()) == [2, 2, 2]
    assert set(out["m1"]) <= set(owned["m1"])
    assert sorted(tp for v in out.values() for tp in v) == [("a", p) for p in range(6)]


class Recorder(ConsumerRebalanceListener):
    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", sorted(p for _, p in revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", sorted(p for _, p in assigned)))


def test_cooperative_sticky_moves_only_what_must_move(root):
    make_topic(root, "t", 4)
    opts = dict(partition_assignment_strategy=["cooperative-sticky"], heartbeat_interval_ms=20)
    first, second = Consumer(root, "g", **opts), Consumer(root, "g", **opts)
    r1, r2 = Recorder(), Recorder()
    first.subscribe(["t"], listener=r1)
    first.poll(100)
    assert r1.events == [("assigned", [0, 1, 2, 3])]
    second.subscribe(["t"], listener=r2)
    for _ in range(200):
        first.poll(10)
        second.poll(10)
        if len(second.assignment()) == 2:
            break
    assert len(first.assignment()) == 2 and len(second.assignment()) == 2
    kept = sorted(p for _, p in first.assignment())
    # the first member never gave up what it kept: one revocation of exactly what moved
    assert ("revoked", [p for p in range(4) if p not in kept]) in r1.events
    assert all(event[0] != "revoked" or set(event[1]).isdisjoint(kept) for event in r1.events)
    first.close()
    second.close()


def test_a_pattern_subscription_picks_up_a_new_topic(root):
    make_topic(root, "logs-a", 1, [(0, [b"a"])])
    with Consumer(root, "g", auto_offset_reset="earliest", heartbeat_interval_ms=20) as c:
        c.subscribe(pattern=r"logs-.*")
        assert [r.value for rs in c.poll(1000).values() for r in rs] == [b"a"]
        make_topic(root, "logs-b", 2, [(1, [b"b"])])
        got = []
        for _ in range(100):
            got += [r.value for rs in c.poll(50).values() for r in rs]
            if got:
                break
        assert got == [b"b"] and {tp.topic for tp in c.assignment()} == {"logs-a", "logs-b"}


def test_a_pattern_subscription_leaves_out_internal_topics_as_kafkas_consumer_does(root):
    """exclude.internal.topics: a pattern matching everything takes the user's topics, not the
    group's own __consumer_offsets; asked for, or named, an internal topic is taken."""
    make_topic(root, "a", 1, [(0, [b"x"])])
    with Consumer(root, "g", auto_offset_reset="earliest") as c:
        c.subscribe(pattern=r".*")
        assert [r.value for rs in c.poll(1000).values() for r in rs] == [b"x"]
        assert os.path.isdir(os.path.join(root, "__consumer_offsets-0"))
        assert {tp.topic for tp in c.assignment()} == {"a"} and c.subscription() == {"a"}
    with Consumer(root, "h", exclude_internal_topics=False) as c:
        c.subscribe(pattern=r".*")
        assert c.subscription() == {"a", "__consumer_offsets"}
    with Consumer(root, "i") as c:
        c.subscribe(["__consumer_offsets"])
        assert c.subscription() == {"__consumer_offsets"}


def test_kafka_pythons_decoders_read_the_members_subscription_and_assignment(root):
    consumer_protocol = pytest.importorskip("kafka.protocol.old.consumer_protocol")
    make_topic(root, "t", 3)
    with Consumer(root, "g") as c:
        c.subscribe(["t"])
        c.poll(200)
        member = read_group_state(root).groups["g"].members[0]
    assignment = consumer_protocol.ConsumerProtocolMemberAssignment_v0.decode(member.assignment)
    assert sorted(assignment.partitions()) == [("t", 0), ("t", 1), ("t", 2)]
    assert consumer_protocol.ConsumerProtocolMemberMetadata_v0.decode(member.subscription).topics == ["t"]
