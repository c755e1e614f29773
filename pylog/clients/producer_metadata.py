"""``ProducerMetadata``: the topics a producer writes to, as Kafka's ``ProducerMetadata``:
each topic's partition count, looked up in the log dir on first use (and again when a
partition beyond it is asked for), and a missing topic created on the first send, as
Kafka's broker does (``auto_create_topics_enable``).
"""

from __future__ import annotations

import contextlib
import os

from pylog.arguments import check_int
from pylog.errors import InvalidConfigError, UnknownTopicError
from pylog.layout import CLIENTS_LOCK_FILE, INT32_MAX
from pylog.locks import name_lock
from pylog.logdir.metadata import LogDirMetadata
from pylog.manager import LogManager
from pylog.partition_dir import validate_topic


@contextlib.contextmanager
def topic_creation_lock(root: str, topic: str):
    """Held while a producer creates ``topic`` in the log dir ``root`` (one byte of the
    clients' lock file, exclusive across threads and processes)."""
    with name_lock(os.path.join(root, CLIENTS_LOCK_FILE), "create-topic:" + topic):
        yield


class ProducerMetadata:
    """The partition counts of the topics of the log dir ``root`` a producer writes to."""

    def __init__(self, root: str, *, auto_create_topics_enable: bool, num_partitions: int):
        self.root = root
        self.auto_create_topics_enable, self.num_partitions = auto_create_topics_enable, num_partitions
        self.counts: dict[str, int] = {}  # read without a lock by the producer's hot path

    def partition_count(self, topic: str, *, fresh: bool = False) -> int:
        """``topic``'s partition count, as last looked up (``fresh``: looked up now)."""
        count = None if fresh else self.counts.get(topic)
        if count is None:
            count = self.counts[topic] = len(self._topic_partitions(topic))
        return count

    def check_partition(self, topic: str, partition) -> int:
        """``partition`` if ``topic`` has it (looked up again when it is beyond the count
        known), else :class:`UnknownTopicError`; :class:`InvalidArgumentError` for a
        partition that is no int >= 0."""
        if type(partition) is int and 0 <= partition < self.counts.get(topic, 0):
            return partition
        check_int(partition, "partition", (0, INT32_MAX))
        if partition >= self.partition_count(topic) and partition >= self.partition_count(topic, fresh=True):
            raise UnknownTopicError(f"topic {topic!r} has no partition {partition} in {self.root}")
        return partition

    def _topic_partitions(self, topic: str) -> list[int]:
        """``topic``'s partitions; a topic that does not exist is first created with
        ``num_partitions`` partitions when ``auto_create_topics_enable``, as Kafka's broker
        does on a producer's first request. Counted under :func:`topic_creation_lock`, so
        a topic another producer is creating is counted once made whole. Cost: a listing
        of the log dir, plus the creation (a directory and empty files per partition,
        fsynced)."""
        validate_topic(topic)
        with topic_creation_lock(self.root, topic):
            try:
                return LogDirMetadata.for_root(self.root).partitions(topic)
            except UnknownTopicError:
                if not self.auto_create_topics_enable:
                    raise UnknownTopicError(
                        f"unknown topic {topic!r} in {self.root}: create it with `pylog topics {self.root} --create "
                        f"--topic {topic} --partitions N`, or make the Producer with "
                        f"auto_create_topics_enable=True") from None
            with LogManager(self.root) as manager:
                try:
                    return manager.create_topic(topic, self.num_partitions).partitions
                except InvalidConfigError:  # made meanwhile by other means (pylog topics), of another size
                    return manager.partitions(topic)
