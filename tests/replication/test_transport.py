"""The fetch exchange over TCP on the loopback address (docs/format/replication.md):
followers in their own processes, killed with SIGKILL, and connections that break."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from pylog import Log
from pylog.errors import ReplicaTransportError
from pylog.replication import wire
from pylog.replication.fetcher import ReplicaFetcher
from pylog.replication.protocol import FetchRequest, FetchResponse
from pylog.replication.replica import Replica
from pylog.replication.replica_set import ReplicaSet
from pylog.replication.state import PartitionState
from pylog.replication.transport import ReplicaServer, TcpEndpoint
from tests.replication.epochs import checkpoint_mismatch
from tests.waiting import wait_until


def test_fetch_request_bytes():
    frame = wire.encode_fetch_request(7, FetchRequest(1, 3, 42, 1024, 500))
    assert frame == struct.pack(">ihiiiqii", 30, 1, 7, 1, 3, 42, 1024, 500)
    assert wire.decode_request(frame[4:]) == (wire.FETCH, 7, FetchRequest(1, 3, 42, 1024, 500))


def test_an_unknown_request_is_refused_clearly():
    with pytest.raises(ReplicaTransportError, match="unknown request: API key 9"):
        wire.decode_request(struct.pack(">hi", 9, 1))


def test_a_follower_process_copies_the_leader_and_recovers_from_sigkill(tmp_path):
    with ReplicaSet(tmp_path, "events-0", replicas=2, remote_replicas=(1,), min_insync_replicas=2,
                    replica_lag_time_max_ms=60_000) as rs:
        rs.start_follower_process(1, max_wait_ms=50)
        for i in range(50):
            rs.append([b"%d" % i] * 20, acks="all", timeout_ms=20_000)
        rs.stop_follower_process(1, kill=True)  # a crash: nothing flushed by the follower
        more = rs.append([b"after"] * 5, acks=1)
        rs.start_follower_process(1, max_wait_ms=50)
        wait_until(lambda: rs.follower_log_end_offset(1) == more.last_offset + 1, "the follower to catch up")
        rs.stop_follower_process(1)
        leader = rs.log(0).read(0, 1 << 30).raw()
    with Log.open(tmp_path / "broker-1" / "events-0") as follower:
        assert follower.read(0, 1 << 30).raw() == leader
        assert follower.check() == [] and checkpoint_mismatch(follower) is None


class HalfResponseServer:
    """A leader that answers one fetch with a header claiming every record byte, sends half
    of them, and closes the connection."""

    def __init__(self, records: bytes):
        self.records = records
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self.sent = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self.listener.accept()
        with conn:
            _, cid, req = wire.decode_request(wire.read_frame(conn, "a request"))
            resp = FetchResponse(None, req.current_leader_epoch, 10, 0, 10)
            conn.sendall(wire.fetch_response_header(cid, resp, len(self.records)))
            conn.sendall(self.records[: len(self.records) // 2])
        self.sent.set()
        self.listener.close()


@pytest.mark.parametrize("reuse_buffer", [False, True])
def test_a_connection_broken_mid_response_is_a_clear_error_and_appends_nothing(tmp_path, reuse_buffer):
    with Log.open(tmp_path / "leader" / "t-0") as source:
        source.append([b"v" * 100] * 10)
        records = source.read(0, 1 << 20).raw()
    server = HalfResponseServer(records)
    follower = Replica(1, tmp_path / "follower" / "t-0", log_config={}, alter_isr=lambda *a: False,
                       replica_lag_time_max_ms=0)
    follower.start()
    try:
        follower.become_follower(PartitionState(0, 0, ()))
        follower.needs_truncation = False  # an empty log has nothing to cut
        endpoint = TcpEndpoint(server.address, reuse_buffer=reuse_buffer)
        fetcher = ReplicaFetcher(follower, lambda _: endpoint, max_wait_ms=0)
        with pytest.raises(ReplicaTransportError, match=rf"closed after {len(records) // 2} of {len(records)} bytes"):
            fetcher.fetch_once()
        assert server.sent.wait(10)
        assert follower.log.log_end_offset == 0 and follower.log.size_bytes == 0
        assert follower.log.check() == []
    finally:
        follower.stop()


def test_the_leader_sends_record_bytes_with_sendfile(tmp_path, monkeypatch):
    import os
    calls = []
    real = os.sendfile
    monkeypatch.setattr(os, "sendfile", lambda *a: calls.append(a[3]) or real(*a))
    with ReplicaSet(tmp_path, "events-0", replicas=2, remote_replicas=(1,), fetchers=True) as rs:
        info = rs.append([b"x" * 1000] * 3, acks=1)
        endpoint = TcpEndpoint(rs.serve())
        resp, raw = endpoint.fetch(FetchRequest(1, rs.leader_epoch, 0, max_wait_ms=0))
        endpoint.close()
        assert resp.error is None and raw == rs.log(0).read(0).raw() and info.last_offset == 2
        assert sum(calls) == len(raw)


def test_a_follower_endpoint_receives_every_fetch_into_one_buffer(tmp_path):
    """With ``reuse_buffer`` each fetch's records arrive in the same buffer, grown when a
    response is larger: the bytes are each response's own, whatever came before."""
    with ReplicaSet(tmp_path, "events-0", replicas=2, remote_replicas=(1,)) as rs:
        for n in (3000, 10, 500):
            rs.append([b"x" * n] * 3, acks=1)
        endpoint = TcpEndpoint(rs.serve(), reuse_buffer=True)
        views = []
        for offset in (6, 3, 6, 0, 6):
            resp, raw = endpoint.fetch(FetchRequest(1, rs.leader_epoch, offset, 1 << 20, 0))
            assert bytes(raw) == rs.log(0).read(offset).raw()
            views.append(raw)  # held on: a larger response gets a new buffer, not a resized one
        endpoint.close()
        assert [len({id(v.obj) for v in views[:i]}) for i in (3, 5)] == [2, 3]
        assert views[4].obj is views[3].obj


class CutAfterAnswering(Replica):
    """A leader whose log is cut right after it answered a fetch, before the bytes went
    out (as when it becomes a follower and truncates meanwhile)."""

    def handle_fetch(self, req):
        resp = super().handle_fetch(req)
        self.log.truncate_to(0)
        return resp


def test_records_cut_while_being_sent_close_the_connection_at_once(tmp_path):
    leader = CutAfterAnswering(0, tmp_path / "broker-0" / "t-0", log_config={}, alter_isr=lambda *a: False,
                               replica_lag_time_max_ms=60_000)
    leader.start()
    server = ReplicaServer(leader)
    endpoint = TcpEndpoint(server.address, timeout_s=20)
    try:
        leader.become_leader(PartitionState(0, 1, (0,), replicas=(0, 1)))
        leader.append([b"v" * 100] * 10)
        with pytest.raises(ReplicaTransportError, match=r"closed after 0 of \d+ bytes"):
            endpoint.fetch(FetchRequest(1, 1, 0, max_wait_ms=0))  # not a wait for the 20 s timeout
    finally:
        endpoint.close()
        server.close()
        leader.stop()
