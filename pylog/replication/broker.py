"""A replica in its own process: a small broker, in Kafka's terms, for one partition.

    python -m pylog.replication.broker PATH --replica-id 1 [--port 0] [--state FILE]
        [--min-insync-replicas 2] [--leader HOST:PORT --leader-id 0 --leader-epoch 3]

It opens (recovering) the partition directory ``PATH``, serves TCP on the loopback address
and prints ``ready HOST:PORT`` once listening. Its controller tells it, with LeaderAndIsr,
to lead or to follow a leader epoch; as leader it answers Produce (``acks``), its
followers' Fetch and OffsetsForLeaderEpoch, and consumers' Fetch up to the high watermark,
and proposes ISR changes to the partition state ``--state`` (Kafka's AlterPartition, a
compare-and-set that refuses a stale leader); as follower it cuts its log where it
diverges from the leader's, by leader epochs, then fetches (docs/replication.md,
docs/format/replication.md). ``--leader ...`` starts it following that leader at once.
SIGTERM closes it cleanly; after SIGKILL the next start recovers the log.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from pylog.errors import FencedLeaderEpochError, PylogError
from pylog.replication import wire
from pylog.replication.client_requests import error_name, produce
from pylog.replication.fetcher import ReplicaFetcher
from pylog.replication.protocol import FENCED_LEADER_EPOCH, LeaderAndIsrRequest, ProduceRequest, ProduceResponse
from pylog.replication.replica import FOLLOWER, LEADER, Replica
from pylog.replication.state import PartitionState, alter_partition
from pylog.replication.transport import ReplicaServer, TcpEndpoint


class Broker:
    """One replica (``Replica``) with its server, its fetcher and its ISR-expiration task.
    ``state_path``: the controller's record, where the leader proposes ISR changes (None:
    it never changes the ISR)."""

    def __init__(self, path, replica_id: int, *, state_path: str | None = None, min_insync_replicas: int = 1,
                 replica_lag_time_max_ms: int = 30_000, max_wait_ms: int = 500, log_config: dict | None = None):
        self.name = os.path.basename(os.fspath(path))
        self.replica = Replica(replica_id, path, log_config=log_config or {}, alter_isr=self._alter_partition,
                               replica_lag_time_max_ms=replica_lag_time_max_ms)
        self.state_path = state_path
        self.min_insync_replicas = min_insync_replicas
        self._lag_max_ms = replica_lag_time_max_ms
        self._fetcher = ReplicaFetcher(self.replica, self._endpoint, max_wait_ms=max_wait_ms)
        self._lock = threading.Lock()  # the leaders' addresses, the partition epoch; before the replica's lock
        self._addresses: dict[int, tuple[str, int]] = {}
        self._endpoints: dict[int, TcpEndpoint] = {}
        self._partition_epoch = -1
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.server: ReplicaServer | None = None

    # ==== life ======================================================================================
    def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Open the log (recovering it), listen, start fetching and expiring the ISR; returns
        the address served."""
        self.replica.start()
        self.server = ReplicaServer(self.replica, host=host, port=port, handlers={
            wire.PRODUCE: self._produce, wire.LEADER_AND_ISR: self._leader_and_isr})
        for target, name in ((self._fetch_loop, "fetcher"), (self._maintain, "isr-expiration")):
            t = threading.Thread(target=target, name=f"broker-{self.replica.replica_id}-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self.server.address

    def stop(self) -> None:
        """Stop fetching and serving, close the log cleanly (high watermark checkpointed)."""
        self._stop.set()
        for t in self._threads:
            t.join()
        if self.server is not None:
            self.server.close()
        self._forget_leaders()
        self.replica.stop()

    def _fetch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._fetcher.fetch_once()
            except (PylogError, OSError):
                self._stop.wait(0.05)  # the leader is away or the connection broke: retry
            self._follow_newer_epoch()

    def _follow_newer_epoch(self) -> None:
        """The leader answered that it leads a newer epoch: follow that epoch (what the
        controller's LeaderAndIsr would say), cutting again first."""
        rep, resp = self.replica, self._fetcher.last_response
        if resp is not None and resp.error == FENCED_LEADER_EPOCH and resp.leader_epoch > rep.leader_epoch:
            try:
                rep.become_follower(PartitionState(rep.leader_id, resp.leader_epoch, ()))
            except FencedLeaderEpochError:
                pass  # the controller moved it on meanwhile

    def _maintain(self) -> None:
        """Kafka's isr-expiration task (every half ``replica_lag_time_max_ms``) and the
        high-watermark checkpoint."""
        while not self._stop.wait(max(self._lag_max_ms / 2000, 0.01)):
            self.replica.maybe_shrink_isr()
            self.replica.checkpoint_high_watermark()

    # ==== the leader this replica follows =============================================================
    def _endpoint(self, leader_id: int) -> TcpEndpoint:
        with self._lock:
            endpoint = self._endpoints.get(leader_id)
            if endpoint is None:
                endpoint = self._endpoints[leader_id] = TcpEndpoint(self._addresses[leader_id], reuse_buffer=True)
            return endpoint

    def _forget_leaders(self) -> None:
        """Close the connections to former leaders: a fetch waiting at one fails at once."""
        endpoints, self._endpoints = self._endpoints, {}
        for endpoint in endpoints.values():
            endpoint.close()

    # ==== requests ===================================================================================
    def take(self, req: LeaderAndIsrRequest) -> str | None:
        """The controller's LeaderAndIsr: lead, or follow ``req.leader`` (cutting the log by
        leader epochs first), in ``req.leader_epoch``; an ISR change of the epoch it leads.
        Returns the error (``FENCED_LEADER_EPOCH`` for an older epoch than it knows)."""
        rep = self.replica
        state = PartitionState(req.leader, req.leader_epoch, tuple(req.isr), req.controller_epoch,
                               replicas=tuple(req.replicas), partition_epoch=req.partition_epoch)
        with self._lock:
            try:
                if req.leader == rep.replica_id and rep.role == LEADER and rep.leader_epoch == req.leader_epoch:
                    if req.partition_epoch > self._partition_epoch:  # else its own AlterPartition was newer
                        self._partition_epoch = req.partition_epoch
                        rep.take_isr(state)
                elif req.leader == rep.replica_id:
                    rep.become_leader(state)
                    self._partition_epoch = req.partition_epoch
                elif (rep.role, rep.leader_id, rep.leader_epoch) != (FOLLOWER, req.leader, req.leader_epoch):
                    self._forget_leaders()
                    self._addresses[req.leader] = req.leader_address
                    rep.become_follower(state)
            except FencedLeaderEpochError:
                return FENCED_LEADER_EPOCH
        return None

    def _leader_and_isr(self, correlation_id: int, req: LeaderAndIsrRequest) -> bytes:
        return wire.encode_leader_and_isr_response(correlation_id, self.take(req))

    def _produce(self, correlation_id: int, req: ProduceRequest) -> bytes:
        rep = self.replica
        epoch = None if req.leader_epoch < 0 else req.leader_epoch
        try:
            info = produce(rep, lambda: rep.append_batches(req.records, leader_epoch=req.leader_epoch),
                           acks=req.acks, timeout_ms=req.timeout_ms, min_insync_replicas=self.min_insync_replicas,
                           name=self.name, leader_epoch=epoch)
            resp = ProduceResponse(None, rep.leader_epoch, info.first_offset, info.last_offset)
        except PylogError as e:
            resp = ProduceResponse(error_name(e), rep.leader_epoch, message=str(e))
        return wire.encode_produce_response(correlation_id, resp)

    def _alter_partition(self, replica_id: int, leader_epoch: int, isr: tuple[int, ...]) -> bool:
        """Kafka's AlterPartition, as a compare-and-set on the partition state: refused when
        another leader epoch or a newer partition epoch was recorded; a missed ISR change
        of this leader's epoch is taken then (the leader proposes again if needed)."""
        if self.state_path is None:
            return False
        with self._lock:
            accepted, now = alter_partition(self.state_path, replica_id, leader_epoch, self._partition_epoch, isr)
            if accepted:
                self._partition_epoch = now.partition_epoch
            elif now is not None and (now.leader, now.leader_epoch) == (replica_id, leader_epoch) \
                    and now.partition_epoch > self._partition_epoch:
                self._partition_epoch = now.partition_epoch
                self.replica.take_isr(now)
            return accepted


#: How often the main thread wakes while it waits to stop. The kernel hands a process's SIGTERM
#: to any thread; Python runs the handler in the main thread only, once it runs again.
SIGNAL_CHECK_S = 0.2


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pylog.replication.broker", description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--replica-id", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    p.add_argument("--state", help="the controller's partition state file, for ISR changes")
    p.add_argument("--min-insync-replicas", type=int, default=1)
    p.add_argument("--replica-lag-time-max-ms", type=int, default=30_000)
    p.add_argument("--max-wait-ms", type=int, default=500, help="how long a fetch waits at the leader")
    p.add_argument("--log-config", default="{}", help="the log's configuration, as JSON")
    p.add_argument("--stop-on-stdin-eof", action="store_true",
                   help="close cleanly when standard input ends (the process that started it is gone)")
    p.add_argument("--leader", help="HOST:PORT of a leader to follow at once")
    p.add_argument("--leader-id", type=int)
    p.add_argument("--leader-epoch", type=int)
    args = p.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if args.stop_on_stdin_eof:
        threading.Thread(target=_stop_on_eof, args=(sys.stdin.fileno(), stop), daemon=True).start()
    broker = Broker(args.path, args.replica_id, state_path=args.state, min_insync_replicas=args.min_insync_replicas,
                    replica_lag_time_max_ms=args.replica_lag_time_max_ms, max_wait_ms=args.max_wait_ms,
                    log_config=json.loads(args.log_config))
    host, port = broker.start(args.host, args.port)
    try:
        if args.leader:
            leader_host, _, leader_port = args.leader.rpartition(":")
            broker.take(LeaderAndIsrRequest(0, args.leader_id, args.leader_epoch, -1, (), (),
                                            (leader_host, int(leader_port))))
        print(f"ready {host}:{port}", flush=True)
        while not stop.wait(SIGNAL_CHECK_S):
            pass  # the main thread runs now and then, so a SIGTERM another thread took is handled
    finally:
        broker.stop()
    return 0


def _stop_on_eof(fd: int, stop: threading.Event) -> None:
    """Set ``stop`` once ``fd`` reaches its end (unbuffered: nothing held at exit)."""
    while os.read(fd, 4096):
        pass
    stop.set()


if __name__ == "__main__":
    sys.exit(main())
