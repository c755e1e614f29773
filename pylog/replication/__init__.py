"""Replication with Kafka's semantics (docs/replication.md): ``ReplicaSet`` (a partition on
N log directories and its ``acks``), ``Controller`` (every change of the partition state:
elections, AlterPartition, LeaderAndIsr), ``PendingAppend`` (an append in flight),
``ProcessReplicaSet`` (the same with every replica in its own process, ``broker``),
``Replica`` (one copy, leader or follower), the fetch exchange (``protocol``,
``transport``) and the divergence search by leader epochs (``truncation``)."""

from pylog.replication.acks import PendingAppend
from pylog.replication.process_replica_set import ProcessReplicaSet
from pylog.replication.replica import Replica
from pylog.replication.replica_set import ReplicaSet
from pylog.replication.state import PartitionState

__all__ = ["PartitionState", "PendingAppend", "ProcessReplicaSet", "Replica", "ReplicaSet"]
