"""Frames no client should send: each closes its connection (or, for ApiVersions at a
version not served, is answered UNSUPPORTED_VERSION), never crashes the server or changes
a file; a fuzzer sends random and mutated frames for a few seconds, then a normal client
still works."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import socket
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    FetchRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListOffsetsRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest,
    TxnOffsetCommitRequest,
)

from pylog.coordinator.offsets_reader import OFFSETS_TOPIC
from pylog.coordinator.txn_coordinator import TXN_TOPIC
from pylog.layout import TOPIC_CONFIGS_FILE
from pylog.logdir.producer_ids import PRODUCER_IDS_FILE
from pylog.manager import LogManager
from pylog.record import encode_batch
from pylog.serve import Server
from pylog.serve.kafka_apis import SUPPORTED_VERSIONS
from tests.serve.conftest import read_frame, request_frame

FUZZ_SECONDS = 3.0


@pytest.fixture
def server(tmp_path):
    """A server that creates no topic on its own, over a log dir holding the topic "kept"."""
    root = str(tmp_path / "data")
    with LogManager(root) as manager:
        manager.create_topic("kept").append([(b"k", b"v")] * 3)
    with Server(root, listen=("127.0.0.1", 0), auto_create_topics_enable=False,
                socket_request_max_bytes=1 << 20) as server:
        yield server


def _closed_after(server, frame: bytes) -> bool:
    """Whether the server closes the connection after ``frame`` without answering."""
    with socket.create_connection(server.address, timeout=30) as sock:
        sock.sendall(frame)
        return read_frame(sock) is None


def _seeds() -> list[bytes]:
    """Valid requests to mutate: ApiVersions, Metadata, Fetch and ListOffsets of "kept",
    Produce to a topic that does not exist (so a mutation that stays valid writes nothing),
    the group requests (:func:`_group_seeds`) and the transaction requests
    (:func:`_transaction_seeds`)."""
    fetch_topic = FetchRequest.FetchTopic(topic="kept", partitions=[FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 16)])
    produce_topic = ProduceRequest.TopicProduceData(name="absent", partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=encode_batch([b"x", b"y"]))])
    list_topic = ListOffsetsRequest.ListOffsetsTopic(name="kept", partitions=[
        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-2)])
    return [
        request_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3),
        request_frame(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="kept")]), 12),
        request_frame(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="kept")]), 4),
        request_frame(FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[fetch_topic]), 12),
        request_frame(FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[fetch_topic]), 4),
        request_frame(ListOffsetsRequest(replica_id=-1, topics=[list_topic]), 7),
        *_group_seeds(),
        *_transaction_seeds(),
        request_frame(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[produce_topic]), 9),
        request_frame(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[produce_topic]), 3),
    ]


#: the member the group seeds join as, and its generation after the first join
_MEMBER, _GENERATION = "fuzz-member", 1


def _group_seeds() -> list[bytes]:
    """A member's requests, in the order it sends them: FindCoordinator, JoinGroup of group
    "fuzzed" subscribed to "kept", SyncGroup, Heartbeat, OffsetCommit, OffsetFetch,
    DescribeGroups, ListGroups, LeaveGroup; a commit without a generation to the group
    "committed", which has no members (so a mutation of it that stays valid writes), then
    OffsetDelete and DeleteGroups of it."""
    subscription = (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + (4).to_bytes(2, "big") + b"kept" + (
        -1).to_bytes(4, "big", signed=True)
    join = JoinGroupRequest(group_id="fuzzed", session_timeout_ms=6_000, rebalance_timeout_ms=6_000, member_id=_MEMBER,
                            group_instance_id=None, protocol_type="consumer", protocols=[
                                JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription)])

    def commit(group_id: str, generation: int, member_id: str) -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="kept", partitions=[
                OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata="m")])])
    fetch_group = OffsetFetchRequest.OffsetFetchRequestGroup(group_id="fuzzed", topics=[
        OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="kept", partition_indexes=[0])])
    return [
        request_frame(FindCoordinatorRequest(key="fuzzed", key_type=0), 3),
        request_frame(FindCoordinatorRequest(key_type=0, coordinator_keys=["fuzzed", "committed"]), 4),
        request_frame(join, 5),
        request_frame(SyncGroupRequest(group_id="fuzzed", generation_id=_GENERATION, member_id=_MEMBER,
                                       group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                       assignments=[]), 5),
        request_frame(HeartbeatRequest(group_id="fuzzed", generation_id=_GENERATION, member_id=_MEMBER,
                                       group_instance_id=None), 4),
        request_frame(commit("fuzzed", _GENERATION, _MEMBER), 8),
        request_frame(commit("committed", -1, ""), 2),
        request_frame(OffsetFetchRequest(group_id="fuzzed", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name="kept", partition_indexes=[0])], require_stable=False), 7),
        request_frame(OffsetFetchRequest(groups=[fetch_group], require_stable=False), 8),
        request_frame(DescribeGroupsRequest(groups=["fuzzed", "committed"], include_authorized_operations=False), 5),
        request_frame(ListGroupsRequest(states_filter=[], types_filter=[]), 5),
        request_frame(LeaveGroupRequest(group_id="fuzzed", members=[
            LeaveGroupRequest.MemberIdentity(member_id=_MEMBER, group_instance_id=None, reason=None)]), 5),
        request_frame(OffsetDeleteRequest(group_id="committed", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name="kept", partitions=[OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                partition_index=0)])]), 0),
        request_frame(DeleteGroupsRequest(groups_names=["committed", "fuzzed"]), 2),
    ]


#: the producer id the first InitProducerId of the fuzzed log dir gets
_PRODUCER_ID = 0


def _transaction_seeds() -> list[bytes]:
    """A transactional producer's requests that write only coordinator files, even when
    replayed or mutated: FindCoordinator of its transactional id, InitProducerId,
    AddPartitionsToTxn of a topic that does not exist (v3) and a verify-only one (v4),
    AddOffsetsToTxn and TxnOffsetCommit of the group "fuzz-txn" (no members), and EndTxn."""
    tid, pid = "fuzz-tx", _PRODUCER_ID
    absent = [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="absent", partitions=[0])]
    commit = TxnOffsetCommitRequest(
        transactional_id=tid, group_id="fuzz-txn", producer_id=pid, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="kept", partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="m")])])
    return [
        request_frame(FindCoordinatorRequest(key=tid, key_type=1), 3),
        request_frame(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1,
                                            producer_epoch=-1), 4),
        request_frame(AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                                                v3_and_below_producer_epoch=0, v3_and_below_topics=absent), 3),
        request_frame(AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=0, verify_only=True, topics=absent)]), 4),
        request_frame(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=0,
                                             group_id="fuzz-txn"), 3),
        request_frame(commit, 3),
        request_frame(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=0, committed=True), 3),
    ]


def _mutated(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    choice = rng.randrange(5)
    if choice == 0:  # flip bytes of the body (the size stays right)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(4, len(data))
            data[at] = rng.randrange(256)
    elif choice == 1:  # cut short, size unchanged: the server waits for bytes that never come
        data = data[:rng.randrange(1, len(data))]
    elif choice == 2:  # the size says less than the frame: the rest is read as the next frame
        cut = rng.randrange(1, len(data) - 4)
        data[:4] = cut.to_bytes(4, "big")
    elif choice == 3:  # random bytes, a right size
        body = rng.randbytes(rng.randrange(0, 200))
        data = bytearray(len(body).to_bytes(4, "big") + body)
    else:  # a random api key and version on a valid body
        data[4:8] = rng.randrange(-5, 100).to_bytes(2, "big", signed=True) + rng.randrange(-2, 30).to_bytes(
            2, "big", signed=True)
    return bytes(data)


def test_sizes_past_the_limit_or_below_one_close_the_connection(server):
    assert _closed_after(server, (1 << 20 | 1).to_bytes(4, "big") + b"x" * 64)
    assert _closed_after(server, (-1).to_bytes(4, "big", signed=True))
    assert _closed_after(server, (0).to_bytes(4, "big"))


def test_an_api_not_served_or_a_version_not_served_closes_the_connection(server):
    leader_and_isr = (4).to_bytes(2, "big") + (5).to_bytes(2, "big") + (1).to_bytes(4, "big") + b"\x00\x00"
    assert _closed_after(server, len(leader_and_isr).to_bytes(4, "big") + leader_and_isr)  # between brokers only
    produce_v2 = bytearray(_seeds()[-1])
    produce_v2[6:8] = (2).to_bytes(2, "big")
    assert _closed_after(server, bytes(produce_v2))


def test_api_versions_at_a_version_not_served_answers_unsupported_version_with_the_list(server):
    frame = bytearray(request_frame(ApiVersionsRequest(), 0, correlation_id=42))
    frame[6:8] = (99).to_bytes(2, "big")
    with socket.create_connection(server.address, timeout=30) as sock:
        sock.sendall(frame)
        answer = read_frame(sock)
    response = ApiVersionsResponse.decode(answer, version=0, header=True)
    assert response.header.correlation_id == 42 and response.error_code == 35  # UNSUPPORTED_VERSION
    assert {k.api_key for k in response.api_keys} == {int(k) for k in SUPPORTED_VERSIONS}


@pytest.mark.parametrize("request_, version", [
    (DescribeGroupsRequest(groups=[None], include_authorized_operations=False), 5),
    (ListGroupsRequest(states_filter=[None], types_filter=[]), 5),
    (JoinGroupRequest(group_id="g", session_timeout_ms=6_000, rebalance_timeout_ms=6_000, member_id="",
                      group_instance_id=None, protocol_type="consumer",
                      protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=None)]), 5),
    (JoinGroupRequest(group_id=None, session_timeout_ms=6_000, rebalance_timeout_ms=6_000, member_id="",
                      group_instance_id=None, protocol_type="consumer", protocols=[]), 7),
], ids=["DescribeGroups group id", "ListGroups state", "JoinGroup protocol metadata", "JoinGroup group id"])
def test_a_null_where_kafkas_definition_allows_none_closes_the_connection_without_a_failure(server, caplog,
                                                                                           request_, version):
    assert _closed_after(server, request_frame(request_, version))
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name == "pylog.serve"]


def _is_group_file(path: str) -> bool:
    """Whether ``path`` (relative to the log dir) is what a valid group or transaction
    request may write: a partition of ``__consumer_offsets`` or ``__transaction_state``, or
    a group's state file (or its ``.tmp``)."""
    return path.startswith((OFFSETS_TOPIC + "-", TXN_TOPIC + "-", ".pylog-group-"))


def _files_but_groups(root: str) -> dict:
    """Every file and directory under ``root`` but the group files (JoinGroups still
    waiting may be rewriting them), as relative path -> sha256 (or "directory"), but
    ``topic-configs.json`` parsed (the topics' settings)."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not _is_group_file(d)]
        out.update((os.path.relpath(os.path.join(dirpath, d), root), "directory") for d in dirs)
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if _is_group_file(rel):
                continue
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
            out[rel] = json.loads(data) if rel == TOPIC_CONFIGS_FILE else hashlib.sha256(data).hexdigest()
    return out


def test_random_and_mutated_frames_change_no_file_and_a_client_works_after(server, caplog):
    rng, seeds, sent = random.Random(35), _seeds(), 0
    for seed in seeds:  # each valid once: "kept" is open for writing (its clean-shutdown marker gone) from here
        with socket.create_connection(server.address, timeout=30) as sock:
            sock.sendall(seed)
            assert read_frame(sock) is not None
    before = _files_but_groups(server.root)
    assert before[TOPIC_CONFIGS_FILE] == {"kept": {}, OFFSETS_TOPIC: {"cleanup_policy": "compact"},
                                          TXN_TOPIC: {"cleanup_policy": "compact"}}
    deadline = time.monotonic() + FUZZ_SECONDS
    while time.monotonic() < deadline:
        with socket.create_connection(server.address, timeout=30) as sock:
            for _ in range(rng.randint(1, 4)):
                frame = _mutated(rng, rng.choice(seeds)) if rng.random() < 0.9 else rng.choice(seeds)
                try:
                    sock.sendall(frame)
                except OSError:  # the server closed it after an earlier frame
                    break
                sent += 1
    assert sent > 50
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name == "pylog.serve"]
    assert not failures, failures  # every bad frame is a closed connection or an error code, not a bug
    after = _files_but_groups(server.root)
    # a mutation may turn into a valid InitProducerId, which hands out a producer id, or into
    # a valid group request, which writes the group files
    before.pop(PRODUCER_IDS_FILE, None), after.pop(PRODUCER_IDS_FILE, None)
    assert after == before
    assert {name for name in os.listdir(server.root) if _is_group_file(name) and not name.startswith(
        ".pylog-group-")} == {f"{topic}-{p}" for topic in (OFFSETS_TOPIC, TXN_TOPIC) for p in range(50)}
    producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers)
    producer.send("kept", b"after").get(timeout=60)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap_servers, consumer_timeout_ms=30_000)
    consumer.assign([TopicPartition("kept", 0)])
    consumer.seek(TopicPartition("kept", 0), 3)
    assert next(consumer).value == b"after"
    consumer.close()
