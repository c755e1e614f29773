"""Kafka's default partitioner: murmur2 of the key bytes, made positive, modulo the
partition count (``org.apache.kafka.common.utils.Utils.murmur2``)."""

from __future__ import annotations

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
