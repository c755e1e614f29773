"""``ReplicaFetcher``: a follower's fetch loop (Kafka's ReplicaFetcherThread), in a thread
or one round at a time. Each round: find the divergence point if the leader changed, fetch
from the log end, append what came, take the high watermark."""

from __future__ import annotations

import threading
from typing import Callable

from pylog.errors import PylogError
from pylog.replication.replica import Replica


class ReplicaFetcher:
    """Fetches for ``replica`` from the leader endpoint ``connect(leader_id)`` returns
    (pylog/replication/transport.py). ``max_wait_ms``: how long a fetch waits at the
    leader when there is nothing new (Kafka's ``replica.fetch.wait.max.ms``)."""

    def __init__(self, replica: Replica, connect: Callable, *, max_bytes: int = 1 << 20, max_wait_ms: int = 500,
                 backoff_ms: int = 20):
        self.replica = replica
        self._connect = connect
        self.max_bytes = max_bytes
        self.max_wait_ms = max_wait_ms
        self.backoff_ms = backoff_ms
        self._stopped = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._thread: threading.Thread | None = None
        self.last_error: Exception | None = None
        self.last_response = None

    def fetch_once(self, *, max_wait_ms: int | None = None) -> int:
        """One round; returns the bytes appended (0 when there was nothing, or no leader)."""
        target = self.replica.fetch_target(0 if max_wait_ms == 0 else self.backoff_ms / 1000)
        if target is None:
            return 0
        leader_id, epoch, needs_truncation = target
        endpoint = self._connect(leader_id)
        if needs_truncation and not self.replica.truncate(
                epoch, lambda e: endpoint.offsets_for_leader_epoch(self.replica.replica_id, epoch, e)):
            return 0
        req = self.replica.fetch_request(epoch, self.max_bytes, self.max_wait_ms if max_wait_ms is None
                                         else max_wait_ms)
        if req is None:
            return 0
        resp, raw = endpoint.fetch(req)
        self.last_response = resp
        return self.replica.apply_fetch(req, resp, raw)

    # -- as a thread --------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"replica-fetcher-{self.replica.replica_id}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            if not self._running.wait(0.05):
                continue
            try:
                self.fetch_once()
            except (PylogError, OSError) as e:
                self.last_error = e  # the leader moved or died, the connection broke: back off, retry
                self._stopped.wait(self.backoff_ms / 1000)

    def pause(self) -> None:
        """Stop fetching (a slow or partitioned follower) until ``resume``."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
