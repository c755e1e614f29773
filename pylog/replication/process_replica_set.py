"""``ProcessReplicaSet``: one partition replicated on N replica processes
(``python -m pylog.replication.broker``), the leader's included, with the controller in this
process (docs/replication.md): it starts, kills (SIGKILL) and restarts the processes,
elects leaders (clean from the ISR; unclean only when enabled), records the partition
state and sends LeaderAndIsr with each new leader epoch, produces through the current
leader and reads up to its high watermark.

The same layout as ``ReplicaSet``: ``broker-<id>/<topic>-<partition>/`` per replica and
``<topic>-<partition>.state``, which the leaders change too (AlterPartition), so every
change of it is a compare-and-set under its file lock (pylog/replication/state.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

from pylog.arguments import check_bool, check_int, check_records_iterable
from pylog.config import build_config
from pylog.errors import (
    InvalidArgumentError, LeaderNotAvailableError, OffsetOutOfRangeError, ReplicationError,
)
from pylog.layout import OFFSET_RANGE
from pylog.partition_dir import directory_path
from pylog.record.batch import decode_batches
from pylog.record.encode import encode_batch
from pylog.replication.broker_client import BrokerClient, close_process, start_process
from pylog.replication.client_requests import check_acks, check_timeout_ms
from pylog.replication.controller import Controller, ReplicatedPartition
from pylog.replication.election import check_assigned, check_partition_name, check_replica_settings, check_root, reassigned
from pylog.replication.protocol import OFFSET_OUT_OF_RANGE, FetchResponse
from pylog.replication.state import NO_LEADER, read_state, state_lock


#: The failures ``fail_replica`` makes: a crash, a clean stop, an interrupt, a stall.
FAILURE_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP)


class ProcessReplicaSet(ReplicatedPartition):
    """A replicated partition whose replicas each run in their own process, on loopback TCP.

    >>> import tempfile
    >>> with ProcessReplicaSet(tempfile.mkdtemp(), "events-0", replicas=2, min_insync_replicas=2) as rs:
    ...     info = rs.append([b"a", b"b"], acks="all")
    ...     [r.value for r in rs.records()], rs.isr
    ([b'a', b'b'], (0, 1))
    """

    def __init__(self, root, name: str = "partition-0", *, replicas=3, min_insync_replicas: int = 1,
                 replica_lag_time_max_ms: int = 30_000, unclean_leader_election_enable: bool = False,
                 replica_fetch_wait_max_ms: int = 500, **log_config):
        check_partition_name(name)
        ids = check_replica_settings(replicas, min_insync_replicas, replica_lag_time_max_ms=replica_lag_time_max_ms,
                                     replica_fetch_wait_max_ms=replica_fetch_wait_max_ms)
        check_bool(unclean_leader_election_enable, "unclean_leader_election_enable")
        build_config(None, log_config)  # the replicas' settings, refused here rather than in their processes
        self.root = directory_path(root)
        check_root(self.root)
        self.name = name
        self.replica_ids = tuple(ids)
        self.min_insync_replicas = min_insync_replicas
        state_path = os.path.join(self.root, f"{name}.state")
        self._options = ("--state", state_path, "--min-insync-replicas", str(min_insync_replicas),
                         "--replica-lag-time-max-ms", str(replica_lag_time_max_ms),
                         "--max-wait-ms", str(replica_fetch_wait_max_ms), "--log-config", json.dumps(log_config))
        self._lock = threading.RLock()  # the controller: one change of the partition at a time
        self._processes: dict[int, subprocess.Popen] = {}
        self._addresses: dict[int, tuple[str, int]] = {}
        self._clients: dict[int, BrokerClient] = {}  # produce and consume
        self._handles: dict[int, BrokerClient] = {}  # the controller's, one per process
        self._closed = threading.Event()
        self._controller = Controller(state_path, self.replica_ids, self._handles, name=name, shared=True,
                                      unclean_leader_election_enable=unclean_leader_election_enable)
        found = read_state(state_path)
        if found is not None:
            reassigned(found, self.replica_ids, name)  # refused before any process starts
        os.makedirs(self.root, exist_ok=True)
        try:
            for r in self.replica_ids:
                self._start_process(r)
            self._controller.initialize(None)
            self._controller.elect_automatically()
        except BaseException:
            self.close()
            raise

    # ==== processes ===================================================================================
    def path(self, replica_id: int) -> str:
        """Replica ``replica_id``'s partition directory."""
        check_assigned(replica_id, self.replica_ids, self.name)
        return os.path.join(self.root, f"broker-{replica_id}", self.name)

    def process(self, replica_id: int) -> subprocess.Popen | None:
        """The replica's process (None when it exited)."""
        check_assigned(replica_id, self.replica_ids, self.name)
        return self._processes.get(replica_id)

    def address(self, replica_id: int) -> tuple[str, int]:
        """Where the replica's process listens (its last one)."""
        check_assigned(replica_id, self.replica_ids, self.name)
        return self._addresses[replica_id]

    def client(self, replica_id: int, *, controller: bool = False) -> BrokerClient:
        """A connection to the replica's process for produce and fetch requests (one at a
        time), or the controller's own (``controller``)."""
        address = self.address(replica_id)
        clients = self._handles if controller else self._clients
        client = clients.get(replica_id)
        if client is None or client.address != address:
            client = clients[replica_id] = BrokerClient(address)
            client.addresses, client.online = self._addresses, replica_id in self._processes
        return client

    @property
    def live_replicas(self) -> tuple[int, ...]:
        """The replicas the controller counts as running, in assignment order."""
        return self._controller.live_replicas

    def _start_process(self, replica_id: int) -> None:
        proc, address = start_process(self.path(replica_id), replica_id, *self._options)
        self._processes[replica_id] = proc
        self._addresses[replica_id] = address
        self.client(replica_id, controller=True)

    def _end_process(self, replica_id: int, sig: int) -> None:
        close_process(self._processes.pop(replica_id), sig)
        for clients in (self._clients, self._handles):
            client = clients.pop(replica_id, None)
            if client is not None:
                client.close()

    def _stall(self, replica_id: int) -> None:
        """SIGSTOP the process, outside its changes of the partition state: the state's
        lock is held until the process stopped, so that a stalled replica never holds it."""
        proc = self._processes[replica_id]
        with state_lock(self.state_path):
            proc.send_signal(signal.SIGSTOP)
            os.waitpid(proc.pid, os.WUNTRACED)

    def close(self) -> None:
        """Stop every replica process cleanly (SIGTERM: logs closed, high watermarks checkpointed)."""
        if self._closed.is_set():
            return
        self._closed.set()
        for r in list(self._processes):
            self._end_process(r, signal.SIGTERM)

    # ==== facts =======================================================================================
    @property
    def high_watermark(self) -> int:
        """The leader's high watermark, as its consumer Fetch answers it."""
        return self._leader_fetch(0)[0].high_watermark

    # ==== produce and consume =========================================================================
    def append(self, records, *, acks=1, timeout_ms: int = 30_000, **batch_options):
        """Produce ``records`` (one batch, ``encode_batch`` options) through the current
        leader, in its leader epoch; its ``AppendInfo`` once ``acks`` is met, else Kafka's
        error as ``ReplicaSet.append`` raises it. :class:`LeaderNotAvailableError` when the
        partition has no leader."""
        self._check_open()
        check_records_iterable(records)
        check_acks(acks)
        check_timeout_ms(timeout_ms)
        state = self.state
        if state.leader == NO_LEADER:
            raise LeaderNotAvailableError(state.no_leader(self.name))
        return self.client(state.leader).produce(encode_batch(records, **batch_options), acks=acks,
                                                 timeout_ms=timeout_ms, leader_epoch=state.leader_epoch)

    def records(self, start_offset: int = 0):
        """The leader's records from ``start_offset`` up to its high watermark, one consumer
        Fetch (at most 1 MiB) at a time. A Fetch may end inside a batch, as Kafka's does:
        the batches before the cut are read, the cut one is fetched whole next time."""
        self._check_open()
        check_int(start_offset, "start_offset", OFFSET_RANGE)
        offset = start_offset
        while True:
            resp, raw = self._leader_fetch(offset)
            if not raw:
                return
            fetched_from = offset
            for batch in decode_batches(raw, allow_incomplete=True):
                for record in batch:
                    if record.offset >= offset:
                        yield record
                offset = batch.last_offset + 1
            if offset == fetched_from:
                raise ReplicationError(f"the leader of {self.name} answered a Fetch at offset {offset} with "
                                       f"{len(raw)} bytes holding no whole batch")

    def _leader_fetch(self, offset: int) -> tuple[FetchResponse, bytes]:
        state = self.state
        if state.leader == NO_LEADER:
            raise LeaderNotAvailableError(state.no_leader(self.name))
        resp, raw = self.client(state.leader).consume(offset, leader_epoch=state.leader_epoch)
        if resp.error == OFFSET_OUT_OF_RANGE:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [{resp.log_start_offset}, "
                                        f"{resp.log_end_offset}] of {self.name}'s leader")
        if resp.error is not None:
            raise ReplicationError(f"the leader {state.leader} of {self.name} answered {resp.error}")
        return resp, raw

    # ==== controller =================================================================================
    def fail_replica(self, replica_id: int, *, sig: int = signal.SIGKILL) -> None:
        """Signal the replica's process (SIGKILL: a crash; SIGTERM: a clean stop; SIGSTOP: a
        stall, it keeps its state) and count it as down: it leaves the ISR, or, if it led, a
        new leader is elected (clean, or unclean when enabled and no ISR replica is live),
        else the partition is offline until an ISR replica returns."""
        check_assigned(replica_id, self.replica_ids, self.name)
        if sig not in FAILURE_SIGNALS:
            raise InvalidArgumentError(f"sig must be one of {', '.join(s.name for s in FAILURE_SIGNALS)}, not {sig!r}")
        self._check_open()
        with self._lock:
            if replica_id not in self._processes:
                pass  # down already: only the partition state may still count it
            elif sig == signal.SIGSTOP:
                self._stall(replica_id)
            else:
                self._end_process(replica_id, sig)
            if replica_id in self._handles:
                self._handles[replica_id].online = False
            self._controller.replica_failed(replica_id)

    def restart_replica(self, replica_id: int) -> None:
        """The replica comes back: a stalled process continues (SIGCONT), a dead one starts
        again (recovering its log). It follows the leader, cutting what diverges by leader
        epochs, or leads if the partition had none."""
        self._check_open()
        check_assigned(replica_id, self.replica_ids, self.name)
        with self._lock:
            proc = self._processes.get(replica_id)
            if proc is not None:
                proc.send_signal(signal.SIGCONT)
                self._handles[replica_id].online = True
            else:
                self._start_process(replica_id)
            self._controller.replica_restarted(replica_id)
