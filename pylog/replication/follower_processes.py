"""``FollowerProcesses``: the followers of a ``ReplicaSet`` that run in processes of their
own (``remote_replicas``), fetching from its leader over TCP: the leader's server
(``serve``), starting and stopping their ``python -m pylog.replication.broker`` processes.
Unlike a ``ProcessReplicaSet``, the controller and the leader stay in the set's process and
these followers never change the partition state."""

from __future__ import annotations

import signal
import subprocess

from pylog.errors import InvalidArgumentError
from pylog.replication.broker_client import close_process, start_process
from pylog.replication.election import check_assigned
from pylog.replication.transport import ReplicaServer


class FollowerProcesses:
    """The part of ``ReplicaSet`` that runs its remote followers (a mixin: it uses the
    set's ``_leader_replica``, ``_replicas``, ``leader`` and ``leader_epoch``)."""

    remote_replicas: tuple[int, ...] = ()
    _server: ReplicaServer | None = None

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

    def _stop_follower_processes(self) -> list:
        """The steps that stop every follower process and the server (for ``close_all``)."""
        steps = [lambda r=r: self.stop_follower_process(r) for r in list(self._processes)]
        return steps + ([] if self._server is None else [self._server.close])
