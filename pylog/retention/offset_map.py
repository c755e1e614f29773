"""``OffsetMap``: key -> latest offset, for compaction, within a memory budget.

Keys are stored as 16-byte BLAKE2b digests (Kafka's cleaner stores 16-byte MD5 hashes):
the map's size does not depend on key sizes, and two keys collide with probability
~2^-128. ``capacity`` is derived from the budget with a fixed cost per entry, so a log
with more distinct keys than fit is compacted in several passes instead of growing.
"""

from __future__ import annotations

import hashlib

#: Bytes one entry costs in memory: the 16-byte digest as a bytes object (49), the offset
#: int (32), and the dict slot (~3 x 8 with its hash, ~1.5x for the load factor).
ENTRY_BYTES = 120
DEFAULT_BUDGET_BYTES = 128 * 1024 * 1024


def key_digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


class OffsetMap:
    """Latest offset per key hash, holding at most ``capacity`` keys."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES):
        self.capacity = max(budget_bytes // ENTRY_BYTES, 1)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    def is_full(self) -> bool:
        return len(self._map) >= self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` for ``key``; False (and nothing stored) when a new key does not fit."""
        d = key_digest(key)
        if d not in self._map and len(self._map) >= self.capacity:
            return False
        self._map[d] = offset
        self.latest_offset = max(self.latest_offset, offset)
        return True

    def get(self, key: bytes) -> int:
        """Latest offset seen for ``key``, or -1."""
        return self._map.get(key_digest(key), -1)
