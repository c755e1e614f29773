"""A topic deleted under live consumers: as with Kafka's clients, group members see its
partitions revoked and keep polling; a consumer with assign() keeps polling the others
and warns; calls about the deleted partitions raise UnknownTopicError, never an OS error."""

from __future__ import annotations

import logging
import time

import pytest

from pylog import LogManager
from pylog.clients import Consumer, ConsumerRebalanceListener, Producer, TopicPartition
from pylog.errors import UnknownTopicError
from tests.clients.conftest import make_topic

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def poll_values(consumer, want: int, timeout_s: float = 30.0) -> dict:
    """``{tp: [values]}`` polled until ``want`` records came (fails after ``timeout_s``)."""
    got, deadline = {}, time.monotonic() + timeout_s
    while sum(map(len, got.values())) < want:
        assert time.monotonic() < deadline, f"timed out waiting for {want} records, got {got}"
        for tp, records in consumer.poll(100).items():
            got.setdefault(tp, []).extend(r.value for r in records)
    return got


def delete_topic(root: str, topic: str) -> None:
    with LogManager(root) as m:
        m.delete_topic(topic)


def send(root: str, topic: str, *values, partition: int = 0) -> None:
    with Producer(root, auto_create_topics_enable=False) as p:
        for v in values:
            p.send(topic, v, partition=partition).get()


def test_an_assigned_partition_of_a_deleted_topic_is_skipped_with_a_warning_and_read_when_recreated(root, caplog):
    make_topic(root, "t", 2, [(0, [b"t0"]), (1, [b"t1"])])
    make_topic(root, "u", 1, [(0, [b"u0"])])
    with Consumer(root, auto_offset_reset="earliest") as c:
        c.assign([T0, T1, U0])
        assert poll_values(c, 3) == {T0: [b"t0"], T1: [b"t1"], U0: [b"u0"]}
        delete_topic(root, "t")
        send(root, "u", b"u1")
        with caplog.at_level(logging.WARNING, logger="pylog.consumer"):
            assert poll_values(c, 1) == {U0: [b"u1"]}
            assert c.poll(50) == {}
        assert c.assignment() == {T0, T1, U0}
        warnings = [r.getMessage() for r in caplog.records if "t-0" in r.getMessage()]
        assert len(warnings) == 1 and "deleted" in warnings[0]
        for call in (lambda: c.end_offsets([T0]), lambda: c.beginning_offsets([T1]), lambda: c.seek_to_end(T0),
                     lambda: c.offsets_for_times({T0: 0}), lambda: c.highwater(T0)):
            with pytest.raises(UnknownTopicError, match="t-[01]"):
                call()
        make_topic(root, "t", 1, [(0, [b"again"])])  # a new topic of the same name: read from its start
        assert poll_values(c, 1) == {T0: [b"again"]}


class Recorder(ConsumerRebalanceListener):
    def __init__(self):
        self.revoked, self.assigned = set(), set()

    def on_partitions_revoked(self, revoked):
        self.revoked |= revoked

    def on_partitions_assigned(self, assigned):
        self.assigned |= assigned


def test_group_members_see_the_partitions_of_a_deleted_topic_revoked_and_keep_polling(root):
    """The member learns of the deletion from its fetch, not only from its next look at the
    topics (every heartbeat_interval_ms, here far away): it rejoins at once."""
    make_topic(root, "t", 2, [(0, [b"t0"]), (1, [b"t1"])])
    make_topic(root, "u", 1, [(0, [b"u0"])])
    listener = Recorder()
    with Consumer(root, "g", auto_offset_reset="earliest", session_timeout_ms=60_000,
                  heartbeat_interval_ms=30_000) as c:
        c.subscribe(["t", "u"], listener=listener)
        assert poll_values(c, 3) == {T0: [b"t0"], T1: [b"t1"], U0: [b"u0"]}
        assert c.poll(0) == {} and c.poll(0) == {}  # past the look at the topics that follows a join
        delete_topic(root, "t")
        send(root, "u", b"u1")
        assert poll_values(c, 1) == {U0: [b"u1"]}
        deadline = time.monotonic() + 30
        while c.assignment() != {U0}:
            assert time.monotonic() < deadline, c.assignment()
            assert c.poll(100) == {}
        assert {T0, T1} <= listener.revoked
        send(root, "u", b"u2")
        assert poll_values(c, 1) == {U0: [b"u2"]}
