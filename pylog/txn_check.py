"""Checking ``.txnindex`` files against the ABORT markers of their segments
(docs/format/txnindex.md#when-an-index-is-trusted).

A ``.txnindex`` has no checksum, and a missing or emptied one reads like a segment without
aborted transactions. So no index is believed before it was compared with what the
segment's batches say: producer state at the segment's base offset (its ``.snapshot``, else
the newest one before it plus a replay) is fed the segment's producer batches, and every
ABORT that ends a transaction gives the entry the index must hold. An index that disagrees
is rebuilt from that replay.
"""

from __future__ import annotations

from typing import Callable, Iterable

from pylog.index.txn_index import AbortedTxn
from pylog.producer_state import ProducerStateManager
from pylog.record.encode import now_ms

#: Producers are never expired while checking: an open transaction must stay known.
_NEVER_MS = 2**62


def replay_aborted(producers: ProducerStateManager, batches: Iterable,
                   segment_of: Callable[[int], int]) -> dict[int, list[AbortedTxn]]:
    """Feed the producer batches to ``producers``; return the transactions their ABORT
    markers end, by the base offset of the segment holding the marker (``segment_of``).
    Each entry's last stable offset is the first offset of the transactions still open
    (or the marker's offset + 1): what the index holds once the high watermark passed the
    marker, the highest value a correct index may hold."""
    out: dict[int, list[AbortedTxn]] = {}

    def index(txn: AbortedTxn) -> None:
        stable = min(producers.ongoing_transactions().values(), default=txn.last_offset + 1)
        entry = txn._replace(last_stable_offset=min(stable, txn.last_offset + 1))
        out.setdefault(segment_of(txn.last_offset), []).append(entry)

    producers.replay(batches, index)
    return out


class TxnIndexChecker:
    """Checks one log's segments on first use. Keeps the producer state reached at the end
    of the last segment checked, so that checking the next one (a reader moving forward)
    costs that segment only."""

    def __init__(self, log_dir: str, read_batches: Callable[[int, int], Iterable]):
        self._log_dir = log_dir
        self._read_batches = read_batches
        self._carry = None  # (segment checked last, its next offset then, producer state there)

    def check(self, segment, *, log_start_offset: int, is_current: Callable, may_grow: bool) -> bool:
        """Make ``segment.txn_index`` trusted; True if it had to be rebuilt.
        ``is_current(segment)``: whether a segment is still in the log as it was.
        Cost: O(segment bytes), plus O(bytes from the newest snapshot to the base offset)
        unless the previous segment was checked last."""
        base, end = segment.base_offset, segment.next_offset
        producers = self._state_at(base, log_start_offset, is_current)
        expected = replay_aborted(producers, self._read_batches(base, end), lambda _: base).get(base, [])
        self._carry = (segment, end, producers)
        return segment.txn_index.verify(expected, checked_to=end, may_grow=may_grow)

    def _state_at(self, base: int, log_start_offset: int, is_current: Callable) -> ProducerStateManager:
        if self._carry is not None:
            previous, end, producers = self._carry
            if end == base and is_current(previous) and previous.next_offset == end:
                return producers
        producers = ProducerStateManager(self._log_dir, producer_id_expiration_ms=_NEVER_MS, read_only=True)
        producers.load(min(log_start_offset, base), base, self._read_batches, now_ms())
        return producers
