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
import signal
import subprocess
import threading
from dataclasses import replace
from typing import Callable

from pylog.arguments import check_bool
from pylog.closing import close_all
from pylog.errors import InvalidArgumentError, LeaderNotAvailableError, LogClosedError, ReplicationError
from pylog.config import build_config
from pylog.partition_dir import directory_path
from pylog.record.encode import now_ms
from pylog.replication.acks import PendingAppend
from pylog.replication.broker_client import close_process, start_process
from pylog.replication.client_requests import append_at_leader, check_timeout_ms
from pylog.replication.election import (
    check_assigned, check_partition_name, check_replica_settings, check_root, elected, eligible_leader, offline,
    reassigned,
)
from pylog.replication.fetcher import ReplicaFetcher
from pylog.replication.replica import LEADER, Replica
from pylog.replication.state import NO_LEADER, PartitionState, read_state, write_state
from pylog.replication.transport import InProcessEndpoint, ReplicaServer


class ReplicaSet:
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
        self._processes: dict[int, subprocess.Popen] = {}
        self._server = None
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.state_path = os.path.join(self.root, f"{name}.state")
        self._clock = clock
        self._lock = threading.RLock()
        self._replicas = {r: Replica(r, os.path.join(self.root, f"broker-{r}", name), log_config=log_config,
                                     alter_isr=self._alter_isr, replica_lag_time_max_ms=replica_lag_time_max_ms,
                                     high_watermark_checkpoint_interval_ms=replica_high_watermark_checkpoint_interval_ms,
                                     clock=clock) for r in ids}
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
        found = PartitionState(self.replica_ids[0], 0, self.replica_ids) if found is None \
            else reassigned(found, self.replica_ids, self.name)
        os.makedirs(self.root, exist_ok=True)
        for r, rep in self._replicas.items():
            if r not in self.remote_replicas:
                rep.start()
        self._state = self._with_replicas(found)
        write_state(self.state_path, self._state)
        if self._state.leader == NO_LEADER:
            self._try_elect(clean=not self.unclean_leader_election_enable)
        else:
            self._send_leader_and_isr()
        if self._threads:
            for r, f in self._fetchers.items():
                if r not in self.remote_replicas:
                    f.start()
            self._maintenance = threading.Thread(target=self._maintain, name=f"replica-set-{self.name}", daemon=True)
            self._maintenance.start()

    def _with_replicas(self, state: PartitionState) -> PartitionState:
        return replace(state, replicas=self.replica_ids)

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
        steps = [f.stop for f in self._fetchers.values()]
        steps += [lambda r=r: self.stop_follower_process(r) for r in list(self._processes)]
        steps += [] if self._server is None else [self._server.close]
        close_all(steps + [rep.stop for rep in self._replicas.values()])

    def __enter__(self) -> "ReplicaSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ==== facts =======================================================================================
    @property
    def state(self) -> PartitionState:
        """The controller's record: leader, leader epoch, ISR."""
        return self._state

    @property
    def leader(self) -> int:
        """The leader's replica id (-1 when none)."""
        return self._state.leader

    @property
    def leader_epoch(self) -> int:
        """The current leader epoch (one more at every election)."""
        return self._state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        """The in-sync replicas, as the controller recorded them."""
        return self._state.isr

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

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise LogClosedError(f"the replica set of {self.name} at {self.root} is closed")

    def _leader_replica(self) -> Replica:
        self._check_open()
        rep = self._replicas.get(self._state.leader)
        if rep is None or rep.role != LEADER:
            raise LeaderNotAvailableError(self._state.no_leader(self.name))
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
        self._shrink_isr()
        self._fetch_round(replica_ids)
        return self._positions() != before

    def _fetch_round(self, replica_ids=None) -> None:
        for r in self.replica_ids if replica_ids is None else replica_ids:
            fetcher = self._fetchers[r]
            if not fetcher.paused and self._replicas[r].online and r != self._state.leader:
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

    def _expire_isr(self) -> tuple[int, ...]:
        out = self._shrink_isr()
        rep = self._replicas.get(self._state.leader)
        if rep is not None:
            rep.checkpoint_high_watermark()
        return out

    def _shrink_isr(self) -> tuple[int, ...]:
        rep = self._replicas.get(self._state.leader)
        return () if rep is None else rep.maybe_shrink_isr()

    def _alter_isr(self, replica_id: int, leader_epoch: int, isr: tuple[int, ...]) -> bool:
        """AlterPartition from the leader: recorded only if it still leads that epoch."""
        with self._lock:
            state = self._state
            if state.leader != replica_id or state.leader_epoch != leader_epoch or replica_id not in isr:
                return False
            self._record(state.with_isr(isr))
            return True

    def _record(self, state: PartitionState) -> None:
        write_state(self.state_path, state)
        self._state = state

    # ==== followers in other processes ==================================================================
    def serve(self, host: str = "127.0.0.1") -> tuple[str, int]:
        """Serve the leader's fetches over TCP (once); returns the address."""
        self._check_open()
        if self._server is None:
            self._server = ReplicaServer(self._leader_replica(), host=host)
        return self._server.address

    def start_follower_process(self, replica_id: int, *, max_wait_ms: int = 500) -> subprocess.Popen:
        """Start a remote replica's process (``python -m pylog.replication.broker``) on its
        directory, following the leader over TCP; returns once its log is open."""
        self._check_open()
        if replica_id not in self.remote_replicas:
            raise InvalidArgumentError(f"replica {replica_id} is not one of the remote replicas {self.remote_replicas}")
        host, port = self.serve()
        proc, _ = start_process(self._replicas[replica_id].path, replica_id, "--leader", f"{host}:{port}",
                                "--leader-id", str(self.leader), "--leader-epoch", str(self.leader_epoch),
                                "--max-wait-ms", str(max_wait_ms))
        self._processes[replica_id] = proc
        return proc

    def stop_follower_process(self, replica_id: int, *, kill: bool = False) -> int:
        """Stop a follower process: SIGTERM (clean close) or, with ``kill``, SIGKILL (a
        crash). Returns its exit status."""
        check_assigned(replica_id, self.replica_ids, self.name)
        if replica_id not in self._processes:
            raise InvalidArgumentError(f"replica {replica_id} of {self.name} has no follower process running")
        return close_process(self._processes.pop(replica_id), signal.SIGKILL if kill else signal.SIGTERM)

    def follower_log_end_offset(self, replica_id: int) -> int:
        """A follower's log end as the leader last saw it (-1 before its first fetch)."""
        check_assigned(replica_id, self.replica_ids, self.name)
        return self._leader_replica().follower_log_end_offset(replica_id)

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
            state = self._state
            if state.leader == replica_id:
                self._try_elect(clean=not self.unclean_leader_election_enable)
            elif replica_id in state.isr:
                self._record(state.with_isr(r for r in state.isr if r != replica_id))
                self._replicas[state.leader].take_isr(self._state)

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
            if self._state.leader == NO_LEADER:
                self._try_elect(clean=not self.unclean_leader_election_enable)
            elif self._state.leader != replica_id:
                rep.become_follower(self._state)
            elif rep.role != LEADER:  # the recorded leader, restarted: it leads its epoch again
                rep.become_leader(self._state)

    def elect_leader(self, clean: bool = True, *, leader: int | None = None) -> int:
        """Elect a leader now, in a new leader epoch (``leader``, or the first eligible
        replica in assignment order). ``clean``: from the live ISR replicas only. An unclean
        election may pick a replica outside the ISR, and only with
        ``unclean_leader_election_enable``. Raises :class:`LeaderNotAvailableError` when no
        replica is eligible. Returns the leader's id."""
        self._check_open()
        if leader is not None:
            check_assigned(leader, self.replica_ids, self.name)
        with self._lock:
            if not clean and not self.unclean_leader_election_enable:
                raise LeaderNotAvailableError("unclean leader election is not enabled "
                                              "(unclean_leader_election_enable=False)")
            chosen = self._eligible(clean, leader)
            if chosen is None:
                raise LeaderNotAvailableError(
                    f"no eligible replica for {self.name}: ISR {self._state.isr}, "
                    f"live {[r for r in self.replica_ids if self._replicas[r].online]}, clean={clean}")
            self._elect(chosen)
            return chosen

    def preferred_leader_election(self) -> bool:
        """Move leadership back to the first assigned replica when it is alive, in the ISR
        and not leading already. True if leadership moved."""
        self._check_open()
        with self._lock:
            preferred = self.replica_ids[0]
            if self._state.leader == preferred or self._eligible(True, preferred) is None:
                return False
            self._elect(preferred)
            return True

    def _eligible(self, clean: bool, leader: int | None) -> int | None:
        live = [r for r in self.replica_ids if self._replicas[r].online and r not in self.remote_replicas]
        return eligible_leader(self._state, live, clean=clean, leader=leader)

    def _try_elect(self, *, clean: bool) -> None:
        chosen = self._eligible(clean, None)
        if chosen is not None:
            self._elect(chosen)
        elif self._state.leader != NO_LEADER:
            self._record(offline(self._state, self.replica_ids))
            for rep in self._replicas.values():
                if rep.online:
                    rep.become_follower(self._state)

    def _elect(self, leader: int) -> None:
        """A new leader epoch: recorded first, then told to every live replica."""
        live = {r for r in self.replica_ids if self._replicas[r].online}
        self._record(elected(self._state, leader, live, self.replica_ids))
        self._send_leader_and_isr()

    def _send_leader_and_isr(self) -> None:
        state = self._state
        self._replicas[state.leader].become_leader(state)
        for r, rep in self._replicas.items():
            if r != state.leader and rep.online:
                rep.become_follower(state)
