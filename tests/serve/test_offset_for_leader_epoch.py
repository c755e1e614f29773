"""OffsetForLeaderEpoch through ``pylog serve``: each epoch asked for is answered with the
largest epoch the log knows at or below it and where that epoch ends, exactly as the log's
own leader-epoch cache answers; a client's current leader epoch older or newer than the
log's is fenced; an unknown partition is named."""

from __future__ import annotations

import socket

import pytest
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from pylog.manager import LogManager
from pylog.serve import Server
from tests.serve.conftest import read_frame, request_frame

#: the leader epochs the log's batches were appended under, and how many records each
EPOCHS = [(0, 5), (3, 4), (7, 6)]
ASKED = [0, 1, 2, 3, 5, 7, 9]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server over a log whose records were appended under epochs 0, 3 and 7, and what
    that log itself answers for each epoch of ``ASKED``."""
    root = str(tmp_path_factory.mktemp("epochs"))
    with LogManager(root) as manager:
        view = manager.create_topic("e", 1).log(0).replica_view
        for epoch, count in EPOCHS:
            view.leader_epoch = epoch
            manager.log("e", 0).append([b"x"] * count)
        expected = {epoch: view.end_offset_for_epoch(epoch) for epoch in ASKED}
    with Server(root, listen=("127.0.0.1", 0)) as server:
        yield server, expected


def _ask(server, version: int, partitions, topic: str = "e") -> list:
    parts = [OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=current, leader_epoch=epoch) for epoch, current in partitions]
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=parts)])
    with socket.create_connection(server.address, timeout=30) as sock:
        sock.sendall(request_frame(request, version))
        answer = OffsetForLeaderEpochResponse.decode(read_frame(sock), version=version, header=True)
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in answer.topics for p in t.partitions]


@pytest.mark.parametrize("version", [2, 4])
def test_each_epoch_is_answered_as_the_logs_leader_epoch_cache_answers_it(served, version):
    server, expected = served
    answers = _ask(server, version, [(epoch, -1) for epoch in ASKED])
    assert answers == [(0, *expected[epoch]) for epoch in ASKED]
    assert expected[1] == (0, 5) and expected[7] == (7, 15) and expected[9] == (-1, -1)  # the rule, pinned


def test_a_current_leader_epoch_older_or_newer_than_the_logs_is_fenced(served):
    server, _ = served
    latest = EPOCHS[-1][0]
    answers = _ask(server, 4, [(3, latest), (3, latest - 1), (3, latest + 1)])
    assert [a[0] for a in answers] == [0, 74, 75]  # NONE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH


def test_an_unknown_partition_is_unknown_topic_or_partition(served):
    server, _ = served
    assert _ask(server, 4, [(0, -1)], topic="absent") == [(3, -1, -1)]
