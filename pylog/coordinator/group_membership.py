"""``GroupMembership``: the members, generation and assignment of a consumer group whose
members are processes of one host, kept with the operating system's primitives.

The group's state is a JSON file, ``<log dir>/.pylog-group-<hash>.json``, replaced
atomically (write, rename) under a mutex: a byte of ``.pylog-clients.lock`` locked with
``F_OFD_SETLKW``. Each member holds a lease: a lock on its own byte of the same file (the
kernel releases it when the process dies, SIGKILL included) and a heartbeat timestamp it
renews every ``heartbeat_interval_ms``. A member whose lock is free, or whose heartbeat is
older than its ``session_timeout_ms``, is removed by the next member that looks.

Rebalances follow Kafka's classic protocol. A join, leave or removal moves the group to
``PreparingRebalance``; every member then gives up its partitions (all of them with the
eager ``range`` and ``roundrobin`` assignors, none yet with ``cooperative-sticky``) and
rejoins, or is removed after ``rebalance_timeout_ms``. When all have rejoined, the member
completing the rebalance bumps the generation, computes the assignment with the group's
assignor and the group is ``Stable``. With ``cooperative-sticky`` a partition that moves
is withheld until its old owner gave it up, which the old owner does in the next
generation and then asks for one more rebalance, as Kafka's incremental protocol does.
A partition is thus never owned by two members of a generation.

Cost: each operation reads and rewrites a file of O(members) lines under the mutex.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid

from pylog.coordinator.assignors import ASSIGNORS, assign
from pylog.errors import (
    CorruptCheckpointError, IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError,
)
from pylog.io import DEFAULT_IO
from pylog.layout import CLIENTS_LOCK_FILE
from pylog.locks import ByteLockFile, ByteMutex, name_byte
from pylog.record.encode import now_ms

_MAX_SLOTS = 4096


def group_file(root: str, group_id: str) -> str:
    digest = hashlib.blake2b(group_id.encode(), digest_size=10).hexdigest()
    return os.path.join(root, f".pylog-group-{digest}.json")


def read_group_file(root: str, group_id: str) -> dict | None:
    """The group's state as last written, or None for a group never joined."""
    path = group_file(root, group_id)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        state = json.loads(data)
    except ValueError as e:
        raise CorruptCheckpointError(f"group state is not JSON: {e}", path=path) from None
    return state


def _empty_state(group_id: str) -> dict:
    return {"group_id": group_id, "generation": 0, "state": "Empty", "protocol": None, "leader": None,
            "members": {}, "assignment": {}, "rebalance_started_ms": -1, "current_state_ms": now_ms()}


class GroupMembership:
    """The group state of ``group_id`` in ``root``; ``on_generation(state)`` is called
    (under the mutex) when a rebalance completes or the group empties, to record it.

    ``lock_file``: the open ``.pylog-clients.lock`` to take the group's bytes on, shared by
    the memberships of different groups (the group coordinator's: one descriptor for all its
    groups, where each used to hold its own); by default one of its own, closed by
    :meth:`close`. Two memberships of the same group in one process (a server's and a
    ``Consumer``'s) must not share one: the locks of one open file do not exclude each other."""

    def __init__(self, root: str, group_id: str, on_generation=None, *, lock_file: ByteLockFile | None = None):
        self.root, self.group_id = root, group_id
        self.path = group_file(root, group_id)
        self._owns_locks = lock_file is None
        self._locks = ByteLockFile(os.path.join(root, CLIENTS_LOCK_FILE)) if lock_file is None else lock_file
        self._base = name_byte("group:" + group_id)
        self.mutex = ByteMutex(self._locks, self._base)
        self._on_generation = on_generation
        self._slot: int | None = None

    def close(self) -> None:
        """Give back this process's lease (its slot) and, if it is its own, the lock file."""
        if self._owns_locks:
            self._locks.close()
        elif self._slot is not None:
            self._locks.unlock(self._base + 1 + self._slot)
            self._slot = None

    # -- state file ----------------------------------------------------------------------------
    def read(self) -> dict:
        return read_group_file(self.root, self.group_id) or _empty_state(self.group_id)

    def _write(self, state: dict) -> None:
        DEFAULT_IO.write_file(self.path, json.dumps(state, sort_keys=True).encode(), fsync=False)

    def _alive(self, member: dict, now: int) -> bool:
        mine = member["slot"] == self._slot  # a lock does not conflict with itself
        return ((mine or self._locks.is_locked(self._base + 1 + member["slot"]))
                and now - member["heartbeat_ms"] <= member["session_timeout_ms"])

    def _expire(self, state: dict, now: int) -> bool:
        """Remove dead members, and members that did not rejoin in time; True if any."""
        gone = [m for m, info in state["members"].items() if not self._alive(info, now) or (
            state["state"] == "PreparingRebalance" and not info["joined"]
            and now - state["rebalance_started_ms"] > info["rebalance_timeout_ms"])]
        for m in gone:
            del state["members"][m]
        return bool(gone)

    def _prepare_rebalance(self, state: dict, now: int) -> None:
        if state["state"] != "PreparingRebalance":
            state["state"], state["rebalance_started_ms"], state["current_state_ms"] = "PreparingRebalance", now, now
            for info in state["members"].values():
                info["joined"] = False

    def _try_complete(self, state: dict, now: int) -> None:
        if not state["members"]:
            if state["state"] != "Empty":
                state.update(state="Empty", generation=state["generation"] + 1, protocol=None, leader=None,
                             assignment={}, current_state_ms=now)
                self._generation_done(state)
            return
        if state["state"] != "PreparingRebalance" or not all(i["joined"] for i in state["members"].values()):
            return
        members = state["members"]
        protocol = next((a for a in next(iter(members.values()))["assignors"]
                         if all(a in i["assignors"] for i in members.values())), "range")
        owned = {m: [tuple(tp) for tp in i["owned"]] for m, i in members.items()}
        target = assign(protocol, self.root, {m: i["topics"] for m, i in members.items()}, owned)
        if ASSIGNORS[protocol].cooperative:
            held = {tp: m for m, tps in owned.items() for tp in tps}
            target = {m: [tp for tp in tps if held.get(tp, m) == m] for m, tps in target.items()}
        state.update(state="Stable", generation=state["generation"] + 1, protocol=protocol,
                     leader=min(members), current_state_ms=now,
                     assignment={m: [list(tp) for tp in sorted(tps)] for m, tps in target.items()})
        self._generation_done(state)

    def _generation_done(self, state: dict) -> None:
        if self._on_generation is not None:
            self._on_generation(state)

    # -- member operations ----------------------------------------------------------------------
    def join(self, member_id: str | None, *, topics, assignors, owned=(), session_timeout_ms: int,
             rebalance_timeout_ms: int, client_id: str) -> str:
        """Join (or rejoin) the group, starting a rebalance; returns the member id."""
        with self.mutex:
            state = self.read()
            now = now_ms()
            self._expire(state, now)
            if member_id is None or member_id not in state["members"]:
                member_id = member_id or f"{client_id}-{uuid.uuid4()}"
                self._take_slot()
                self._prepare_rebalance(state, now)
            elif state["state"] == "Stable":
                self._prepare_rebalance(state, now)
            state["members"][member_id] = {
                "slot": self._slot, "heartbeat_ms": now, "session_timeout_ms": session_timeout_ms,
                "rebalance_timeout_ms": rebalance_timeout_ms, "client_id": client_id,
                "client_host": "/" + _host(), "topics": sorted(topics), "assignors": list(assignors),
                "owned": [list(tp) for tp in sorted(owned)], "joined": True}
            self._try_complete(state, now)
            self._write(state)
            return member_id

    def _take_slot(self) -> None:
        if self._slot is not None:
            return
        for slot in range(_MAX_SLOTS):
            if self._locks.try_lock(self._base + 1 + slot):
                self._slot = slot
                return
        raise RebalanceInProgressError(f"group {self.group_id!r} has {_MAX_SLOTS} members already")

    def heartbeat(self, member_id: str) -> dict:
        """Renew the lease, remove dead members (starting a rebalance), complete a
        rebalance everyone rejoined; returns the state. Raises
        :class:`UnknownMemberIdError` if the group removed this member."""
        with self.mutex:
            state = self.read()
            now = now_ms()
            me = state["members"].get(member_id)
            if me is None:
                raise UnknownMemberIdError(f"member {member_id} is no longer in group {self.group_id!r}")
            me["heartbeat_ms"] = now
            if self._expire(state, now):
                self._prepare_rebalance(state, now)
            self._try_complete(state, now)
            self._write(state)
            return state

    def leave(self, member_id: str) -> None:
        """Leave the group (its partitions go to the others after a rebalance). This
        process's lease is given back with its last member of the group (a process may
        hold several: a server's clients, or two Consumers)."""
        with self.mutex:
            state = self.read()
            now = now_ms()
            if state["members"].pop(member_id, None) is not None:
                self._expire(state, now)
                if state["members"]:
                    self._prepare_rebalance(state, now)
                self._try_complete(state, now)
                self._write(state)
            if any(info["slot"] == self._slot for info in state["members"].values()):
                return
        if self._slot is not None:
            self._locks.unlock(self._base + 1 + self._slot)
            self._slot = None

    def live_members(self, state: dict) -> list[str]:
        """The members of ``state`` whose lease holds now."""
        now = now_ms()
        return [m for m, info in state["members"].items() if self._alive(info, now)]

    def check_commit(self, state: dict, member_id: str, generation: int) -> None:
        """Whether a member may commit offsets in ``state`` (read under the mutex):
        Kafka's rules. A commit without a generation (-1) is allowed only to a group
        without members; others must name the current generation, and be members that
        have not given up their partitions for a rebalance under way."""
        self._expire(state, now_ms())
        if generation < 0 and not member_id:
            if state["members"]:
                raise UnknownMemberIdError(
                    f"group {self.group_id!r} has members; a commit must come from one of them")
            return
        me = state["members"].get(member_id)
        if me is None:
            raise UnknownMemberIdError(f"member {member_id} is not in group {self.group_id!r}")
        if generation != state["generation"]:
            raise IllegalGenerationError(f"group {self.group_id!r} is at generation {state['generation']}, "
                                         f"not {generation}")
        if state["state"] == "PreparingRebalance" and me["joined"]:
            raise RebalanceInProgressError(f"group {self.group_id!r} is rebalancing and member {member_id} "
                                           f"gave up its partitions")


def _host() -> str:
    try:
        return socket.gethostname()
    except OSError:
        return "localhost"
