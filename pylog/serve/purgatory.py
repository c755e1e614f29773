"""Waiting for appends, as Kafka's ``DelayedOperationPurgatory`` holds a ``DelayedFetch``
until data arrives or ``max_wait_ms`` passes: a fetch that found less than ``min_bytes``
waits on :class:`AppendNotifier` instead of polling; a JoinGroup waiting for the group's
other members, on :class:`GroupNotifier`.

The server notifies after its own appends, and, on Linux, when inotify reports a change in
the directory of a partition it reads (an append by a pylog client of another process,
:class:`~pylog.serve.replica_manager.ReplicaManager`); without inotify such an append is
seen at the fetch's deadline (its next read finds it). Cost: one ``asyncio.Event`` per
round of appends; waking is O(waiting fetches).
"""

from __future__ import annotations

import asyncio


class AppendNotifier:
    """Wakes every fetch waiting when any partition was appended to. Event-loop thread only."""

    def __init__(self):
        self._event = asyncio.Event()

    def waiter(self) -> asyncio.Event:
        """The event the next :meth:`notify` sets: take it *before* reading, so an append
        between the read and the wait is not missed."""
        return self._event

    def notify(self) -> None:
        """Wake everyone waiting on the current event; later waiters get a fresh one."""
        event, self._event = self._event, asyncio.Event()
        event.set()


class GroupNotifier:
    """One :class:`AppendNotifier` per group: what a waiting JoinGroup wakes on (every join,
    heartbeat and leave of the group notifies it). Also the members' subscription bytes, by
    group, member and protocol, for the leader's JoinGroup answer. Event-loop thread only."""

    def __init__(self):
        self._notifiers: dict[str, AppendNotifier] = {}
        self.metadata: dict[str, dict[str, dict[str, bytes]]] = {}

    def waiter(self, group_id: str) -> asyncio.Event:
        return self._notifiers.setdefault(group_id, AppendNotifier()).waiter()

    def notify(self, group_id: str) -> None:
        notifier = self._notifiers.get(group_id)
        if notifier is not None:
            notifier.notify()


async def wait_for(event: asyncio.Event, timeout_s: float) -> bool:
    """True once ``event`` is set, False after ``timeout_s`` without it."""
    if timeout_s <= 0:
        return event.is_set()
    try:
        await asyncio.wait_for(event.wait(), timeout_s)
        return True
    except asyncio.TimeoutError:
        return False
