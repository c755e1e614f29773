"""A follower replica in its own process, fetching from a leader over TCP:

    python -m pylog.replication.follower PATH --replica-id 1 --leader 127.0.0.1:9092 \\
        --leader-id 0 --leader-epoch 3

It opens (recovering) the partition directory ``PATH``, cuts what diverges from the leader
by leader epochs, then fetches until SIGTERM (a clean close) or SIGKILL (a crash: the next
start recovers). It prints ``ready`` once its log is open. When the leader answers a newer
leader epoch, it follows that epoch (cutting again first).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from pylog.replication.fetcher import ReplicaFetcher
from pylog.replication.protocol import FENCED_LEADER_EPOCH
from pylog.replication.replica import Replica
from pylog.replication.state import PartitionState
from pylog.replication.transport import TcpEndpoint


def run(path: str, replica_id: int, address: tuple[str, int], leader_id: int, leader_epoch: int,
        stop: threading.Event, *, max_wait_ms: int = 500, max_bytes: int = 1 << 20) -> None:
    replica = Replica(replica_id, path, log_config={}, alter_isr=lambda *a: False, replica_lag_time_max_ms=0)
    replica.start()
    replica.become_follower(PartitionState(leader_id, leader_epoch, ()))
    endpoint = TcpEndpoint(address)
    fetcher = ReplicaFetcher(replica, lambda _: endpoint, max_bytes=max_bytes, max_wait_ms=max_wait_ms)
    print("ready", flush=True)
    try:
        while not stop.is_set():
            try:
                fetcher.fetch_once()
            except OSError:
                stop.wait(0.05)  # the leader is away or the connection broke: retry
            _follow_newer_epoch(replica, fetcher, leader_id)
    finally:
        endpoint.close()
        replica.stop()


def _follow_newer_epoch(replica: Replica, fetcher: ReplicaFetcher, leader_id: int) -> None:
    """The leader answered that it leads a newer epoch: follow that epoch (what the
    controller's LeaderAndIsr would say), cutting again first."""
    resp = fetcher.last_response
    if resp is not None and resp.error == FENCED_LEADER_EPOCH and resp.leader_epoch > replica.leader_epoch:
        replica.become_follower(PartitionState(leader_id, resp.leader_epoch, ()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pylog.replication.follower", description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--replica-id", type=int, required=True)
    p.add_argument("--leader", required=True, help="HOST:PORT of the leader's ReplicaServer")
    p.add_argument("--leader-id", type=int, required=True)
    p.add_argument("--leader-epoch", type=int, required=True)
    p.add_argument("--max-wait-ms", type=int, default=500)
    args = p.parse_args(argv)
    host, _, port = args.leader.rpartition(":")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    run(args.path, args.replica_id, (host, int(port)), args.leader_id, args.leader_epoch, stop,
        max_wait_ms=args.max_wait_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
