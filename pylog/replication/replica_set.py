"""``ReplicaSet``: one partition replicated on N ``Log`` directories, with Kafka's terms and
rules (docs/replication.md): a leader and followers, the ISR, the high watermark,
``acks``, ``min_insync_replicas``, and a controller that elects leaders, bumps the leader
epoch and records the partition state as Kafka's controller does.

Layout under ``root``: ``broker-<id>/<topic>-<partition>/`` per replica (each its own log
dir, with its own checkpoint files) and ``<topic>-<partition>.state``, the controller's
record (pylog/replication/state.py).
"""

from __future__ import annotations

import os
import subprocess
import threading
from typing import Callable

from pylog.arguments import check_bool
from pylog.closing import close_all
from pylog.errors import InvalidArgumentError, LeaderNotAvailableError, ReplicationError
from pylog.config import build_config
from pylog.partition_dir import directory_path
from pylog.record.encode import now_ms
from pylog.replication.acks import PendingAppend
from pylog.replication.client_requests import append_at_leader, check_timeout_ms
from pylog.replication.controller import Controller, ReplicatedPartition
from pylog.replication.election import (
    check_assigned, check_partition_name, check_replica_settings, check_root, reassigned,
)
from pylog.replication.fetcher import ReplicaFetcher
from pylog.replication.follower_processes import FollowerProcesses
from pylog.replication.replica import LEADER, Replica
from pylog.replication.state import NO_LEADER, read_state
from pylog.replication.transport import InProcessEndpoint


class ReplicaSet(ReplicatedPartition, FollowerProcesses):
    """A replicated partition in one process: replicas as ``Log`` directories, followers as
    threads (``fetchers=True``) or fetching one round at a time when driven (``replicate``).

    >>> import tempfile
    >>> with ReplicaSet(tempfile.mkdtemp(), "events-0", replicas=3, min_insync_replicas=2) as rs:
    ...     info = rs.append([b"a", b"b"], acks="all")
    ...     [r.value for r in rs.records()], rs.isr
    ([b'a', b'b'], (0, 1, 2))
    """

    def __init__(self, root, name: str = "partition-0", *, replicas=3, min_insync_replicas: int = 1,
                 replica_lag_time_max_ms: int = 30_000, unclean_leader_election_enable: bool = False,
                 replica_fetch_max_bytes: int = 1 << 20, replica_fetch_wait_max_ms: int = 500,
                 replica_high_watermark_checkpoint_interval_ms: int = 5000, fetchers: bool = True,
                 remote_replicas=(), clock: Callable[[], int] = now_ms, **log_config):
        check_partition_name(name)
        self.root = directory_path(root)
        self.name = name
        ids = check_replica_settings(replicas, min_insync_replicas, replica_lag_time_max_ms=replica_lag_time_max_ms,
                                     replica_fetch_max_bytes=replica_fetch_max_bytes,
                                     replica_fetch_wait_max_ms=replica_fetch_wait_max_ms,
                                     replica_high_watermark_checkpoint_interval_ms=(
                                         replica_high_watermark_checkpoint_interval_ms))
        check_bool(unclean_leader_election_enable, "unclean_leader_election_enable")
        build_config(None, log_config)  # the replicas' settings, refused before any directory is made
        self.replica_ids = ids
        if isinstance(remote_replicas, (str, bytes)) or not hasattr(remote_replicas, "__iter__"):
            raise InvalidArgumentError(f"remote_replicas must be a list of replica ids, not {remote_replicas!r}")
        self.remote_replicas = tuple(remote_replicas)
        if not set(self.remote_replicas) <= set(ids[1:]):
            raise InvalidArgumentError(f"remote replicas {remote_replicas!r} must be followers among {ids[1:]}")
        self._processes: dict[int, subprocess.Popen] = {}  # the remote followers' (FollowerProcesses)
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._clock = clock
        self._lock = threading.RLock()
        self._replicas: dict[int, Replica] = {}
        self._controller = Controller(os.path.join(self.root, f"{name}.state"), ids, self._replicas,
                                      unclean_leader_election_enable=unclean_leader_election_enable, name=name)
        self._replicas.update({r: Replica(r, os.path.join(self.root, f"broker-{r}", name), log_config=log_config,
                                     alter_isr=self._controller.alter_isr, replica_lag_time_max_ms=replica_lag_time_max_ms,
                                     high_watermark_checkpoint_interval_ms=replica_high_watermark_checkpoint_interval_ms,
                                     clock=clock) for r in ids})
        self._fetchers = {r: ReplicaFetcher(rep, self._endpoint, max_bytes=replica_fetch_max_bytes,
                                            max_wait_ms=replica_fetch_wait_max_ms) for r, rep in self._replicas.items()}
        self._threads = fetchers
        self._closed = threading.Event()
        self._maintenance: threading.Thread | None = None
        self._start()

    # ==== life ========================================================================================
    def _start(self) -> None:
        check_root(self.root)
        found = read_state(self.state_path)  # checked before anything is written
        found = None if found is None else reassigned(found, self.replica_ids, self.name)
        os.makedirs(self.root, exist_ok=True)
        for r, rep in self._replicas.items():
            if r not in self.remote_replicas:
                rep.start()
        if self._controller.initialize(found).leader == NO_LEADER:
            self._controller.elect_automatically()
        else:
            self._controller.announce()
        if self._threads:
            for r, f in self._fetchers.items():
                if r not in self.remote_replicas:
                    f.start()
            self._maintenance = threading.Thread(target=self._maintain, name=f"replica-set-{self.name}", daemon=True)
            self._maintenance.start()

    def _maintain(self) -> None:
        """Kafka's isr-expiration task (every half ``replica_lag_time_max_ms``) and the
        high-watermark checkpoint."""
        while not self._closed.wait(max(self.replica_lag_time_max_ms / 2000, 0.01)):
            self._expire_isr()

    def close(self) -> None:
        """Stop the fetchers and close every replica's log cleanly (high watermarks
        checkpointed); a failing step (a full disk) does not keep the others from running
        (``close_all``)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._maintenance is not None:
            self._maintenance.join()
        steps = [f.stop for f in self._fetchers.values()] + self._stop_follower_processes()
        close_all(steps + [rep.stop for rep in self._replicas.values()])

    # ==== facts =======================================================================================
    @property
    def high_watermark(self) -> int:
        """The leader's high watermark: offsets below it are on every ISR replica."""
        return self._leader_replica().log.high_watermark

    def replica(self, replica_id: int) -> Replica:
        """The ``Replica`` with that id (:class:`InvalidArgumentError` for an unknown one)."""
        check_assigned(replica_id, self.replica_ids, self.name)
        return self._replicas[replica_id]

    def log(self, replica_id: int):
        """The ``Log`` of a replica (None while it is down)."""
        return self.replica(replica_id).log

    def _leader_replica(self) -> Replica:
        self._check_open()
        state = self._controller.state
        rep = self._replicas.get(state.leader)
        if rep is None or rep.role != LEADER:
            raise LeaderNotAvailableError(state.no_leader(self.name))
        return rep

    def _endpoint(self, replica_id: int) -> InProcessEndpoint:
        return InProcessEndpoint(self._replicas[replica_id])

    # ==== produce and consume =========================================================================
    def append(self, records, *, acks=1, timeout_ms: int = 30_000, **options):
        """Append ``records`` at the leader; return its ``AppendInfo`` once ``acks`` is met.

        ``acks=0`` and ``1``: once the leader wrote them (a leader failure before the
        followers copy them loses them). ``acks="all"`` (or -1): refused with
        :class:`NotEnoughReplicasError`, before anything is written, when the ISR is smaller
        than ``min_insync_replicas``; acknowledged once the high watermark passed them (every
        ISR replica has them); :class:`ReplicationTimeoutError` after ``timeout_ms``, and
        :class:`NotEnoughReplicasAfterAppendError` if the ISR shrank below
        ``min_insync_replicas`` meanwhile (written, not acknowledged).
        """
        return self.append_async(records, acks=acks, timeout_ms=timeout_ms, **options).result()

    def append_async(self, records, *, acks=1, timeout_ms: int = 30_000, **options) -> PendingAppend:
        """Append ``records`` at the leader now and return a :class:`PendingAppend` at once:
        its ``result()`` waits until ``acks`` is met, under ``append``'s rules and errors
        (``timeout_ms`` counted from now). Several may be in flight, as Kafka's producer keeps
        up to five requests per connection (``max.in.flight.requests.per.connection``): the
        followers copy them together, and the appends are acknowledged in offset order.
        Errors before anything is written (``acks``, ``NotEnoughReplicasError``, the
        leader's ``Log.append`` checks) raise here."""
        check_timeout_ms(timeout_ms)
        with self._lock:
            leader = self._leader_replica()
        info, epoch = append_at_leader(leader, lambda: leader.append(records, **options), acks=acks,
                                       min_insync_replicas=self.min_insync_replicas, name=self.name)
        return PendingAppend(leader, epoch, info, acks, timeout_ms, name=self.name,
                             min_insync_replicas=self.min_insync_replicas,
                             wait_for_high_watermark=lambda offset, e, ms: self._wait_for_high_watermark(
                                 leader, offset, e, ms))

    def _wait_for_high_watermark(self, leader: Replica, offset: int, epoch: int, timeout_ms: int):
        if self._threads:
            return leader.wait_for_high_watermark(offset, epoch, timeout_ms / 1000)
        while True:  # driven: fetch rounds until the high watermark gets there or nothing moves
            reached = leader.wait_for_high_watermark(offset, epoch, 0)
            if reached is not False or not self.replicate():
                return reached

    def read(self, offset: int, max_bytes: int = 1 << 20, *, isolation: str = "high_watermark"):
        """Read from the leader, up to the high watermark by default (``Log.read``)."""
        return self._leader_replica().log.read(offset, max_bytes, isolation=isolation)

    def records(self, start_offset: int | None = None, end_offset: int | None = None, *,
                isolation: str = "high_watermark"):
        """The leader's records, up to the high watermark by default (``Log.records``)."""
        return self._leader_replica().log.records(start_offset, end_offset, isolation=isolation)

    # ==== followers ===================================================================================
    def replicate(self, replica_ids=None) -> bool:
        """One fetch round for each live, unpaused follower (all, or ``replica_ids``), not
        waiting at the leader, after the leader's ISR expiration. True if anything moved (bytes, log ends or high watermarks)."""
        self._check_open()
        if replica_ids is not None:
            if isinstance(replica_ids, (str, bytes)) or not hasattr(replica_ids, "__iter__"):
                raise InvalidArgumentError(f"replica_ids must be a list of replica ids, not {replica_ids!r}")
            for r in replica_ids:
                check_assigned(r, self.replica_ids, self.name)
        before = self._positions()
        self._expire_isr(checkpoint=False)
        self._fetch_round(replica_ids)
        return self._positions() != before

    def _fetch_round(self, replica_ids=None) -> None:
        for r in self.replica_ids if replica_ids is None else replica_ids:
            fetcher = self._fetchers[r]
            if not fetcher.paused and self._replicas[r].online and r != self.leader:
                try:
                    fetcher.fetch_once(max_wait_ms=0)
                except ReplicationError:
                    pass  # its leader went away: the controller's next LeaderAndIsr tells it

    def _positions(self):
        return [(rep.log.log_end_offset, rep.log.high_watermark) if rep.log is not None else None
                for rep in self._replicas.values()]

    def pause(self, replica_id: int) -> None:
        """The follower stops fetching (slow, or cut off from the leader) until ``resume``."""
        self._check_open()
        check_assigned(replica_id, self.replica_ids, self.name)
        self._fetchers[replica_id].pause()

    def resume(self, replica_id: int) -> None:
        """The follower fetches again."""
        self._check_open()
        check_assigned(replica_id, self.replica_ids, self.name)
        self._fetchers[replica_id].resume()

    def check_isr(self) -> tuple[int, ...]:
        """Run the leader's ISR expiration now: followers not caught up within
        ``replica_lag_time_max_ms`` leave the ISR (returned); then checkpoint the high
        watermark. Runs every half ``replica_lag_time_max_ms`` with ``fetchers``, and at the
        start of each ``replicate`` round."""
        self._check_open()
        return self._expire_isr()

    def _expire_isr(self, *, checkpoint: bool = True) -> tuple[int, ...]:
        rep = self._replicas.get(self.leader)
        if rep is None:
            return ()
        out = rep.maybe_shrink_isr()
        if checkpoint:
            rep.checkpoint_high_watermark()
        return out

    # ==== controller =================================================================================
    def fail_replica(self, replica_id: int) -> None:
        """The replica stops (its log closed). The controller removes it from the ISR, or,
        if it led, elects a new leader: clean (from the ISR), or unclean when
        ``unclean_leader_election_enable`` and no ISR replica is alive; else the partition
        is offline until an ISR replica returns."""
        self._check_open()
        check_assigned(replica_id, self.replica_ids, self.name)
        with self._lock:
            self._fetchers[replica_id].pause()
            self._replicas[replica_id].stop()
            self._controller.replica_failed(replica_id)

    def restart_replica(self, replica_id: int) -> None:
        """The replica comes back (its log recovered if it crashed): it follows the leader,
        cutting what diverges by leader epochs, or leads if the partition had none."""
        self._check_open()
        check_assigned(replica_id, self.replica_ids, self.name)
        with self._lock:
            rep = self._replicas[replica_id]
            if not rep.online:
                rep.start()
            self._fetchers[replica_id].resume()
            self._controller.replica_restarted(replica_id)
