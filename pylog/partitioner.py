"""Kafka's default partitioner: murmur2 of the key bytes, made positive, modulo the
partition count (``org.apache.kafka.common.utils.Utils.murmur2``), and the producer's
:class:`StickyPartitioner` (Kafka's ``BuiltInPartitioner``): keyed records by the key,
records without a key to one partition per batch."""

from __future__ import annotations

import itertools

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
#: The hashes of recent keys of up to ``_CACHED_KEY_BYTES``, at most ``_CACHED_KEYS`` of them:
#: murmur2 in Python costs microseconds, and keys (users, devices) recur.
_HASHES: dict[bytes, int] = {}
_CACHED_KEYS = 65536
_CACHED_KEY_BYTES = 64


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data``, as a signed int (like Java's). O(len(data))."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key. O(len(key))
    the first time a key is seen, a dict look-up after."""
    h = _HASHES.get(key) if type(key) is bytes else None
    return (_positive_hash(key) if h is None else h) % num_partitions


def partitions_for_keys(keys: list, num_partitions: int) -> list[int]:
    """``partition_for_key`` of each of ``keys`` (none None), in one pass."""
    get = _HASHES.get
    return [((get(key) if type(key) is bytes else None) or _positive_hash(key)) % num_partitions for key in keys]


def _positive_hash(key) -> int:
    """murmur2 of ``key`` made positive, remembered for a short ``bytes`` key."""
    h = murmur2(key) & 0x7FFFFFFF
    if type(key) is bytes and len(key) <= _CACHED_KEY_BYTES:
        if len(_HASHES) >= _CACHED_KEYS:
            _HASHES.clear()
        _HASHES[key] = h
    return h


class StickyPartitioner:
    """A producer's choice of partition for records without an explicit one: Kafka's
    partitioner for a key, else the topic's sticky partition, which moves on (round
    robin) each time a batch is opened for keyless records (:meth:`on_new_batch`), as
    Kafka's producer fills one batch at a time. Memory only; the caller gives the
    topic's partition count (it owns the topic metadata). O(1) besides the key's hash."""

    def __init__(self):
        self._sticky: dict[str, int] = {}
        self._round_robin = itertools.count()

    def partition(self, topic: str, key, num_partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= num_partitions:
            sticky = self._sticky[topic] = next(self._round_robin) % num_partitions
        return sticky

    def on_new_batch(self, topic: str) -> None:
        """A batch was opened for keyless records of ``topic``: the next one goes elsewhere."""
        self._sticky.pop(topic, None)

    @staticmethod
    def runs_by_key(keys: list, num_partitions: int, sizes) -> list:
        """``(partition, positions, sizes.of(positions))`` for the records of each partition
        the partitioner picks for ``keys`` (partition None: the keyless records, which go
        to the sticky partition). O(records)."""
        keyless = [i for i, key in enumerate(keys) if key is None] if None in keys else []
        keyed = [i for i, key in enumerate(keys) if key is not None] if keyless else range(len(keys))
        by_partition: dict = {}
        for position, p in zip(keyed, partitions_for_keys([keys[i] for i in keyed] if keyless else keys,
                                                         num_partitions)):
            by_partition.setdefault(p, []).append(position)
        if keyless:
            by_partition[None] = keyless
        return [(p, positions, sizes.of(positions)) for p, positions in by_partition.items()]
