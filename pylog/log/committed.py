"""``CommittedReadState``: what a read-only log knows of transactions, for committed reads.

A read-only log does not load producer state when it opens (a reader that never asks for
committed reads pays nothing). It learns open and aborted transactions by replaying
producer batches: the whole log on the first committed read (O(log bytes)), then only the
batches appended since (O(new bytes)); from the log start again after a truncation or
compaction, or once retention passed the replayed part. Aborts found are indexed in
memory beside the ``.txnindex`` files' entries, and a whole replay checks every segment's
``.txnindex`` against them (one that disagrees is rebuilt in memory, docs/format/txnindex.md).
"""

from __future__ import annotations

from pylog.log.loader import lso_after
from pylog.producer_state import ProducerStateManager

#: Producers are never expired by a reader: an open transaction must stay known.
_NEVER_MS = 2**62


class CommittedReadState:
    """The producer state of one read-only log, and how far it replayed. The ``Log``'s
    lock guards it."""

    def __init__(self):
        self.producers: ProducerStateManager | None = None
        self._replayed_to = 0

    def forget(self) -> None:
        """The segments were truncated or rewritten: the next catch-up replays from the log start."""
        self.producers = None

    def catch_up(self, local, offsets) -> ProducerStateManager:
        """Replay what is new in ``local`` (a ``LocalLog``) up to its log end, within
        ``offsets`` (its ``LogOffsets``); returns the producer state. A replay that fails
        resumes after the last batch it applied."""
        log_start_offset, log_end_offset = offsets.log_start_offset, local.log_end_offset
        high_watermark = offsets.high_watermark
        whole = self.producers is None or self._replayed_to < log_start_offset
        if whole:
            self.producers = ProducerStateManager(local.path, producer_id_expiration_ms=_NEVER_MS, read_only=True)
            self._replayed_to = log_start_offset
        found: dict[int, list] = {}
        producers = self.producers
        if self._replayed_to < log_end_offset:
            producers.replay(self._noted(local.batches_between(self._replayed_to, log_end_offset)),
                             lambda txn: local.index_aborted_in_memory(txn._replace(
                                 last_stable_offset=lso_after(producers, high_watermark, txn.last_offset)), found))
            self._replayed_to = log_end_offset
        if whole:
            local.check_txn_indexes(found, log_end_offset)
        return producers

    def _noted(self, batches):
        """``batches``, noting each one applied."""
        for batch in batches:
            yield batch
            self._replayed_to = batch.next_offset
