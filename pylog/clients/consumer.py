"""``Consumer``: Kafka's consumer (kafka-python's names) reading a pylog log dir, alone
(``assign``) or as a member of a consumer group (``subscribe`` with a ``group_id``).

``poll`` reads each assigned partition through a read-only :class:`~pylog.log.Log` from
the consumer's position; when nothing is there it sleeps on inotify watches of the
partition directories (pylog/clients/wakeup.py), so it returns as soon as a producer in
any process appends, and an idle consumer uses no CPU. Positions start at the group's
committed offset, else at ``auto_offset_reset`` (``earliest``, ``latest``, or ``none``:
:class:`OffsetOutOfRangeError`); a position that retention or ``delete_records`` left
behind is reset the same way, as Kafka's consumer does.

Groups (pylog/coordinator/group_membership.py) rebalance when members come, leave or die;
``poll`` takes part (it gives up partitions, calls the listener, rejoins), and a
background thread keeps the member's lease with a heartbeat every
``heartbeat_interval_ms``. Commits (pylog/coordinator/group_coordinator.py) are refused
once the generation moved on, so a member that lost its partitions cannot overwrite the
positions of their new owner. What is durable when: docs/consumers.md.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import time
from collections.abc import Mapping
from typing import NamedTuple

from pylog.arguments import (
    check_bool, check_choice, check_function, check_int, check_name, check_topic_partition,
)
from pylog.clients.settings import refuse_unknown_settings
from pylog.clients.wakeup import DirWatch
from pylog.closing import close_all
from pylog.errors import (
    ClientStateError, GroupCoordinatorError, IllegalGenerationError, InvalidArgumentError, LogDirNotFoundError,
    OffsetOutOfRangeError, RebalanceInProgressError, RecordDeserializationError, UnknownMemberIdError,
    UnknownTopicError,
)
from pylog.layout import INT32_MAX, INT64_MAX, INTERNAL_TOPICS
from pylog.log import Log
from pylog.log.offsets import latest_offset
from pylog.partition_dir import partition_dir_name, validate_topic
from pylog.record.record import Record, _short
from pylog.segment.open_files import OpenFiles


_log = logging.getLogger("pylog.consumer")


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def _tp(value) -> TopicPartition:
    """``value`` (a pair) as a TopicPartition; InvalidArgumentError when it is not one."""
    return TopicPartition(*check_topic_partition(value))


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class OffsetAndMetadata(NamedTuple):
    """A position to commit: ``leader_epoch`` is that of the last record consumed before
    it (Kafka's ``OffsetAndMetadata.leaderEpoch()``), None (or -1) when unknown."""
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class ConsumerRecord(Record):
    """A record as ``poll`` returns it: a :class:`~pylog.record.Record` read from its
    partition, with kafka-python's ``ConsumerRecord`` fields: ``topic``, ``partition``,
    ``leader_epoch`` (of its batch), ``offset``, ``timestamp``, ``timestamp_type``
    (Kafka's name: ``"CreateTime"`` or ``"LogAppendTime"``), ``key``, ``value``,
    ``headers``, ``serialized_key_size`` and ``serialized_value_size`` (bytes; -1 for
    None). The records of one leader epoch share a subclass that carries it
    (:func:`_epoch_class`), so a record read from the log becomes one by a class change,
    not a copy."""

    __slots__ = ()
    leader_epoch = -1

    @property
    def serialized_key_size(self) -> int:
        return -1 if self.key is None else len(self.key)

    @property
    def serialized_value_size(self) -> int:
        return -1 if self.value is None else len(self.value)

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition!r}, "
                f"leader_epoch={self.leader_epoch!r}, offset={self.offset!r}, timestamp={self.timestamp!r}, "
                f"timestamp_type={self.timestamp_type!r}, key={_short(self.key)}, value={_short(self.value)}, "
                f"headers={self.headers!r})")

    def __reduce__(self):
        sizes = (self.serialized_key_size, self.serialized_value_size) if isinstance(self, _DeserializedRecord) \
            else None
        return _consumer_record, (self.leader_epoch, self.value, self.key, self.timestamp, self.headers, self.offset,
                                  self.topic, self.partition, self.timestamp_type, sizes)


class _DeserializedRecord(ConsumerRecord):
    """A record whose key or value went through a deserializer: the sizes are those of its bytes."""
    __slots__ = ("leader_epoch", "serialized_key_size", "serialized_value_size")


def _consumer_record(leader_epoch, value, key, timestamp, headers, offset, topic, partition, timestamp_type,
                     sizes) -> ConsumerRecord:
    """A pickled :class:`ConsumerRecord` back."""
    record = (_epoch_class(leader_epoch) if sizes is None else _DeserializedRecord)(value, key, timestamp,
                                                                                     headers, offset)
    record.topic, record.partition, record.timestamp_type = topic, partition, timestamp_type
    if sizes is not None:
        record.leader_epoch, (record.serialized_key_size, record.serialized_value_size) = leader_epoch, sizes
    return record


_EPOCH_CLASSES: dict[int, type] = {}


def _epoch_class(leader_epoch: int) -> type:
    """The :class:`ConsumerRecord` subclass of the records of ``leader_epoch`` (one per
    epoch seen by the process: a few)."""
    cls = _EPOCH_CLASSES.get(leader_epoch)
    if cls is None:
        cls = _EPOCH_CLASSES[leader_epoch] = type("ConsumerRecord", (ConsumerRecord,),
                                                  {"__slots__": (), "leader_epoch": leader_epoch,
                                                   "__module__": __name__})
    return cls


def _as_consumer_records(records: list, batches: list) -> list:
    """``records`` (read in offset order from ``batches``) made :class:`ConsumerRecord`
    of their batch's leader epoch, in place. O(records + batches), a class change each."""
    epochs = {b.partition_leader_epoch for b in batches if not b.is_control}
    if len(epochs) == 1:
        cls = _epoch_class(epochs.pop())
        for r in records:
            r.__class__ = cls
        return records
    ends = [(b.last_offset, b.partition_leader_epoch) for b in batches if not b.is_control]
    i = 0
    for r in records:
        while ends[i][0] < r.offset:
            i += 1
        r.__class__ = _epoch_class(ends[i][1])
    return records


class GroupMetadata(NamedTuple):
    """What ``send_offsets_to_transaction`` needs to fence zombies of a group."""
    group_id: str
    generation_id: int
    member_id: str


class ConsumerRebalanceListener:
    """Override to act when partitions come and go (called from inside ``poll``)."""

    def on_partitions_revoked(self, revoked: set) -> None:
        pass

    def on_partitions_assigned(self, assigned: set) -> None:
        pass


_ISOLATION = {"read_uncommitted": "uncommitted", "read_committed": "committed"}
_RESETS = ("earliest", "latest", "none")
#: How often a read_committed consumer waiting at an open transaction looks for expired ones.
TXN_CHECK_INTERVAL_MS = 1000


def _check_settings(*, group_id, auto_offset_reset, enable_auto_commit, auto_commit_interval_ms, isolation_level,
                    session_timeout_ms, heartbeat_interval_ms, max_poll_interval_ms, max_poll_records,
                    fetch_max_bytes, partition_assignment_strategy, client_id, consumer_timeout_ms,
                    exclude_internal_topics, key_deserializer, value_deserializer) -> None:
    """The ``Consumer``'s settings, checked when it is made, before it reads or writes a
    file: :class:`InvalidArgumentError` naming the first out of range (Kafka's rules:
    the heartbeat interval below the session timeout). O(1)."""
    from pylog.clients.assignors import ASSIGNORS
    if group_id is not None:
        check_name(group_id, "group_id")
    check_choice(auto_offset_reset, "auto_offset_reset", _RESETS)
    check_choice(isolation_level, "isolation_level", tuple(_ISOLATION))
    check_bool(enable_auto_commit, "enable_auto_commit")
    check_bool(exclude_internal_topics, "exclude_internal_topics")
    check_int(auto_commit_interval_ms, "auto_commit_interval_ms", (0, INT32_MAX))
    check_int(session_timeout_ms, "session_timeout_ms", (1, INT32_MAX))
    check_int(heartbeat_interval_ms, "heartbeat_interval_ms", (1, session_timeout_ms - 1))
    check_int(max_poll_interval_ms, "max_poll_interval_ms", (1, INT32_MAX))
    check_int(max_poll_records, "max_poll_records", (1, INT32_MAX))
    check_int(fetch_max_bytes, "fetch_max_bytes", (0, INT32_MAX))
    check_name(client_id, "client_id")
    if isinstance(consumer_timeout_ms, bool) or not isinstance(consumer_timeout_ms, (int, float)) \
            or not consumer_timeout_ms >= 0:
        raise InvalidArgumentError(f"consumer_timeout_ms must be a number >= 0 (inf: never), not "
                                   f"{consumer_timeout_ms!r}")
    check_function(key_deserializer, "key_deserializer")
    check_function(value_deserializer, "value_deserializer")
    names = partition_assignment_strategy
    if not isinstance(names, (list, tuple)) or not names or any(not isinstance(a, str) or a not in ASSIGNORS
                                                                 for a in names):
        raise InvalidArgumentError(f"partition_assignment_strategy must name assignors among {sorted(ASSIGNORS)}, "
                                   f"not {names!r}")


def _checked_subscription(topics, pattern, listener) -> tuple[set, re.Pattern | None]:
    """``subscribe``'s arguments as (topic names, compiled pattern), or
    :class:`InvalidArgumentError` (:class:`InvalidTopicError` for a name Kafka refuses)
    before the consumer joins anything."""
    if isinstance(topics, str):
        topics = [topics]
    if not isinstance(topics, (list, tuple, set, frozenset)):
        raise InvalidArgumentError(f"topics must be a list of topic names, not {topics!r}")
    topics = {validate_topic(t) for t in topics}
    compiled = None
    if pattern is not None:
        if topics:
            raise InvalidArgumentError("subscribe() takes topics or a pattern, not both")
        if not isinstance(pattern, str):
            raise InvalidArgumentError(f"pattern must be a str (a regular expression), not {pattern!r}")
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise InvalidArgumentError(f"pattern {pattern!r} is not a regular expression: {e}") from None
    if listener is not None and not all(callable(getattr(listener, m, None))
                                        for m in ("on_partitions_revoked", "on_partitions_assigned")):
        raise InvalidArgumentError(f"listener must have on_partitions_revoked and on_partitions_assigned "
                                   f"(a ConsumerRebalanceListener), not {listener!r}")
    return topics, compiled


def _partition_list(partitions) -> list[TopicPartition]:
    """``partitions`` (an iterable of (topic, partition) pairs) as TopicPartitions, or
    :class:`InvalidArgumentError`."""
    if isinstance(partitions, (str, bytes)) or not hasattr(partitions, "__iter__"):
        raise InvalidArgumentError(f"partitions must be a list of TopicPartition, not {partitions!r}")
    return [_tp(tp) for tp in partitions]


def _given_offsets(offsets) -> dict | None:
    """A commit's ``offsets`` keyed by :class:`TopicPartition` (None: the positions),
    checked whole before the commit touches a file."""
    if offsets is None:
        return None
    from pylog.coordinator.group_coordinator import checked_offsets
    checked_offsets(offsets)
    return {_tp(tp): om for tp, om in offsets.items()}


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
        _check_settings(group_id=group_id, auto_offset_reset=auto_offset_reset, enable_auto_commit=enable_auto_commit,
                        auto_commit_interval_ms=auto_commit_interval_ms, isolation_level=isolation_level,
                        session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                        max_poll_interval_ms=max_poll_interval_ms, max_poll_records=max_poll_records,
                        fetch_max_bytes=fetch_max_bytes, partition_assignment_strategy=partition_assignment_strategy,
                        client_id=client_id, consumer_timeout_ms=consumer_timeout_ms,
                        exclude_internal_topics=exclude_internal_topics, key_deserializer=key_deserializer,
                        value_deserializer=value_deserializer)
        if not os.path.isdir(root):
            raise LogDirNotFoundError(f"log dir {root} does not exist or is not a directory")
        self.root = os.path.abspath(root)
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.isolation = _ISOLATION[isolation_level]
        self.session_timeout_ms, self.heartbeat_interval_ms = session_timeout_ms, heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.max_poll_records, self.fetch_max_bytes = max_poll_records, fetch_max_bytes
        self.assignors = tuple(partition_assignment_strategy)
        self.client_id = client_id
        self.consumer_timeout_ms = consumer_timeout_ms
        self.exclude_internal_topics = exclude_internal_topics
        self.key_deserializer, self.value_deserializer = key_deserializer, value_deserializer
        self._deserialization_error: RecordDeserializationError | None = None  # raised by the next poll
        self._open_files = OpenFiles(max_open_files)  # shared by the segments of every partition read
        self._logs: dict[TopicPartition, Log] = {}
        self._queried: dict[TopicPartition, Log] = {}
        self._positions: dict[TopicPartition, int | None] = {}
        self._position_epochs: dict[TopicPartition, int] = {}  # leader epoch of the record before a position
        self._buffered: dict[TopicPartition, list] = {}
        self._paused: set[TopicPartition] = set()
        self._deleted: set[TopicPartition] = set()  # assigned, their topic deleted: not fetched
        self._watch = DirWatch()
        self._watch.add(self.root)
        self._next_auto_commit = time.monotonic() + auto_commit_interval_ms / 1000
        self._coordinator = None
        self._member = None
        self._subscription: set[str] = set()
        self._pattern = None
        self._listener = None
        self._manual = False
        self._closed = False
        self._rotation = 0
        self._txn_coordinator = None
        self._next_txn_check = 0.0
        self._iter_pending: collections.deque = collections.deque()  # (tp, record) polled, not yet iterated

    # -- assignment -------------------------------------------------------------------------
    def assign(self, partitions) -> None:
        """Read exactly ``partitions`` (no group management)."""
        if self._member is not None or self._subscription or self._pattern:
            raise ClientStateError("assign() after subscribe(): call unsubscribe() first")
        self._check_open()
        partitions = set(_partition_list(partitions))
        self._manual = True
        self._set_assignment(partitions)

    def subscribe(self, topics=(), pattern: str | None = None, listener: ConsumerRebalanceListener | None = None):
        """Subscribe to ``topics`` or the topics matching ``pattern`` (a regex), as a
        member of ``group_id``; partitions are assigned in ``poll``. A pattern leaves out
        Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``) unless the
        consumer was made with ``exclude_internal_topics=False``; named topics are taken as named."""
        self._check_open()
        if self._manual:
            raise ClientStateError("subscribe() after assign(): call unsubscribe() first")
        if self.group_id is None:
            raise InvalidArgumentError("subscribe() needs a group_id; use assign() without one")
        topics, compiled = _checked_subscription(topics, pattern, listener)
        self._subscription = topics
        self._pattern = compiled
        self._listener = listener or ConsumerRebalanceListener()
        if self._member is None:
            from pylog.clients.group_member import GroupMember
            self._member = GroupMember(self)
        self._member.request_rejoin()

    def unsubscribe(self) -> None:
        self._check_open()
        if self._member is not None:
            self._member.leave()
            self._member = None
        self._subscription, self._pattern, self._manual = set(), None, False
        self._set_assignment(set())

    def subscription(self) -> set[str]:
        self._check_open()
        return set(self._subscribed_topics())

    def _subscribed_topics(self) -> list[str]:
        if self._pattern is None:
            return sorted(self._subscription)
        from pylog.manager import LogManager
        return [t for t in LogManager(self.root, read_only=True).topics() if self._pattern.fullmatch(t)
                and not (self.exclude_internal_topics and t in INTERNAL_TOPICS)]

    def assignment(self) -> set[TopicPartition]:
        self._check_open()
        return set(self._positions)

    def topics(self) -> set[str]:
        """The topics of the log dir, Kafka's internal ones left out unless
        ``exclude_internal_topics=False`` (kafka-python's ``topics()``, Java's
        ``listTopics()``). O(directory entries)."""
        self._check_open()
        from pylog.manager import LogManager
        return {t for t in LogManager(self.root, read_only=True).topics()
                if not (self.exclude_internal_topics and t in INTERNAL_TOPICS)}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition numbers of ``topic``; None when the log dir has no such topic
        (kafka-python's ``partitions_for_topic``). O(directory entries)."""
        self._check_open()
        from pylog.manager import LogManager
        try:
            return set(LogManager(self.root, read_only=True).partitions(topic))
        except UnknownTopicError:
            return None

    def _set_assignment(self, partitions: set) -> None:
        for tp in list(self._positions):
            if tp not in partitions:
                self._positions.pop(tp)
                self._position_epochs.pop(tp, None)
                self._forget_fetched(tp)
                self._paused.discard(tp)
                self._deleted.discard(tp)
                self._drop_log(tp)
        for tp in sorted(partitions):
            if tp not in self._positions:
                try:
                    self._log(tp)
                except UnknownTopicError:
                    if self._manual:
                        raise
                    self._partition_deleted(tp)  # deleted since the group assigned it
                self._positions[tp] = None

    def _drop_log(self, tp: TopicPartition) -> None:
        log = self._logs.pop(tp, None)
        if log is not None:
            self._watch.remove(log.path)
            log.close()

    def _partition_deleted(self, tp: TopicPartition) -> None:
        """``tp``'s directory is gone: its topic was deleted. As Kafka's consumer, stop
        fetching it and warn (once); a group member rejoins, so the group revokes it. With
        ``assign()`` it stays assigned, and is read again, from where
        ``auto_offset_reset`` says, once a topic of that name has it again."""
        if tp not in self._deleted:
            _log.warning("partition %s-%d was deleted from %s (its topic is gone): not fetched", tp.topic,
                         tp.partition, self.root)
            self._deleted.add(tp)
        self._forget_fetched(tp)
        self._drop_log(tp)
        if self._member is not None:
            self._member.request_rejoin()

    def _recreated(self) -> None:
        """Assigned partitions of a deleted topic that a new topic of the name has again
        take a new position (one stat each)."""
        for tp in [tp for tp in self._deleted if os.path.isdir(self._partition_path(tp))]:
            self._deleted.discard(tp)
            self._positions[tp] = None

    @contextlib.contextmanager
    def _deleted_as_unknown(self, log: Log):
        """Around a read of ``log``: its directory vanishing under it (the topic was
        deleted) is :class:`UnknownTopicError`, not the file system's error."""
        try:
            yield
        except OSError:
            if os.path.isdir(log.path):
                raise
            raise UnknownTopicError(f"partition {log.topic}-{log.partition} was deleted from {self.root} "
                                    f"(its topic is gone)") from None

    def _refreshed(self, log: Log) -> Log:
        """``log`` caught up with its directory; :class:`UnknownTopicError` once deleted."""
        with self._deleted_as_unknown(log):
            log.refresh()
        return log

    def _log(self, tp: TopicPartition) -> Log:
        """The log of the assigned partition ``tp``, opened and watched on first use."""
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = self._open_log(tp)
            self._watch.add(log.path)
        return log

    def _open_log(self, tp: TopicPartition) -> Log:
        """``tp``'s partition read-only, its segments' descriptors within the consumer's
        ``max_open_files``; :class:`UnknownTopicError` when it does not exist."""
        path = self._partition_path(tp)
        if not os.path.isdir(path):
            raise UnknownTopicError(f"no partition {tp.topic}-{tp.partition} in {self.root}")
        return Log.open(path, read_only=True, open_files=self._open_files)

    def _partition_path(self, tp: TopicPartition) -> str:
        return os.path.join(self.root, partition_dir_name(tp.topic, tp.partition))

    # -- positions --------------------------------------------------------------------------
    def _check_assigned(self, tp) -> TopicPartition:
        self._check_open()
        tp = _tp(tp)
        if tp not in self._positions:
            raise InvalidArgumentError(f"partition {tp.topic}-{tp.partition} is not assigned to this consumer")
        return tp

    def position(self, tp) -> int:
        """The offset of the next record ``poll`` returns for ``tp``."""
        tp = self._check_assigned(tp)
        if self._positions[tp] is None:
            self._positions[tp] = self._initial_position(tp)
        return self._positions[tp]

    def seek(self, tp, offset: int) -> None:
        tp = self._check_assigned(tp)
        if not isinstance(offset, int) or offset < 0:
            raise InvalidArgumentError(f"offset must be an int >= 0, not {offset!r}")
        self._positions[tp] = offset
        self._position_epochs.pop(tp, None)
        self._forget_fetched(tp)
        error = self._deserialization_error
        if error is not None and (error.topic, error.partition) == tuple(tp):
            self._deserialization_error = None  # moved: the record that failed is read again, or passed

    def seek_to_beginning(self, *partitions) -> None:
        for tp in partitions or list(self._positions):
            log = self._refreshed(self._log(self._check_assigned(tp)))
            self.seek(tp, log.log_start_offset)

    def seek_to_end(self, *partitions) -> None:
        for tp in partitions or list(self._positions):
            self.seek(tp, self._end_offset(self._log(self._check_assigned(tp))))

    def highwater(self, tp) -> int:
        """The high watermark of the assigned partition ``tp`` (kafka-python's
        ``highwater``): the end of what a ``read_uncommitted`` fetch may return, read from
        the partition now rather than from the last fetch. O(1) besides a refresh."""
        return self._refreshed(self._log(self._check_assigned(tp))).high_watermark

    def _end_offset(self, log: Log) -> int:
        return latest_offset(self._refreshed(log), self.isolation)

    def beginning_offsets(self, partitions) -> dict:
        return {tp: self._open_any(tp).log_start_offset for tp in _partition_list(partitions)}

    def end_offsets(self, partitions) -> dict:
        return {tp: self._end_offset(self._open_any(tp)) for tp in _partition_list(partitions)}

    def _open_any(self, tp) -> Log:
        """The log of any partition, assigned or not (kept open until ``close``), refreshed."""
        self._check_open()
        tp = _tp(tp)
        log = self._logs.get(tp) or self._queried.get(tp)
        if log is None:
            log = self._queried[tp] = self._open_log(tp)
        try:
            return self._refreshed(log)
        except UnknownTopicError:
            if self._queried.get(tp) is log:
                self._queried.pop(tp).close()  # a topic made again under the name is opened anew
            raise

    def offsets_for_times(self, timestamps: dict) -> dict:
        """``{tp: OffsetAndTimestamp | None}``: the earliest offset whose timestamp is >=
        the given one (Kafka's offsetsForTimes). O(segments + index interval) each."""
        if not isinstance(timestamps, Mapping):
            raise InvalidArgumentError(f"offsets_for_times() takes a dict {{TopicPartition: timestamp in ms}}, "
                                       f"not {timestamps!r}")
        for tp, ts in timestamps.items():
            check_int(ts, f"the timestamp to look up for {_tp(tp)}", (0, INT64_MAX))
        out = {}
        for tp, ts in timestamps.items():
            log = self._open_any(tp)
            with self._deleted_as_unknown(log):
                offset = log.offset_for_timestamp(ts)
                rec = None if offset is None else next(iter(log.read(offset, 1 << 16).records()), None)
            if offset is None:
                out[_tp(tp)] = None
                continue
            out[_tp(tp)] = OffsetAndTimestamp(offset, rec.timestamp if rec else ts)
        return out

    def pause(self, *partitions) -> None:
        """Fetch nothing more from ``partitions`` until ``resume``; iteration stops yielding
        their records already fetched (they come again after ``resume``)."""
        for tp in partitions:
            tp = self._check_assigned(tp)
            self._paused.add(tp)
            self._forget_fetched(tp)

    def resume(self, *partitions) -> None:
        self._check_open()
        self._paused.difference_update(_tp(tp) for tp in partitions)

    def paused(self) -> set:
        self._check_open()
        return set(self._paused)

    def _initial_position(self, tp: TopicPartition, committed: dict | None = None) -> int:
        """The group's committed offset for ``tp`` (from ``committed``, the group's
        commits, when at hand), else where ``auto_offset_reset`` says."""
        if self.group_id is not None:
            if committed is None:
                committed = self._group_coordinator().committed(self.group_id)
            if tuple(tp) in committed:
                om = committed[tuple(tp)]
                self._position_epochs[tp] = -1 if om.leader_epoch is None else om.leader_epoch
                return om.offset
        return self._reset_position(tp, None)

    def _update_fetch_positions(self) -> None:
        """Kafka's updateFetchPositions, before each fetch: every assigned partition
        without a position takes one, so the next commit covers all of them, not only those
        a poll reached before it had ``max_records``. One lookup of the group's commits."""
        missing = [tp for tp, position in self._positions.items() if position is None]
        if missing:
            committed = self._group_coordinator().committed(self.group_id) if self.group_id is not None else {}
            for tp in missing:
                try:
                    self._positions[tp] = self._initial_position(tp, committed)
                except UnknownTopicError:
                    self._partition_deleted(tp)

    def _reset_position(self, tp: TopicPartition, out_of_range: int | None) -> int:
        self._position_epochs.pop(tp, None)
        log = self._refreshed(self._log(tp))
        if self.auto_offset_reset == "none":
            what = "has no committed offset" if out_of_range is None else f"position {out_of_range} is out of range"
            raise OffsetOutOfRangeError(f"{tp.topic}-{tp.partition} {what} "
                                        f"[{log.log_start_offset}, {log.log_end_offset}] and auto_offset_reset "
                                        f"is 'none'")
        if self.auto_offset_reset == "earliest":
            return log.log_start_offset
        return self._end_offset(log)

    # -- polling ----------------------------------------------------------------------------
    def poll(self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True) -> dict:
        """``{TopicPartition: [ConsumerRecord, ...]}``: up to ``max_records`` records
        (``max_poll_records`` by default), returned as soon as there are any, or an empty
        dict after ``timeout_ms``. Takes part in rebalances and auto-commits. Cost: one
        read per partition with data; while waiting, none (inotify)."""
        self._stop_iteration()
        return self._poll(timeout_ms, self.max_poll_records if max_records is None else max_records, columnar=False)

    def poll_columns(self, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        """Like :meth:`poll`, as :class:`~pylog.record.columnar.Columns` per partition
        (numpy arrays: offsets, timestamps, keys and values), without a Python object per
        record. ``read_uncommitted`` only."""
        if self.isolation != "uncommitted":
            raise InvalidArgumentError("poll_columns reads with isolation_level='read_uncommitted' only")
        self._stop_iteration()
        return self._poll(timeout_ms, self.max_poll_records if max_records is None else max_records, columnar=True)

    def _poll(self, timeout_ms: int, max_records: int, *, columnar: bool) -> dict:
        self._check_open()
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) or not timeout_ms >= 0:
            raise InvalidArgumentError(f"timeout_ms must be a number >= 0, not {timeout_ms!r}")
        check_int(max_records, "max_records", (1, INT32_MAX))
        if self._member is None and not self._manual:
            raise ClientStateError("poll() before subscribe() or assign(): the consumer reads no partition")
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            self._watch.drain()
            if self._deleted and self._manual:
                self._recreated()
            if self._member is not None:
                self._member.poll()
            self._update_fetch_positions()
            self._maybe_auto_commit()
            out = self._fetch_columns(max_records) if columnar else self._fetch(max_records)
            if out:
                return out
            wait = deadline - time.monotonic()
            if wait <= 0:
                return {}
            if self.isolation == "committed":
                wait = min(wait, self._abort_expired_transactions())
            if self._member is not None:
                wait = min(wait, self._member.next_check_s())
            if self.enable_auto_commit:
                wait = min(wait, max(0.0, self._next_auto_commit - time.monotonic()))
            self._watch.wait(max(wait, 0.0005))

    def _abort_expired_transactions(self) -> float:
        """When a partition waits at an open transaction, abort the transactions past
        their timeout (the broker's periodic task; a dead producer's transaction must not
        hold readers back forever), at most every ``TXN_CHECK_INTERVAL_MS``. Returns the
        seconds until the next look."""
        now = time.monotonic()
        if now < self._next_txn_check:
            return self._next_txn_check - now
        self._next_txn_check = now + TXN_CHECK_INTERVAL_MS / 1000
        if any(log.last_stable_offset < log.log_end_offset for log in self._logs.values()):
            from pylog.clients.writers import WriterPool
            from pylog.coordinator.txn_coordinator import TransactionCoordinator
            if self._txn_coordinator is None:
                self._txn_coordinator = TransactionCoordinator(self.root, WriterPool.for_root(self.root))
            self._txn_coordinator.abort_expired()
        return TXN_CHECK_INTERVAL_MS / 1000

    def _fetchable(self) -> list:
        tps = [tp for tp in self._positions if tp not in self._paused and tp not in self._deleted]
        if tps:
            self._rotation = (self._rotation + 1) % len(tps)
            tps = tps[self._rotation:] + tps[:self._rotation]
        return tps

    def _read(self, tp: TopicPartition):
        """The FetchData at ``tp``'s position, resetting a position out of range."""
        log = self._log(tp)
        position = self.position(tp)
        with self._deleted_as_unknown(log):
            try:
                return log.read(position, self.fetch_max_bytes, isolation=self.isolation)
            except OffsetOutOfRangeError:
                log.refresh()
                if log.log_start_offset <= position <= log.log_end_offset:
                    raise
                self._positions[tp] = position = self._reset_position(tp, position)
                return log.read(position, self.fetch_max_bytes, isolation=self.isolation)

    def _fetch(self, max_records: int) -> dict:
        if self._deserialization_error is not None:
            error, self._deserialization_error = self._deserialization_error, None
            raise error
        out = {}
        left = max_records
        for tp in self._fetchable():
            records = self._buffered.pop(tp, None)
            if records is None:
                try:
                    fetch = self._read(tp)
                except UnknownTopicError:
                    self._partition_deleted(tp)
                    continue
                if not fetch.size_bytes:
                    continue
                position = self._positions[tp]
                records = _as_consumer_records(fetch.records(), fetch.batches())
                if records and records[0].offset < position:  # the batch began before the position
                    records = [r for r in records if r.offset >= position]
                if not records:
                    self._positions[tp] = max(position, fetch.next_offset)
                    continue
            if len(records) > left:
                self._buffered[tp] = records[left:]
                records = records[:left]
            if self.key_deserializer is not None or self.value_deserializer is not None:
                records = self._deserialized(tp, records)
            if records:
                out[tp] = records
                self._positions[tp] = records[-1].offset + 1
                self._position_epochs[tp] = records[-1].leader_epoch
                left -= len(records)
            if left <= 0 or self._deserialization_error is not None:
                break
        if not out and self._deserialization_error is not None:
            error, self._deserialization_error = self._deserialization_error, None
            raise error
        return out

    def _deserialized(self, tp: TopicPartition, records: list) -> list:
        """``records`` with keys and values through the deserializers (None stays None),
        up to the first that fails: its position is set there, what follows dropped (read
        again later), and the error kept for this or the next poll to raise."""
        out = []
        for record in records:
            try:
                key, value = record.key, record.value
                if key is not None and self.key_deserializer is not None:
                    key = self.key_deserializer(key)
                if value is not None and self.value_deserializer is not None:
                    value = self.value_deserializer(value)
            except Exception as e:
                self._buffered.pop(tp, None)
                self._positions[tp] = record.offset
                self._deserialization_error = RecordDeserializationError(
                    f"deserializing the record at {tp.topic}-{tp.partition} offset {record.offset} failed: "
                    f"{type(e).__name__}: {e}; seek past it to go on", topic=tp.topic, partition=tp.partition,
                    offset=record.offset)
                self._deserialization_error.__cause__ = e
                return out
            # a new record: the decoded one is not tracked by the cycle collector (Record's doc),
            # and what a deserializer returns may hold anything
            copy = _DeserializedRecord(value, key, record.timestamp, record.headers, record.offset)
            copy.topic, copy.partition, copy.timestamp_type = tp.topic, tp.partition, record.timestamp_type
            copy.leader_epoch = record.leader_epoch
            copy.serialized_key_size, copy.serialized_value_size = record.serialized_key_size, \
                record.serialized_value_size
            out.append(copy)
        return out

    def _fetch_columns(self, max_records: int) -> dict:
        """Up to ``max_records`` rows in all, decoded from the positions (records a
        ``poll`` fetched and did not return are read again, as columns)."""
        from pylog.record.columnar import decode_columns
        out = {}
        left = max_records
        for tp in self._fetchable():
            self._buffered.pop(tp, None)
            try:
                fetch = self._read(tp)
            except UnknownTopicError:
                self._partition_deleted(tp)
                continue
            if not fetch.size_bytes:
                continue
            position = self._positions[tp]
            cols = decode_columns(fetch.raw(), min_offset=position, max_offset=position + left)
            if cols.num_rows:
                out[tp] = cols
                self._positions[tp] = last = int(cols.offsets[-1]) + 1
                self._position_epochs[tp] = next(b.partition_leader_epoch for b in fetch.batches()
                                                 if b.last_offset >= last - 1 and not b.is_control)
                left -= cols.num_rows
                if left <= 0:
                    break
            else:  # nothing in [position, position + left): the next rows lie further on
                self._positions[tp] = max(position, min(fetch.next_offset, position + left))
        return out

    def __iter__(self):
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record; StopIteration after ``consumer_timeout_ms`` without one. The
        position moves past each record as it is yielded (a commit or ``close`` while
        iterating covers what the loop was given, no more), as kafka-python's iterator does."""
        while True:
            if self._iter_pending:
                tp, record = self._iter_pending.popleft()
                self._positions[tp] = record.offset + 1
                self._position_epochs[tp] = record.leader_epoch
                return record
            timeout = self.consumer_timeout_ms
            got = self._poll(int(min(timeout, INT32_MAX)), self.max_poll_records, columnar=False)
            if not got:
                if timeout != float("inf"):
                    raise StopIteration
                continue
            for tp, records in got.items():
                self._positions[tp] = records[0].offset  # taken back: set again as each is yielded
                self._iter_pending.extend((tp, r) for r in records)

    def _stop_iteration(self) -> None:
        """A direct poll ends the iteration: records fetched for it and not yielded are
        read again from the positions."""
        if self._iter_pending:
            for tp in {tp for tp, _ in self._iter_pending}:
                self._buffered.pop(tp, None)
            self._iter_pending.clear()

    def _forget_fetched(self, tp: TopicPartition) -> None:
        """Drop what was fetched for ``tp`` and not returned (its position moved, or it
        left the assignment or was paused)."""
        self._buffered.pop(tp, None)
        if self._iter_pending:
            self._iter_pending = collections.deque(item for item in self._iter_pending if item[0] != tp)

    # -- commits ----------------------------------------------------------------------------
    def _group_coordinator(self):
        if self._coordinator is None:
            from pylog.coordinator.group_coordinator import GroupCoordinator
            self._coordinator = GroupCoordinator.for_root(self.root)
        return self._coordinator

    def group_metadata(self) -> GroupMetadata:
        self._check_open()
        return self._group_metadata()

    def _group_metadata(self) -> GroupMetadata:
        member = self._member
        if member is None:
            return GroupMetadata(self.group_id, -1, "")
        return GroupMetadata(self.group_id, member.generation, member.member_id or "")

    def commit(self, offsets: dict | None = None) -> None:
        """Commit ``offsets`` (``{tp: OffsetAndMetadata | int}``), by default the current
        positions of all assigned partitions; synchronous. Raises
        :class:`IllegalGenerationError`, :class:`RebalanceInProgressError` or
        :class:`UnknownMemberIdError` when the group moved on (nothing is written)."""
        self._check_open()
        if self.group_id is None:
            raise InvalidArgumentError("commit() needs a group_id")
        self._commit(_given_offsets(offsets))

    def commit_async(self, offsets: dict | None = None, callback=None) -> None:
        """``commit``, with the outcome given to ``callback(offsets, error)`` (error None
        when it succeeded) instead of raised, as Kafka's ``commitAsync(offsets, callback)``;
        a failure without a callback is logged. A commit is one local append here, so it is
        done, and the callback called in this thread, before this returns. Bad arguments
        raise :class:`InvalidArgumentError`."""
        self._check_open()
        if self.group_id is None:
            raise InvalidArgumentError("commit_async() needs a group_id")
        check_function(callback, "callback")
        given = _given_offsets(offsets)
        offsets = self._commit_offsets(given)
        try:
            self._commit(offsets, positions=given is None)
        except GroupCoordinatorError as e:
            if callback is None:
                _log.warning("asynchronous commit of group %r failed: %s", self.group_id, e)
                return
            callback(offsets, e)
        else:
            if callback is not None:
                callback(offsets, None)

    def _commit_offsets(self, offsets: dict | None) -> dict:
        """``offsets``, or the current positions of the assigned partitions."""
        if offsets is None:
            return {tp: pos for tp, pos in self._positions.items() if pos is not None}
        return offsets

    def _commit(self, offsets: dict | None = None, *, positions: bool | None = None) -> None:
        """Commit ``offsets``, by default the positions. Positions (``positions``: the
        offsets are they) carry the leader epoch of the last record consumed, as Kafka's
        consumer commits them; given offsets their own, if any."""
        positions = offsets is None if positions is None else positions
        offsets = self._commit_offsets(offsets)
        if not offsets:
            return
        if positions:
            epochs = self._position_epochs
            offsets = {tp: OffsetAndMetadata(offset, "", epochs[tp] if epochs.get(tp, -1) >= 0 else None)
                       for tp, offset in offsets.items()}
        meta = self._group_metadata()
        self._group_coordinator().commit_offsets(self.group_id, offsets, generation=meta.generation_id,
                                                 member_id=meta.member_id)

    def committed(self, tp) -> int | None:
        """The offset ``group_id`` committed for ``tp`` (read_committed view), or None."""
        self._check_open()
        if self.group_id is None:
            raise InvalidArgumentError("committed() needs a group_id")
        tp = _tp(tp)
        om = self._group_coordinator().committed(self.group_id).get(tp)
        return None if om is None else om.offset

    def _maybe_auto_commit(self, *, force: bool = False) -> None:
        if not self.enable_auto_commit:
            return
        if not force and time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        try:
            self._commit()
        except (IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError):
            pass  # the group moved on: the next owner starts from the last accepted commit

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
        self._iter_pending.clear()
        steps = [self._final_commit] if autocommit else []
        steps += [self._leave_group, lambda: self._set_assignment(set())]
        steps += [log.close for log in self._queried.values()]
        steps += [self._release_coordinators, self._watch.close]
        close_all(steps)

    def _leave_group(self) -> None:
        member, self._member = self._member, None
        if member is not None:
            member.leave()

    def _release_coordinators(self) -> None:
        coordinator, self._coordinator = self._coordinator, None
        txn_coordinator, self._txn_coordinator = self._txn_coordinator, None
        steps = [] if coordinator is None else [coordinator.release]
        if txn_coordinator is not None:
            steps += [txn_coordinator.close, txn_coordinator.pool.release]
        close_all(steps)

    def _final_commit(self) -> None:
        try:
            self._maybe_auto_commit(force=True)
        except GroupCoordinatorError:
            pass  # the group moved on: the next owner starts from the last accepted commit

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

