"""The client side of a replica process (pylog/replication/broker.py): ``start_process``
starts one, ``BrokerClient`` is a controller's or a producer's connection to it:
LeaderAndIsr, Produce, and the Fetch of ``TcpEndpoint`` for consumers
(docs/format/replication.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings

from typing import Mapping

from pylog.errors import PylogWarning, ReplicaTransportError, ReplicationError
from pylog.log.appends import AppendInfo
from pylog.replication import wire
from pylog.replication.client_requests import check_acks, error_from
from pylog.replication.protocol import (
    CONSUMER_ID, DEBUGGING_CONSUMER_ID, FetchRequest, FetchResponse, LeaderAndIsrRequest, ProduceRequest,
    ProduceResponse,
)
from pylog.replication.state import NO_LEADER, PartitionState
from pylog.replication.transport import TcpEndpoint


def start_process(path, replica_id: int, *options: str) -> tuple[subprocess.Popen, tuple[str, int]]:
    """Start ``python -m pylog.replication.broker PATH --replica-id N *options`` (this
    interpreter, this ``sys.path``); returns the process and its address once it printed
    ``ready``. :class:`ReplicaTransportError` when it exits first. The process stops when
    its standard input, a pipe from this process, closes (``close_process``), so that it
    does not outlive this one."""
    proc = subprocess.Popen([sys.executable, "-m", "pylog.replication.broker", os.fspath(path),
                             "--replica-id", str(replica_id), "--stop-on-stdin-eof", *options],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    line = proc.stdout.readline()
    word, _, address = line.decode(errors="replace").strip().partition(" ")
    if word != "ready":
        close_process(proc, signal.SIGKILL)
        raise ReplicaTransportError(f"replica process {replica_id} on {path} did not start: {line!r}")
    host, _, port = address.rpartition(":")
    return proc, (host, int(port))


#: How long a replica process has to close after SIGTERM before it is killed.
STOP_TIMEOUT_S = 60.0
#: How much longer than a Produce's ``timeout_ms`` its client waits for the answer (the
#: leader answers at the timeout with REQUEST_TIMED_OUT; this covers getting it here).
ANSWER_MARGIN_S = 10.0


def close_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, *, stop_timeout_s: float = STOP_TIMEOUT_S) -> int:
    """Send ``sig`` (SIGTERM: a clean close, a stalled process continued first; SIGKILL: a
    crash), wait for the process to end, close its pipes; returns its exit status. A process
    still running ``stop_timeout_s`` after SIGTERM is killed (its log recovers as after a
    crash) with a :class:`PylogWarning`, rather than waited for without end."""
    if sig == signal.SIGTERM:
        proc.send_signal(signal.SIGCONT)  # a stopped process would hold SIGTERM pending
    proc.send_signal(sig)
    try:
        status = proc.wait(timeout=stop_timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = proc.wait()
        warnings.warn(f"replica process {proc.pid} did not stop within {stop_timeout_s} s of SIGTERM: killed; "
                      f"its log recovers when it starts again", PylogWarning, stacklevel=2)
    proc.stdin.close()
    proc.stdout.close()
    return status


class BrokerClient(TcpEndpoint):
    """One connection to a replica process, one request at a time (not thread-safe). As
    the controller's connection it is the replica's ``ReplicaHandle``
    (pylog/replication/controller.py): ``online`` while the controller counts the process
    as running, and LeaderAndIsr through ``become_leader``/``become_follower``, naming the
    leader's address from ``addresses`` (replica id -> address, the controller's)."""

    online = True
    addresses: Mapping[int, tuple[str, int]] = {}

    def become_leader(self, state: PartitionState) -> None:
        """LeaderAndIsr making the replica lead ``state``; :class:`ReplicationError` if refused."""
        self._take(state)

    def become_follower(self, state: PartitionState) -> None:
        """LeaderAndIsr making the replica follow ``state.leader``; :class:`ReplicationError` if refused."""
        self._take(state)

    def _take(self, state: PartitionState) -> None:
        address = self.addresses[state.leader] if state.leader != NO_LEADER else ("", -1)
        error = self.leader_and_isr(LeaderAndIsrRequest(state.controller_epoch, state.leader, state.leader_epoch,
                                                        state.partition_epoch, state.isr, state.replicas, address))
        if error is not None:
            raise ReplicationError(f"replica at {self.address} refused LeaderAndIsr of epoch {state.leader_epoch}: "
                                   f"{error}")

    def leader_and_isr(self, req: LeaderAndIsrRequest) -> str | None:
        """Send the controller's LeaderAndIsr; returns the replica's error (None: taken)."""
        return self._call(lambda cid: wire.encode_leader_and_isr_request(cid, req),
                          wire.decode_leader_and_isr_response, "a LeaderAndIsr response")

    def produce_request(self, req: ProduceRequest) -> ProduceResponse:
        """Send a Produce; returns the leader's answer, once its ``acks`` are met (waiting
        for it the request's ``timeout_ms`` and a margin, at least the endpoint's timeout)."""
        return self._call(lambda cid: wire.encode_produce_request(cid, req), wire.decode_produce_response,
                          "a Produce response", timeout_s=max(self.timeout_s, req.timeout_ms / 1000 + ANSWER_MARGIN_S))

    def _call(self, encode, decode, what: str, *, timeout_s: float | None = None):
        cid = self._next_id()

        def read(sock):
            got, answer = decode(wire.read_frame(sock, what))
            if got != cid:
                raise ReplicaTransportError(f"response {got} does not answer request {cid}")
            return answer
        return self._exchange(encode(cid), read, timeout_s=timeout_s)

    def produce(self, records: bytes, *, acks=1, timeout_ms: int = 30_000, leader_epoch: int = -1) -> AppendInfo:
        """Produce ``records`` (Kafka batches); the offsets once ``acks`` is met, else the
        exception for the leader's error (``NotEnoughReplicasError`` ...)."""
        resp = self.produce_request(ProduceRequest(bytes(records), check_acks(acks), timeout_ms, leader_epoch))
        if resp.error is not None:
            raise error_from(resp.error, resp.message)
        return AppendInfo(resp.base_offset, resp.last_offset, -1, -1, resp.last_offset - resp.base_offset + 1)

    def consume(self, offset: int, *, max_bytes: int = 1 << 20, debugging: bool = False,
                leader_epoch: int = -1) -> tuple[FetchResponse, bytes]:
        """A consumer's Fetch from ``offset``: whole batches up to the leader's high watermark
        (with ``debugging``: up to the replica's log end, from any replica)."""
        replica_id = DEBUGGING_CONSUMER_ID if debugging else CONSUMER_ID
        return self.fetch(FetchRequest(replica_id, leader_epoch, offset, max_bytes, 0))

