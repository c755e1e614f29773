"""The controller's election rules (Kafka's ``PartitionLeaderElectionAlgorithms``), shared by
the controller of a ``ReplicaSet`` and of a ``ProcessReplicaSet``: who may lead, and the
state a new leader epoch records. Pure functions of the recorded state and the live
replicas (in assignment order)."""

from __future__ import annotations

import os
from dataclasses import replace

from pylog.arguments import check_int
from pylog.errors import InvalidArgumentError
from pylog.layout import INT32_MAX, INT64_MAX
from pylog.partition_dir import parse_partition_dir
from pylog.replication.state import NO_LEADER, PartitionState


#: The most replicas a set takes: each is a log (and, in a ``ProcessReplicaSet``, a process),
#: and Kafka's own partitions rarely have more than a handful.
MAX_REPLICAS = 64


def check_replica_settings(replicas, min_insync_replicas, **settings_ms) -> tuple[int, ...]:
    """The replica ids ``replicas`` names (a count in [1, ``MAX_REPLICAS``], or as many
    distinct ids in [0, INT32_MAX]: Kafka's broker ids), with ``min_insync_replicas`` in
    [1, replicas] and each of ``settings_ms`` (times and sizes) an int >= 1, or
    :class:`InvalidArgumentError` naming the first that is not, before a replica set
    starts anything. O(replicas)."""
    if isinstance(replicas, int) and not isinstance(replicas, bool):
        check_int(replicas, "replicas", (1, MAX_REPLICAS))
        ids = list(range(replicas))
    elif isinstance(replicas, (list, tuple, range)):
        check_int(len(replicas), "the number of replicas", (1, MAX_REPLICAS))
        ids = list(replicas)
    else:
        raise InvalidArgumentError(f"replicas must be a count or a list of replica ids, not {replicas!r}")
    if len(set(ids)) != len(ids) or any(type(r) is not int or not 0 <= r <= INT32_MAX for r in ids):
        raise InvalidArgumentError(f"replicas must be distinct ids in [0, {INT32_MAX}], not {replicas!r}")
    check_int(min_insync_replicas, "min_insync_replicas", (1, len(ids)))
    for name, value in settings_ms.items():
        check_int(value, name, (1, INT32_MAX if name.endswith("bytes") else INT64_MAX))
    return tuple(ids)


def check_partition_name(name) -> str:
    """``name`` if it names a partition directory, ``<topic>-<partition>`` (else
    :class:`InvalidArgumentError`, or :class:`InvalidTopicError` for the topic)."""
    if not isinstance(name, str):
        raise InvalidArgumentError(f"the partition's name must be a str such as 'events-0', not {name!r}")
    parse_partition_dir(name)
    return name


def check_root(root: str) -> None:
    """:class:`InvalidArgumentError` when a file stands where a replica set's root goes."""
    if os.path.exists(root) and not os.path.isdir(root):
        raise InvalidArgumentError(f"replica set root {root} is a file, not a directory")


def check_assigned(replica_id, replicas, name: str) -> None:
    """:class:`InvalidArgumentError` unless ``replica_id`` is one of ``replicas``."""
    if replica_id not in replicas:
        raise InvalidArgumentError(f"replica {replica_id!r} is not one of the replicas {tuple(replicas)} of {name}")


def reassigned(state: PartitionState, replicas, name: str) -> PartitionState:
    """``state`` for a set reopened with ``replicas``: the ISR keeps its assigned members and
    a leader no longer assigned leaves (no leader: the caller elects one from that ISR, in
    the next leader epoch). :class:`InvalidArgumentError` when no in-sync replica is
    assigned: they alone are known to hold every committed record."""
    replicas = tuple(replicas)
    isr = tuple(r for r in state.isr if r in replicas)
    if state.isr and not isr:
        raise InvalidArgumentError(f"replicas {replicas} leave out every in-sync replica {state.isr} of {name}: "
                                   f"only they are known to hold every committed record")
    leader = state.leader if state.leader in replicas else NO_LEADER
    if (leader, isr) == (state.leader, state.isr):
        return replace(state, replicas=replicas)
    return replace(state, leader=leader, isr=isr, replicas=replicas, partition_epoch=state.partition_epoch + 1)


def eligible_leader(state: PartitionState, live, *, clean: bool, leader: int | None = None) -> int | None:
    """``leader`` if it may lead, else the first live ISR replica, else (unclean) the first
    live replica; None when none may. ``clean``: only live ISR replicas are eligible."""
    candidates = [r for r in live if r in state.isr] if clean else list(live)
    if leader is not None:
        return leader if leader in candidates else None
    in_isr = [r for r in candidates if r in state.isr]
    return (in_isr or candidates or [None])[0]


def elected(state: PartitionState, leader: int, live, replicas) -> PartitionState:
    """The next leader epoch led by ``leader``: the ISR keeps its live members (just the
    leader after an unclean election)."""
    isr = tuple(r for r in state.isr if r in live) if leader in state.isr else (leader,)
    return replace(state, leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr, replicas=tuple(replicas),
                   partition_epoch=state.partition_epoch + 1)


def offline(state: PartitionState, replicas) -> PartitionState:
    """No replica may lead: ``leader`` -1 in the next leader epoch; the ISR keeps its last
    members, as Kafka's does, so that one of them leads when it returns."""
    return replace(state, leader=NO_LEADER, leader_epoch=state.leader_epoch + 1, replicas=tuple(replicas),
                   partition_epoch=state.partition_epoch + 1)
