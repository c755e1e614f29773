"""Consumer groups through ``pylog serve``: kafka-python's and librdkafka's consumers
subscribe with a ``group_id``, the server coordinates the rebalance (JoinGroup waits for
every member), and the offsets they commit are Kafka's ``__consumer_offsets`` records that
``pylog consumer-groups`` shows."""

from __future__ import annotations

import logging
import os
import select
import socket
import threading
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    CommitFailedError, GroupIdNotFoundError, GroupSubscribedToTopicError, IllegalGenerationError,
    InconsistentGroupProtocolError, InvalidGroupIdError, InvalidRequestError, InvalidSessionTimeoutError, NoError,
    OffsetMetadataTooLargeError, RebalanceInProgressError, UnknownMemberIdError,
)
from kafka.protocol.admin import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, SyncGroupRequest, SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
)
from kafka.structs import OffsetAndMetadata

from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_membership import read_group_file
from pylog.errors import InvalidConfigError
from pylog.manager import LogManager
from pylog.serve import Server
from tests.serve.conftest import pylog_cli, read_frame, request_frame
from tests.waiting import poll_until, wait_until


def _produce(server, topic: str, values, partitions: int = 1) -> None:
    with LogManager(server.root) as manager:
        if topic not in manager.topics():
            manager.create_topic(topic, partitions)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers)
    futures = [producer.send(topic, value=v, partition=i % partitions) for i, v in enumerate(values)]
    producer.flush(timeout=60)
    for f in futures:
        f.get(timeout=60)
    producer.close()


def _group_consumer(server, group: str, topic: str, **settings) -> KafkaConsumer:
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, **settings)
    consumer.subscribe([topic])
    return consumer


def _poll_values(consumer, count: int, timeout_s: float = 60.0) -> list:
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s with {len(got)} of {count} records")
        for records in consumer.poll(200).values():
            got.extend(r.value for r in records)
    return got


def test_a_kafka_python_group_consumer_commits_and_the_next_member_resumes_there(pylog_server):
    _produce(pylog_server, "orders", [f"v{i}".encode() for i in range(10)])
    first = _group_consumer(pylog_server, "billing", "orders")
    assert _poll_values(first, 6, timeout_s=60)[:6] == [f"v{i}".encode() for i in range(6)]
    _commit(first, {TopicPartition("orders", 0): OffsetAndMetadata(6, "", -1)})
    assert first.committed(TopicPartition("orders", 0)) == 6
    first.close()

    second = _group_consumer(pylog_server, "billing", "orders")
    assert _poll_values(second, 4) == [f"v{i}".encode() for i in range(6, 10)]
    second.close()
    coordinator = GroupCoordinator.for_root(pylog_server.root)
    try:
        assert coordinator.committed("billing")[("orders", 0)].offset == 6
    finally:
        coordinator.release()


def _commit(consumer, offsets=None, timeout_s: float = 60.0) -> None:
    """``consumer.commit(offsets)``, after a poll again while the consumer rebalances: a
    leader whose metadata changed since it assigned rejoins, as it does against Kafka."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            consumer.commit(offsets)
            return
        except (RebalanceInProgressError, CommitFailedError):
            assert time.monotonic() < deadline, "the consumer kept rebalancing"
            consumer.poll(100)


def test_two_kafka_python_consumers_split_four_partitions_and_read_every_record_once(pylog_server):
    _produce(pylog_server, "clicks", [], partitions=4)
    a = _group_consumer(pylog_server, "split", "clicks")
    got_a, stop = [], threading.Event()

    def run_a():  # a polls in its own thread, so it rejoins when b's join starts a rebalance
        while not stop.is_set():
            for records in a.poll(200).values():
                got_a.extend(r.value for r in records)
    thread = threading.Thread(target=run_a)
    thread.start()
    try:
        wait_until(lambda: len(a.assignment()) == 4, "the first member owning all 4 partitions", 60)
        b = _group_consumer(pylog_server, "split", "clicks")
        got_b = []
        poll_until(b, lambda: len(b.assignment()) == 2 and len(a.assignment()) == 2, "a 2 + 2 split", 90)
        assert not a.assignment() & b.assignment()
        values = [f"r{i}".encode() for i in range(40)]
        _produce(pylog_server, "clicks", values, partitions=4)
        deadline = time.monotonic() + 60
        while len(got_a) + len(got_b) < 40:
            assert time.monotonic() < deadline, (len(got_a), len(got_b))
            for records in b.poll(200).values():
                got_b.extend(r.value for r in records)
    finally:
        stop.set()
        thread.join()
    assert got_a and got_b
    assert sorted(got_a + got_b) == sorted(values)
    a.close()
    b.close()


def test_consumer_groups_describe_shows_offsets_committed_through_the_server(pylog_server):
    _produce(pylog_server, "audit", [b"x"] * 5)
    consumer = _group_consumer(pylog_server, "auditors", "audit")
    _poll_values(consumer, 5)
    _commit(consumer)
    consumer.close()
    out = pylog_cli("consumer-groups", pylog_server.root, "--describe", "--group", "auditors")
    assert out.returncode == 0, out.stderr
    row = next(line.split() for line in out.stdout.decode().splitlines() if line.startswith("auditors"))
    assert row[1:4] == ["audit", "0", "5"], out.stdout.decode()


def test_a_confluent_kafka_group_consumer_consumes_and_commits(pylog_server):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    _produce(pylog_server, "payments", [f"p{i}".encode() for i in range(8)])
    consumer = confluent_kafka.Consumer({"bootstrap.servers": pylog_server.bootstrap_servers, "group.id": "ledger",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["payments"])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 8:
        assert time.monotonic() < deadline, got
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.commit(asynchronous=False)
    committed = consumer.committed([confluent_kafka.TopicPartition("payments", 0)], timeout=30)
    consumer.close()
    assert got == [f"p{i}".encode() for i in range(8)]
    assert committed[0].offset == 8
    coordinator = GroupCoordinator.for_root(pylog_server.root)
    try:
        assert coordinator.committed("ledger")[("payments", 0)].offset == 8
    finally:
        coordinator.release()


# -- the protocol itself, over raw sockets --------------------------------------------------------

def _subscription(*topics: str) -> bytes:
    """A version-0 consumer-protocol subscription of ``topics``."""
    out = (0).to_bytes(2, "big") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + (-1).to_bytes(4, "big", signed=True)  # null user data


def _call(sock, request, response_class, version: int):
    sock.sendall(request_frame(request, version))
    return response_class.decode(read_frame(sock), version=version, header=True)


def _join_request(member_id: str, rebalance_timeout_ms: int) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="raw", session_timeout_ms=30_000, rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=_subscription("raw-topic"))])


def test_join_group_waits_for_a_member_that_does_not_rejoin_until_its_rebalance_timeout(pylog_server):
    _produce(pylog_server, "raw-topic", [], partitions=2)
    with socket.create_connection(pylog_server.address, timeout=60) as a_sock, \
            socket.create_connection(pylog_server.address, timeout=60) as b_sock, \
            socket.create_connection(pylog_server.address, timeout=60) as other:
        a = _call(a_sock, _join_request("", rebalance_timeout_ms=2_000), JoinGroupResponse, 5)
        assert (a.error_code, a.generation_id, a.leader) == (0, 1, a.member_id)

        b_sock.sendall(request_frame(_join_request("", rebalance_timeout_ms=30_000), 5))
        wait_until(lambda: len(read_group_file(pylog_server.root, "raw")["members"]) == 2, "b's join")
        # b waits for a to rejoin, and the server answers other requests meanwhile
        assert _call(other, ApiVersionsRequest(), ApiVersionsResponse, 0).error_code == 0
        assert select.select([b_sock], [], [], 0)[0] == []

        b = JoinGroupResponse.decode(read_frame(b_sock), version=5, header=True)  # a removed at 2 s
        assert (b.error_code, b.generation_id, b.leader) == (0, 2, b.member_id)
        assert [m.member_id for m in b.members] == [b.member_id]
        assert _heartbeat(a_sock, a.member_id, 1) == UnknownMemberIdError.errno

        sync = _call(b_sock, SyncGroupRequest(group_id="raw", generation_id=2, member_id=b.member_id,
                                              group_instance_id=None, assignments=[]), SyncGroupResponse, 3)
        assert sync.error_code == 0 and b"raw-topic" in bytes(sync.assignment)
        assert _raw_commit(b_sock, b.member_id, generation=1) == IllegalGenerationError.errno
        assert _raw_commit(b_sock, a.member_id, generation=2) == UnknownMemberIdError.errno
        assert _raw_commit(b_sock, b.member_id, generation=2) == 0


def _heartbeat(sock, member_id: str, generation: int) -> int:
    request = HeartbeatRequest(group_id="raw", generation_id=generation, member_id=member_id, group_instance_id=None)
    return _call(sock, request, HeartbeatResponse, 3).error_code


def _raw_commit(sock, member_id: str, generation: int) -> int:
    topic = OffsetCommitRequest.OffsetCommitRequestTopic(name="raw-topic", partitions=[
        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])
    request = OffsetCommitRequest(group_id="raw", generation_id_or_member_epoch=generation, member_id=member_id,
                                  group_instance_id=None, topics=[topic])
    return _call(sock, request, OffsetCommitResponse, 7).topics[0].partitions[0].error_code


def test_requests_of_groups_never_joined_are_unknown_members_and_hold_nothing(pylog_server):
    """A Heartbeat, SyncGroup or LeaveGroup naming a group without state answers
    UNKNOWN_MEMBER_ID and keeps no file descriptor for it (it kept one per group named)."""
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        def ask(i: int) -> tuple[int, int, int]:
            group = f"never-{i}"
            sync = SyncGroupRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None,
                                    assignments=[])
            leave = LeaveGroupRequest(group_id=group, members=[LeaveGroupRequest.MemberIdentity(
                member_id="m", group_instance_id=None, reason=None)])
            return (_call(sock, HeartbeatRequest(group_id=group, generation_id=1, member_id="m",
                                                 group_instance_id=None), HeartbeatResponse, 3).error_code,
                    _call(sock, sync, SyncGroupResponse, 3).error_code,
                    _call(sock, leave, LeaveGroupResponse, 5).members[0].error_code)

        assert ask(0) == (UnknownMemberIdError.errno,) * 3
        open_before = len(os.listdir("/proc/self/fd"))
        assert {ask(i) for i in range(1, 41)} == {(UnknownMemberIdError.errno,) * 3}
        assert len(os.listdir("/proc/self/fd")) < open_before + 10
    assert not [name for name in os.listdir(pylog_server.root) if name.startswith(".pylog-group-")]


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_of_a_key_type_not_served_is_an_invalid_request(pylog_server, version):
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        group = _call(sock, FindCoordinatorRequest(key="g", key_type=0, coordinator_keys=["g"]),
                      FindCoordinatorResponse, version)
        share = _call(sock, FindCoordinatorRequest(key="g", key_type=2, coordinator_keys=["g"]),
                      FindCoordinatorResponse, version)
    if version >= 4:
        group, share = group.coordinators[0], share.coordinators[0]
    assert (group.error_code, group.port) == (0, pylog_server.port)
    assert (share.error_code, share.node_id) == (InvalidRequestError.errno, -1)


def test_describe_groups_of_an_empty_group_id_is_an_invalid_group_id(pylog_server):
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        answer = _call(sock, DescribeGroupsRequest(groups=["", "unknown"], include_authorized_operations=False),
                       DescribeGroupsResponse, 5)
    assert [(g.group_id, g.error_code, g.group_state) for g in answer.groups] == [
        ("", InvalidGroupIdError.errno, "Dead"), ("unknown", 0, "Dead")]


def test_delete_groups_of_an_empty_group_id_is_an_invalid_group_id(pylog_server):
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        answer = _call(sock, DeleteGroupsRequest(groups_names=["", "unknown"]), DeleteGroupsResponse, 2)
    assert [(g.group_id, g.error_code) for g in answer.results] == [
        ("", InvalidGroupIdError.errno), ("unknown", GroupIdNotFoundError.errno)]


def test_an_admin_client_lists_and_describes_the_groups(pylog_server):
    _produce(pylog_server, "listed", [b"x"] * 3, partitions=2)
    consumer = _group_consumer(pylog_server, "watchers", "listed", client_id="watcher-1")
    poll_until(consumer, lambda: len(consumer.assignment()) == 2, "the member's assignment")
    admin = KafkaAdminClient(bootstrap_servers=pylog_server.bootstrap_servers)
    try:
        assert [(g["group_id"], g["group_state"]) for g in admin.list_groups()] == [("watchers", "Stable")]
        group = admin.describe_groups(["watchers"])["watchers"]
        assert (group["group_state"], group["protocol_type"], group["protocol_data"]) == ("Stable", "consumer", "range")
        [member] = group["members"]
        assert member["client_id"] == "watcher-1" and member["member_metadata"]["topics"] == ["listed"]
        assert member["member_assignment"]["assigned_partitions"] == [{"topic": "listed", "partitions": [0, 1]}]
        consumer.close()
        group = admin.describe_groups(["watchers"])["watchers"]
        assert (group["group_state"], group["members"]) == ("Empty", [])
        assert admin.list_groups(states_filter=["Stable"]) == []
    finally:
        admin.close()


def test_an_admin_client_deletes_a_groups_offsets_then_the_group_but_not_a_group_with_members(pylog_server):
    _produce(pylog_server, "raw-topic", [b"x"] * 3, partitions=2)
    coordinator = GroupCoordinator.for_root(pylog_server.root)
    admin = KafkaAdminClient(bootstrap_servers=pylog_server.bootstrap_servers)
    try:
        coordinator.commit_offsets("retired", {("raw-topic", 0): 3, ("raw-topic", 1): 1})
        coordinator.commit_offsets("raw", {("raw-topic", 0): 2})
        with socket.create_connection(pylog_server.address, timeout=60) as sock:  # "raw" has a live member now
            assert _call(sock, _join_request("", rebalance_timeout_ms=30_000), JoinGroupResponse, 5).error_code == 0
            gone = TopicPartition("raw-topic", 0)
            assert admin.delete_group_offsets("retired", [gone]) == {gone: NoError}
            assert set(coordinator.committed("retired")) == {("raw-topic", 1)}
            assert admin.delete_group_offsets("raw", [gone]) == {gone: GroupSubscribedToTopicError}
            with pytest.raises(GroupIdNotFoundError):
                admin.delete_group_offsets("nobody", [gone])
            assert admin.delete_groups(["retired", "raw", "nobody"]) == {
                "retired": "OK", "raw": "NonEmptyGroupError", "nobody": "GroupIdNotFoundError"}
        assert coordinator.committed("retired") == {} and "retired" not in coordinator.group_ids()
        assert coordinator.committed("raw")[("raw-topic", 0)].offset == 2
    finally:
        admin.close()
        coordinator.release()


@pytest.mark.parametrize("group_id, protocol_type, protocol, metadata, error", [
    ("", "consumer", "range", _subscription("raw-topic"), InvalidGroupIdError.errno),
    ("raw", "connect", "range", _subscription("raw-topic"), InconsistentGroupProtocolError.errno),
    ("raw", "consumer", "no-such-assignor", _subscription("raw-topic"), InconsistentGroupProtocolError.errno),
    ("raw", "consumer", "range", b"\x00\x00\xff", InconsistentGroupProtocolError.errno),
])
def test_a_join_the_group_cannot_take_is_refused_with_kafkas_error(pylog_server, group_id, protocol_type, protocol,
                                                                   metadata, error):
    request = JoinGroupRequest(
        group_id=group_id, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
        group_instance_id=None, protocol_type=protocol_type,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=protocol, metadata=metadata)])
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        answer = _call(sock, request, JoinGroupResponse, 5)
    assert (answer.error_code, answer.generation_id) == (error, -1)
    assert read_group_file(pylog_server.root, "raw") is None


@pytest.mark.parametrize("session_timeout_ms, error", [
    (5_999, InvalidSessionTimeoutError.errno), (6_000, 0), (1_800_000, 0),
    (1_800_001, InvalidSessionTimeoutError.errno), (-1, InvalidSessionTimeoutError.errno),
])
def test_a_session_timeout_outside_the_groups_bounds_is_refused(pylog_server, session_timeout_ms, error):
    request = _join_request("", rebalance_timeout_ms=30_000)
    request.session_timeout_ms = session_timeout_ms  # Kafka's group.min/max.session.timeout.ms: 6 s, 30 min
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        answer = _call(sock, request, JoinGroupResponse, 5)
    assert answer.error_code == error
    assert (read_group_file(pylog_server.root, "raw") is None) == (error != 0)


def test_session_timeout_bounds_that_admit_none_are_a_config_error(tmp_path):
    with pytest.raises(InvalidConfigError, match="group_max_session_timeout_ms 5000 is outside"):
        Server(str(tmp_path), group_min_session_timeout_ms=6_000, group_max_session_timeout_ms=5_000)


def test_a_group_or_member_id_longer_than_a_record_string_is_refused_without_a_failure(pylog_server, caplog):
    """Flexible versions carry strings longer than a coordinator record's int16 length:
    writing the GroupMetadata record of such a join failed in the handler."""
    too_long = "g" * 40_000
    join = _join_request("", rebalance_timeout_ms=30_000)
    join.group_id = too_long
    topic = OffsetCommitRequest.OffsetCommitRequestTopic(name="raw-topic", partitions=[
        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])
    commit = OffsetCommitRequest(group_id=too_long, generation_id_or_member_epoch=-1, member_id="",
                                 group_instance_id=None, topics=[topic])
    with socket.create_connection(pylog_server.address, timeout=60) as sock:
        assert _call(sock, join, JoinGroupResponse, 7).error_code == InvalidGroupIdError.errno
        join.group_id, join.member_id = "raw", "m" * 40_000
        assert _call(sock, join, JoinGroupResponse, 7).error_code == UnknownMemberIdError.errno
        assert _call(sock, commit, OffsetCommitResponse, 8).topics[0].partitions[0].error_code == \
            InvalidGroupIdError.errno
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name == "pylog.serve"]
    assert read_group_file(pylog_server.root, "raw") is None


def test_a_commit_with_too_long_metadata_or_no_group_id_writes_nothing(pylog_server):
    def commit(group_id: str, metadata: str) -> int:
        topic = OffsetCommitRequest.OffsetCommitRequestTopic(name="raw-topic", partitions=[
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=metadata)])
        request = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                      group_instance_id=None, topics=[topic])
        with socket.create_connection(pylog_server.address, timeout=60) as sock:
            return _call(sock, request, OffsetCommitResponse, 8).topics[0].partitions[0].error_code

    assert commit("raw", "m" * 40_000) == OffsetMetadataTooLargeError.errno
    assert commit("", "") == InvalidGroupIdError.errno
    coordinator = GroupCoordinator.for_root(pylog_server.root)
    try:
        assert coordinator.group_ids() == []
        assert commit("raw", "kept") == 0
        assert coordinator.committed("raw")[("raw-topic", 0)].metadata == "kept"
    finally:
        coordinator.release()


def test_a_server_client_and_pylogs_own_consumer_share_one_group(pylog_server):
    from pylog.clients.consumer import Consumer
    _produce(pylog_server, "shared", [], partitions=2)
    remote = _group_consumer(pylog_server, "mixed", "shared")
    poll_until(remote, lambda: len(remote.assignment()) == 2, "the server client owning both partitions", 60)
    local = Consumer(pylog_server.root, group_id="mixed", enable_auto_commit=False, session_timeout_ms=10_000)
    stop = threading.Event()

    def run_local():  # pylog's consumer heartbeats and rejoins in its polls
        while not stop.is_set():
            local.poll(100)
    thread = threading.Thread(target=run_local)
    local.subscribe(["shared"])
    thread.start()
    try:
        poll_until(remote, lambda: len(remote.assignment()) == 1 and len(local.assignment()) == 1,
                   "one partition each", 90)
        assert {tp.partition for tp in remote.assignment()} | {tp.partition for tp in local.assignment()} == {0, 1}
    finally:
        stop.set()
        thread.join()
        local.close()
        remote.close()
