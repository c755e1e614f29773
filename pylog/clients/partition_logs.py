"""``PartitionLogs``: the partitions a consumer has open, read only, shared by its
:class:`~pylog.clients.fetcher.Fetcher` (the reads) and its
:class:`~pylog.clients.offset_fetcher.OffsetFetcher` (the offset look-ups), as Kafka's
consumer shares one network client between its ``Fetcher`` and ``OffsetFetcher``.

An assigned partition's log is opened on first use and its directory watched (the
consumer's wait wakes on its appends); a partition looked up without being assigned is
opened too, kept until ``close``. Every segment descriptor counts against one
``max_open_files``. A partition whose directory vanished was deleted with its topic:
:class:`~pylog.errors.UnknownTopicError`, not the file system's error. Nothing is written.
"""

from __future__ import annotations

import contextlib
import logging
import os

from pylog.arguments import check_topic_partition
from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.errors import InvalidArgumentError, UnknownTopicError
from pylog.log import Log
from pylog.logdir.metadata import LogDirMetadata
from pylog.partition_dir import partition_dir_name
from pylog.segment.open_files import OpenFiles

_log = logging.getLogger("pylog.consumer")


def as_topic_partition(value) -> TopicPartition:
    """``value`` (a pair) as a TopicPartition; InvalidArgumentError when it is not one."""
    return TopicPartition(*check_topic_partition(value))


def partition_list(partitions) -> list[TopicPartition]:
    """``partitions`` (an iterable of (topic, partition) pairs) as TopicPartitions, or
    :class:`InvalidArgumentError`."""
    if isinstance(partitions, (str, bytes)) or not hasattr(partitions, "__iter__"):
        raise InvalidArgumentError(f"partitions must be a list of TopicPartition, not {partitions!r}")
    return [as_topic_partition(tp) for tp in partitions]


class PartitionLogs:
    """The read-only logs of the partitions of the log dir ``root`` a consumer reads or
    looks up (see the module's doc); ``watch`` (a :class:`~pylog.logdir.wakeup.DirWatch`)
    is told of each assigned partition's directory."""

    def __init__(self, root: str, subscriptions: SubscriptionState, watch, *, max_open_files: int | None = None):
        self.root, self._subscriptions, self._watch = root, subscriptions, watch
        self._open_files = OpenFiles(max_open_files)  # shared by the segments of every partition read
        self._assigned: dict[TopicPartition, Log] = {}  # watched
        self._queried: dict[TopicPartition, Log] = {}  # others', opened for an offset look-up

    def topics(self) -> list[str]:
        """The topics of the log dir. O(directory entries) when it changed, else O(1)."""
        return LogDirMetadata.for_root(self.root).topics()

    def partitions(self, topic: str) -> set[int] | None:
        """The partition numbers of ``topic``; None when the log dir has no such topic.
        O(directory entries)."""
        try:
            return set(LogDirMetadata.for_root(self.root).partitions(topic))
        except UnknownTopicError:
            return None

    def log(self, tp: TopicPartition) -> Log:
        """The log of the assigned partition ``tp``, opened and watched on first use;
        :class:`UnknownTopicError` when it does not exist."""
        log = self._assigned.get(tp)
        if log is None:
            log = self._assigned[tp] = self._open(tp)
            self._watch.add(log.path)
        return log

    def any_log(self, tp) -> Log:
        """The log of any partition, assigned or not (kept open until ``close``), refreshed."""
        tp = as_topic_partition(tp)
        log = self._assigned.get(tp) or self._queried.get(tp)
        if log is None:
            log = self._queried[tp] = self._open(tp)
        try:
            return self.refreshed(log)
        except UnknownTopicError:
            if self._queried.get(tp) is log:
                self._queried.pop(tp).close()  # a topic made again under the name is opened anew
            raise

    def assigned(self) -> list[Log]:
        """The open logs of assigned partitions."""
        return list(self._assigned.values())

    def _open(self, tp: TopicPartition) -> Log:
        """``tp``'s partition read-only, its segments' descriptors within ``max_open_files``;
        :class:`UnknownTopicError` when it does not exist."""
        path = self.path(tp)
        if not os.path.isdir(path):
            raise UnknownTopicError(f"no partition {tp.topic}-{tp.partition} in {self.root}")
        return Log.open(path, read_only=True, open_files=self._open_files)

    def path(self, tp: TopicPartition) -> str:
        return os.path.join(self.root, partition_dir_name(tp.topic, tp.partition))

    def sync_assignment(self) -> None:
        """Close the logs of partitions no longer assigned. O(open logs)."""
        for tp in [tp for tp in self._assigned if not self._subscriptions.is_assigned(tp)]:
            self.drop(tp)

    def drop(self, tp: TopicPartition) -> None:
        """Close ``tp``'s log and stop watching it."""
        log = self._assigned.pop(tp, None)
        if log is not None:
            self._watch.remove(log.path)
            log.close()

    def partition_deleted(self, tp: TopicPartition) -> None:
        """``tp``'s directory is gone: its topic was deleted. As Kafka's consumer, stop
        fetching it and warn (once); a group member asks for a new assignment. With
        ``assign()`` it stays assigned, and is read again, from where
        ``auto_offset_reset`` says, once a topic of that name has it again."""
        if self._subscriptions.mark_deleted(tp):
            _log.warning("partition %s-%d was deleted from %s (its topic is gone): not fetched", tp.topic,
                         tp.partition, self.root)
        self.drop(tp)

    def recreated(self) -> None:
        """Assigned partitions of a deleted topic that a new topic of the name has again
        take a new position (one stat each)."""
        for tp in self._subscriptions.deleted():
            if os.path.isdir(self.path(tp)):
                self._subscriptions.recreated(tp)

    @contextlib.contextmanager
    def deleted_as_unknown(self, log: Log):
        """Around a read of ``log``: its directory vanishing under it (the topic was
        deleted) is :class:`UnknownTopicError`, not the file system's error."""
        try:
            yield
        except OSError:
            if os.path.isdir(log.path):
                raise
            raise UnknownTopicError(f"partition {log.topic}-{log.partition} was deleted from {self.root} "
                                    f"(its topic is gone)") from None

    def refreshed(self, log: Log) -> Log:
        """``log`` caught up with its directory; :class:`UnknownTopicError` once deleted."""
        with self.deleted_as_unknown(log):
            log.refresh()
        return log

    def close_steps(self) -> list:
        """Closing every log, as steps for ``close_all``."""
        return [log.close for log in [*self._assigned.values(), *self._queried.values()]]
