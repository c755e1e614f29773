"""``Consumer``: Kafka's consumer (kafka-python's names) reading a pylog log dir, alone
(``assign``) or as a member of a consumer group (``subscribe`` with a ``group_id``).

``poll`` reads each assigned partition through a read-only :class:`~pylog.log.Log` from
the consumer's position; when nothing is there it sleeps on inotify watches of the
partition directories (pylog/logdir/wakeup.py), so it returns as soon as a producer in
any process appends, and an idle consumer uses no CPU. Positions start at the group's
committed offset, else at ``auto_offset_reset`` (``earliest``, ``latest``, or ``none``:
:class:`OffsetOutOfRangeError`); a position that retention or ``delete_records`` left
behind is reset the same way, as Kafka's consumer does.

The consumer composes three parts, as Kafka's does: a :class:`SubscriptionState` (what is
read and from where), a :class:`~pylog.clients.fetcher.Fetcher` (the reads) and, with a
``group_id``, a :class:`~pylog.clients.consumer_coordinator.ConsumerCoordinator` (the
group and its commits); each is handed the subscription state, none sees the consumer.

Groups (pylog/coordinator/group_membership.py) rebalance when members come, leave or die;
``poll`` takes part (it gives up partitions, calls the listener, rejoins), and a
background thread keeps the member's lease with a heartbeat every
``heartbeat_interval_ms``. Commits (pylog/coordinator/group_coordinator.py) are refused
once the generation moved on, so a member that lost its partitions cannot overwrite the
positions of their new owner. What is durable when: docs/consumers.md.
"""

from __future__ import annotations

import os
import time

from pylog.arguments import check_function
from pylog.clients.consumer_coordinator import (  # noqa: F401 - public here
    ConsumerCoordinator, GroupMetadata, OffsetAndMetadata, checked_commit_offsets,
)
from pylog.clients.consumer_record import ConsumerRecord
from pylog.clients.fetcher import Fetcher
from pylog.clients.offset_fetcher import OffsetAndTimestamp  # noqa: F401 - public here
from pylog.clients.partition_logs import as_topic_partition, partition_list
from pylog.clients.settings import ISOLATION_LEVELS, check_consumer_settings, check_poll_arguments
from pylog.clients.settings import refuse_unknown_settings
from pylog.clients.subscription_state import (
    ConsumerRebalanceListener, SubscriptionState, SubscriptionType, TopicPartition,
)
from pylog.logdir.wakeup import DirWatch
from pylog.closing import close_all
from pylog.errors import ClientStateError, InvalidArgumentError, LogDirNotFoundError
from pylog.layout import INT32_MAX


class Consumer:
    """Reads records of the topics of the log dir ``root``.

    ``key_deserializer``/``value_deserializer``: functions that turn a record's key or
    value bytes into what ``poll`` returns (``json.loads``), as kafka-python's and Kafka's
    deserializers; a None key or value stays None. One that raises stops the partition
    there (:class:`~pylog.errors.RecordDeserializationError`). ``poll_columns`` returns the
    bytes as they are.

    >>> import tempfile
    >>> from pylog import LogManager
    >>> root = tempfile.mkdtemp()
    >>> with LogManager(root) as m: _ = m.create_topic("events", 1).append([b"a", b"b"])
    >>> with Consumer(root, auto_offset_reset="earliest") as c:
    ...     c.assign([TopicPartition("events", 0)])
    ...     [r.value for r in c.poll(timeout_ms=1000)[TopicPartition("events", 0)]]
    [b'a', b'b']
    """

    def __init__(self, root, group_id: str | None = None, *, auto_offset_reset: str = "latest",
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 5000,
                 isolation_level: str = "read_uncommitted", session_timeout_ms: int = 10_000,
                 heartbeat_interval_ms: int = 3000, max_poll_interval_ms: int = 300_000,
                 max_poll_records: int = 500, fetch_max_bytes: int = 1 << 20,
                 partition_assignment_strategy=("range", "cooperative-sticky"), client_id: str = "pylog",
                 consumer_timeout_ms: float = float("inf"), exclude_internal_topics: bool = True,
                 key_deserializer=None, value_deserializer=None, max_open_files: int | None = None, **settings):
        refuse_unknown_settings(Consumer, settings)
        if isinstance(partition_assignment_strategy, str):
            partition_assignment_strategy = (partition_assignment_strategy,)
        check_consumer_settings(**{name: value for name, value in locals().items()
                                   if name not in ("self", "root", "max_open_files", "settings")})
        if not os.path.isdir(root):
            raise LogDirNotFoundError(f"log dir {root} does not exist or is not a directory")
        self.root, self.group_id, self.client_id = os.path.abspath(root), group_id, client_id
        self.auto_offset_reset, self.isolation = auto_offset_reset, ISOLATION_LEVELS[isolation_level]
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_ms, self.assignors = auto_commit_interval_ms, tuple(partition_assignment_strategy)
        self.session_timeout_ms, self.heartbeat_interval_ms = session_timeout_ms, heartbeat_interval_ms
        self.max_poll_interval_ms, self.consumer_timeout_ms = max_poll_interval_ms, consumer_timeout_ms
        self.max_poll_records, self.fetch_max_bytes = max_poll_records, fetch_max_bytes
        self.exclude_internal_topics = exclude_internal_topics
        self.key_deserializer, self.value_deserializer = key_deserializer, value_deserializer
        self._closed = False
        self._watch = DirWatch()
        self._watch.add(self.root)
        self._subscriptions = SubscriptionState(exclude_internal_topics=exclude_internal_topics)
        self._fetcher = Fetcher(self.root, self._subscriptions, self._watch, isolation=self.isolation,
                                fetch_max_bytes=fetch_max_bytes, auto_offset_reset=auto_offset_reset,
                                key_deserializer=key_deserializer, value_deserializer=value_deserializer,
                                max_open_files=max_open_files)
        self._offsets = self._fetcher.offsets
        self._coordinator = None if group_id is None else ConsumerCoordinator(
            self.root, group_id, self._subscriptions, assignors=self.assignors,
            session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms, client_id=client_id,
            enable_auto_commit=self.enable_auto_commit, auto_commit_interval_ms=auto_commit_interval_ms,
            list_topics=self._fetcher.logs.topics)

    # -- subscription and assignment --------------------------------------------------------
    def assign(self, partitions) -> None:
        """Read exactly ``partitions`` (no group management); :class:`UnknownTopicError`
        for one that does not exist, before the assignment changes."""
        self._check_open()
        self._subscriptions.check_type(SubscriptionType.USER_ASSIGNED)
        self._fetcher.assign(set(partition_list(partitions)))

    def subscribe(self, topics=(), pattern: str | None = None, listener: ConsumerRebalanceListener | None = None):
        """Subscribe to ``topics`` or the topics matching ``pattern`` (a regex), as a
        member of ``group_id``; partitions are assigned in ``poll``. A pattern leaves out
        Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``) unless the
        consumer was made with ``exclude_internal_topics=False``; named topics are taken as named."""
        self._check_open()
        self._subscriptions.check_type(SubscriptionType.AUTO_TOPICS)
        if self._coordinator is None:
            raise InvalidArgumentError("subscribe() needs a group_id; use assign() without one")
        self._subscriptions.subscribe(topics, pattern, listener)
        self._coordinator.subscribe()

    def unsubscribe(self) -> None:
        self._check_open()
        if self._coordinator is not None:
            self._coordinator.leave_group()
        self._subscriptions.unsubscribe()
        self._fetcher.sync_assignment()

    def subscription(self) -> set[str]:
        self._check_open()
        return set(self._subscriptions.subscribed_topics(self._fetcher.logs.topics))

    def assignment(self) -> set[TopicPartition]:
        self._check_open()
        return self._subscriptions.assignment()

    def topics(self) -> set[str]:
        """The topics of the log dir, Kafka's internal ones left out unless
        ``exclude_internal_topics=False`` (kafka-python's ``topics()``, Java's
        ``listTopics()``). O(directory entries)."""
        self._check_open()
        return {t for t in self._fetcher.logs.topics() if not self._subscriptions.is_excluded(t)}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition numbers of ``topic``; None when the log dir has no such topic
        (kafka-python's ``partitions_for_topic``). O(directory entries)."""
        self._check_open()
        return self._fetcher.logs.partitions(topic)

    # -- positions --------------------------------------------------------------------------
    def _check_assigned(self, tp) -> TopicPartition:
        self._check_open()
        return self._subscriptions.assigned_partition(as_topic_partition(tp))

    def position(self, tp) -> int:
        """The offset of the next record ``poll`` returns for ``tp``."""
        tp = self._check_assigned(tp)
        if self._subscriptions.position(tp) is None:
            self._offsets.update_fetch_positions(self._coordinator, [tp], deleted_ok=False)
        return self._subscriptions.position(tp)

    def seek(self, tp, offset: int) -> None:
        tp = self._check_assigned(tp)
        if not isinstance(offset, int) or offset < 0:
            raise InvalidArgumentError(f"offset must be an int >= 0, not {offset!r}")
        self._fetcher.seek(tp, offset)

    def seek_to_beginning(self, *partitions) -> None:
        self._seek_to("earliest", partitions)

    def seek_to_end(self, *partitions) -> None:
        """Move to the latest offset: the high watermark (``read_uncommitted``, as Kafka's
        consumer) or the last stable offset (``read_committed``); see :mod:`pylog.clients.offset_fetcher`."""
        self._seek_to("latest", partitions)

    def _seek_to(self, spec: str, partitions) -> None:
        for tp in partitions or sorted(self._subscriptions.assignment()):
            self._fetcher.seek(self._check_assigned(tp), spec)

    def highwater(self, tp) -> int:
        """The high watermark of the assigned partition ``tp`` (kafka-python's
        ``highwater``), read from the partition now rather than from the last fetch. O(1)
        besides a refresh."""
        return self._offsets.high_watermark(self._check_assigned(tp))

    def beginning_offsets(self, partitions) -> dict:
        self._check_open()
        return self._offsets.beginning_offsets(partitions)

    def end_offsets(self, partitions) -> dict:
        """``{tp: the latest offset}``, as :meth:`seek_to_end` takes it. O(1) each."""
        self._check_open()
        return self._offsets.end_offsets(partitions)

    def offsets_for_times(self, timestamps: dict) -> dict:
        """``{tp: OffsetAndTimestamp | None}`` (Kafka's offsetsForTimes; see
        :meth:`OffsetFetcher.offsets_for_times <pylog.clients.offset_fetcher.OffsetFetcher.offsets_for_times>`)."""
        self._check_open()
        return self._offsets.offsets_for_times(timestamps)

    def pause(self, *partitions) -> None:
        """Fetch nothing more from ``partitions`` until ``resume``; iteration stops yielding
        their records already fetched (they come again after ``resume``)."""
        for tp in partitions:
            self._fetcher.pause(self._check_assigned(tp))

    def resume(self, *partitions) -> None:
        self._check_open()
        for tp in partitions:
            self._subscriptions.resume(as_topic_partition(tp))

    def paused(self) -> set:
        self._check_open()
        return self._subscriptions.paused()

    # -- polling ----------------------------------------------------------------------------
    def poll(self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True) -> dict:
        """``{TopicPartition: [ConsumerRecord, ...]}``: up to ``max_records`` records
        (``max_poll_records`` by default), returned as soon as there are any, or an empty
        dict after ``timeout_ms``. Takes part in rebalances and auto-commits. Cost: one
        read per partition with data; while waiting, none (inotify)."""
        self._fetcher.stop_iteration()
        return self._poll(timeout_ms, self.max_poll_records if max_records is None else max_records, columnar=False)

    def poll_columns(self, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        """Like :meth:`poll`, as :class:`~pylog.record.columnar.Columns` per partition
        (numpy arrays: offsets, timestamps, keys and values), without a Python object per
        record. ``read_uncommitted`` only."""
        if self.isolation != "uncommitted":
            raise InvalidArgumentError("poll_columns reads with isolation_level='read_uncommitted' only")
        self._fetcher.stop_iteration()
        return self._poll(timeout_ms, self.max_poll_records if max_records is None else max_records, columnar=True)

    def _poll(self, timeout_ms: int, max_records: int, *, columnar: bool) -> dict:
        """kafka-python's ``_poll_once`` in a loop until records or ``timeout_ms``: the
        group's turn, positions, a fetch, then a wait for an append or the next duty. The
        wait reads inotify's events, no look before it: a poll that finds records makes no
        system call for them; events of appends a look saw end the next wait at once."""
        self._check_open()
        check_poll_arguments(timeout_ms, max_records)
        coordinator, user_assigned = self._coordinator, self._subscriptions.user_assigned
        if not user_assigned and not (coordinator is not None and coordinator.active):
            raise ClientStateError("poll() before subscribe() or assign(): the consumer reads no partition")
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if user_assigned:
                self._fetcher.logs.recreated()
            if coordinator is not None:
                coordinator.poll()
                self._fetcher.sync_assignment()
            self._offsets.update_fetch_positions(coordinator)
            if coordinator is not None:
                coordinator.maybe_auto_commit()
            out = self._fetcher.fetched_columns(max_records) if columnar else self._fetcher.fetched_records(max_records)
            if out:
                return out
            wait = deadline - time.monotonic()
            if wait <= 0:
                return {}
            wait = min(wait, self._fetcher.abort_expired_transactions())
            if coordinator is not None:
                wait = min(wait, coordinator.next_check_s())
            self._watch.wait(max(wait, 0.0005))

    def __iter__(self):
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record; StopIteration after ``consumer_timeout_ms`` without one. The
        position moves past each record as it is yielded (a commit or ``close`` while
        iterating covers what the loop was given, no more), as kafka-python's iterator does."""
        while True:
            record = self._fetcher.next_iterated()
            if record is not None:
                return record
            timeout = self.consumer_timeout_ms
            got = self._poll(int(min(timeout, INT32_MAX)), self.max_poll_records, columnar=False)
            if not got and timeout != float("inf"):
                raise StopIteration
            self._fetcher.iterate(got)

    # -- commits ----------------------------------------------------------------------------
    def _group(self, what: str) -> ConsumerCoordinator:
        self._check_open()
        if self._coordinator is None:
            raise InvalidArgumentError(f"{what}() needs a group_id")
        return self._coordinator

    def group_metadata(self) -> GroupMetadata:
        self._check_open()
        return GroupMetadata(None, -1, "") if self._coordinator is None else self._coordinator.group_metadata()

    def commit(self, offsets: dict | None = None) -> None:
        """Commit ``offsets`` (``{tp: OffsetAndMetadata | int}``), by default the current
        positions of all assigned partitions; synchronous. Raises
        :class:`IllegalGenerationError`, :class:`RebalanceInProgressError` or
        :class:`UnknownMemberIdError` when the group moved on (nothing is written)."""
        self._group("commit").commit_sync(checked_commit_offsets(offsets))

    def commit_async(self, offsets: dict | None = None, callback=None) -> None:
        """``commit``, with the outcome given to ``callback(offsets, error)`` (error None
        when it succeeded) instead of raised, as Kafka's ``commitAsync(offsets, callback)``;
        a failure without a callback is logged. A commit is one local append here, so it is
        done, and the callback called in this thread, before this returns. Bad arguments
        raise :class:`InvalidArgumentError`."""
        coordinator = self._group("commit_async")
        check_function(callback, "callback")
        coordinator.commit_async(checked_commit_offsets(offsets), callback)

    def committed(self, tp) -> int | None:
        """The offset ``group_id`` committed for ``tp`` (read_committed view), or None."""
        om = self._group("committed").committed(as_topic_partition(tp))
        return None if om is None else om.offset

    # -- closing ----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ClientStateError("consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        """Commit positions (with ``enable_auto_commit``; assigned partitions too, and in
        the middle of a rebalance, where the group takes commits of its current generation,
        as Kafka's ``close`` does), leave the group, release files. Every step runs even
        when one fails (a full disk refusing the commit or the group file); then the first
        failure is raised. Idempotent: the consumer is closed either way."""
        if self._closed:
            return
        self._closed = True
        coordinator = self._coordinator
        steps = [] if coordinator is None else coordinator.close_steps(commit=autocommit)
        steps += [self._subscriptions.unsubscribe, self._fetcher.sync_assignment]
        steps += [lambda: close_all(self._fetcher.close_steps())]
        steps += [] if coordinator is None else [coordinator.close]
        close_all(steps + [self._watch.close])

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
