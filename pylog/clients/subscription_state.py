"""``SubscriptionState``: what a :class:`~pylog.clients.consumer.Consumer` reads, as
Kafka's ``SubscriptionState``: the subscription (topics, a pattern, or partitions the user
assigned: one kind at a time), the assignment, and per assigned partition its position
(the offset of the next record ``poll`` returns), the leader epoch of the record before it,
and whether it is paused or its topic was deleted.

The consumer builds it and hands the same object to its
:class:`~pylog.clients.fetcher.Fetcher` and its
:class:`~pylog.clients.consumer_coordinator.ConsumerCoordinator`; none of them sees the
consumer. Pure bookkeeping in memory: no file, no lock (the consumer is used from one
thread). Every method is O(1) per partition it names.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from pylog.errors import ClientStateError, InvalidArgumentError
from pylog.layout import INTERNAL_TOPICS
from pylog.partition_dir import validate_topic


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRebalanceListener:
    """Override to act when partitions come and go (called from inside ``poll``)."""

    def on_partitions_revoked(self, revoked: set) -> None:
        pass

    def on_partitions_assigned(self, assigned: set) -> None:
        pass


class SubscriptionType(enum.Enum):
    """How the assignment is decided, as Kafka's: one kind at a time."""
    NONE = "none"
    AUTO_TOPICS = "topics"  # subscribe(topics): the group assigns
    AUTO_PATTERN = "pattern"  # subscribe(pattern=...): the group assigns
    USER_ASSIGNED = "assigned"  # assign(partitions)


class PartitionState:
    """An assigned partition: ``position`` (None until looked up: the committed offset
    or ``auto_offset_reset``), ``epoch`` (the leader epoch of the record before the
    position, -1 when unknown), ``paused``, ``deleted`` (its topic is gone)."""
    __slots__ = ("position", "epoch", "paused", "deleted")

    def __init__(self):
        self.position: int | None = None
        self.epoch = -1
        self.paused = False
        self.deleted = False

    def fetchable(self) -> bool:
        return not self.paused and not self.deleted


def checked_subscription(topics, pattern, listener) -> tuple[set, re.Pattern | None]:
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


class SubscriptionState:
    """The subscription and the assigned partitions' states (see the module's doc)."""

    def __init__(self, *, exclude_internal_topics: bool = True):
        self.exclude_internal_topics = exclude_internal_topics
        self.type = SubscriptionType.NONE
        self.topics: set[str] = set()
        self.pattern: re.Pattern | None = None
        self.listener = ConsumerRebalanceListener()
        self.rejoin_needed = False  # a partition of the group's assignment vanished: ask for a new one
        self._states: dict[TopicPartition, PartitionState] = {}
        self._rotation = 0

    # -- the subscription -------------------------------------------------------------------
    def check_type(self, kind: SubscriptionType) -> None:
        """Kafka's rule: subscribed topics or a pattern, and assigned partitions, are
        mutually exclusive (a subscription may replace a subscription):
        :class:`ClientStateError` when ``kind`` would mix them."""
        if kind is SubscriptionType.USER_ASSIGNED and self.partitions_auto_assigned:
            raise ClientStateError("assign() after subscribe(): call unsubscribe() first")
        if kind is not SubscriptionType.USER_ASSIGNED and self.user_assigned:
            raise ClientStateError("subscribe() after assign(): call unsubscribe() first")

    def _set_type(self, kind: SubscriptionType) -> None:
        self.check_type(kind)
        self.type = kind

    def subscribe(self, topics=(), pattern: str | None = None, listener=None) -> None:
        """Subscribe to ``topics`` (names), or to the topics ``pattern`` (a regular
        expression) matches; replaces an earlier subscription. The group assigns the
        partitions. :class:`InvalidArgumentError` for bad arguments
        (:func:`checked_subscription`), before anything changes."""
        self.check_type(SubscriptionType.AUTO_TOPICS)
        topics, pattern = checked_subscription(topics, pattern, listener)
        self._set_type(SubscriptionType.AUTO_PATTERN if pattern is not None else SubscriptionType.AUTO_TOPICS)
        self.topics, self.pattern = topics, pattern
        self.listener = listener or ConsumerRebalanceListener()

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly ``partitions``; the ones kept keep their state."""
        self._set_type(SubscriptionType.USER_ASSIGNED)
        self.set_assignment(partitions)

    def unsubscribe(self) -> None:
        self.type, self.topics, self.pattern = SubscriptionType.NONE, set(), None
        self.listener = ConsumerRebalanceListener()
        self.set_assignment(())

    @property
    def partitions_auto_assigned(self) -> bool:
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    @property
    def user_assigned(self) -> bool:
        return self.type is SubscriptionType.USER_ASSIGNED

    def subscribed_topics(self, list_topics: Callable[[], Iterable[str]]) -> list[str]:
        """The subscribed topics, sorted: the named ones, or those of ``list_topics()``
        (called only for a pattern) that the pattern matches in full, Kafka's internal
        topics left out when ``exclude_internal_topics``."""
        if self.pattern is None:
            return sorted(self.topics)
        return sorted(t for t in list_topics() if self.pattern.fullmatch(t) and not self.is_excluded(t))

    def is_excluded(self, topic: str) -> bool:
        """Whether a listing leaves ``topic`` out (an internal topic, when excluded)."""
        return self.exclude_internal_topics and topic in INTERNAL_TOPICS

    # -- the assignment ---------------------------------------------------------------------
    def set_assignment(self, partitions: Iterable[TopicPartition]) -> tuple[set, set]:
        """Make ``partitions`` the assignment: partitions kept keep their state, new ones
        start without a position. Returns (removed, added)."""
        new = set(partitions)
        removed = set(self._states) - new
        for tp in removed:
            del self._states[tp]
        added = new - set(self._states)
        for tp in sorted(added):
            self._states[tp] = PartitionState()
        return removed, added

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def is_assigned(self, tp) -> bool:
        return tp in self._states

    def state(self, tp) -> PartitionState:
        """``tp``'s state; :class:`InvalidArgumentError` when it is not assigned."""
        state = self._states.get(tp)
        if state is None:
            raise InvalidArgumentError(f"partition {tp[0]}-{tp[1]} is not assigned to this consumer")
        return state

    def assigned_partition(self, tp: TopicPartition) -> TopicPartition:
        """``tp``; :class:`InvalidArgumentError` when it is not assigned."""
        self.state(tp)
        return tp

    # -- positions --------------------------------------------------------------------------
    def position(self, tp) -> int | None:
        return self.state(tp).position

    def seek(self, tp, offset: int, epoch: int = -1) -> None:
        """Set ``tp``'s position; ``epoch`` is the leader epoch of the record before it
        (-1: unknown)."""
        state = self.state(tp)
        state.position, state.epoch = offset, epoch

    def consumed(self, tp, record) -> None:
        """``record`` of ``tp`` was handed to the user: the position moves past it."""
        state = self._states.get(tp)
        if state is not None:
            state.position, state.epoch = record.offset + 1, record.leader_epoch

    def missing_positions(self) -> list[TopicPartition]:
        """The assigned partitions without a position (Kafka's ``initializingPartitions``)."""
        return [tp for tp, state in self._states.items() if state.position is None]

    def all_consumed(self) -> dict[TopicPartition, tuple[int, int]]:
        """``{tp: (position, epoch)}`` of the partitions that have a position: what a
        commit of the positions covers."""
        return {tp: (s.position, s.epoch) for tp, s in self._states.items() if s.position is not None}

    # -- pausing, deleted topics, fetch order -------------------------------------------------
    def pause(self, tp) -> None:
        self.state(tp).paused = True

    def resume(self, tp) -> None:
        state = self._states.get(tp)
        if state is not None:
            state.paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._states.items() if s.paused}

    def mark_deleted(self, tp) -> bool:
        """``tp``'s topic is gone: it is not fetched, and a group member asks for a new
        assignment. Returns whether this is news."""
        self.rejoin_needed = self.rejoin_needed or self.partitions_auto_assigned
        state = self._states.get(tp)
        if state is None or state.deleted:
            return False
        state.deleted = True
        return True

    def deleted(self) -> list[TopicPartition]:
        return [tp for tp, s in self._states.items() if s.deleted]

    def recreated(self, tp) -> None:
        """A topic of the deleted ``tp``'s name has it again: it is fetched again, from a
        new position."""
        state = self.state(tp)
        state.deleted, state.position, state.epoch = False, None, -1

    def fetchable(self) -> list[TopicPartition]:
        """The partitions to fetch from, neither paused nor deleted, starting one further
        on at each call, so that ``max_records`` does not always favour the first."""
        tps = [tp for tp, s in self._states.items() if s.fetchable()]
        if len(tps) > 1:
            self._rotation = (self._rotation + 1) % len(tps)
            tps = tps[self._rotation:] + tps[:self._rotation]
        return tps
