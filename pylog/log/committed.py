"""``CommittedReadState``: what a read-only log knows of transactions, for committed reads.

A read-only log does not load producer state when it opens (a reader that never asks for
committed reads pays nothing). It learns open and aborted transactions by replaying
producer batches: the whole log on the first committed read (O(log bytes)), then only the
batches appended since (O(new bytes)); from the log start again after a truncation or
compaction, or once retention passed the replayed part. Aborts found are indexed in
memory beside the ``.txnindex`` files' entries, and a whole replay checks every segment's
``.txnindex`` against them (one that disagrees is rebuilt in memory, docs/format/txnindex.md).

The last stable offset alone needs only the open transactions at the log end: before any
committed read, it loads the newest producer snapshot at or below the log end and replays
the batches after it (O(bytes after the snapshot), as a writable open does), so
``pylog describe`` or a query's planning does not read a whole large log.
"""

from __future__ import annotations

from pylog.log.loader import lso_after, while_files_vanish
from pylog.producer_state import ProducerStateManager

#: Producers are never expired by a reader: an open transaction must stay known.
_NEVER_MS = 2**62


class CommittedReadState:
    """The producer state of one read-only log, and how far it replayed. The ``Log``'s
    lock guards it."""

    def __init__(self):
        self.producers: ProducerStateManager | None = None
        self._replayed_to = 0
        self._knows_aborts = False  # replayed from the log start, aborts indexed

    def forget(self) -> None:
        """The segments were truncated or rewritten: the next catch-up starts over."""
        self.producers = None

    def catch_up(self, local, offsets, *, aborts: bool = True) -> ProducerStateManager:
        """Replay what is new in ``local`` (a ``LocalLog``) up to its log end, within
        ``offsets`` (its ``LogOffsets``); returns the producer state. ``aborts``: also index
        every aborted transaction (committed reads need them), replaying the whole log the
        first time; else a first call starts from the newest producer snapshot. A replay
        that fails resumes after the last batch it applied."""
        log_start_offset, log_end_offset = offsets.log_start_offset, local.log_end_offset
        high_watermark = offsets.high_watermark
        stale = self.producers is None or self._replayed_to < log_start_offset
        if stale and not aborts:
            return self._load_from_snapshot(local, log_start_offset, log_end_offset)
        whole = stale or (aborts and not self._knows_aborts)
        if whole:
            self._knows_aborts = True
            self.producers = ProducerStateManager(local.path, producer_id_expiration_ms=_NEVER_MS, read_only=True)
            self._replayed_to = log_start_offset
        found: dict[int, list] = {}
        producers = self.producers

        def index_aborted(txn):
            local.index_aborted_in_memory(txn._replace(
                last_stable_offset=lso_after(producers, high_watermark, txn.last_offset)), found)
        if self._replayed_to < log_end_offset:
            producers.replay(self._noted(local.batches_between(self._replayed_to, log_end_offset)),
                             index_aborted if self._knows_aborts else None)
            self._replayed_to = log_end_offset
        if whole:
            local.check_txn_indexes(found, log_end_offset)
        return producers

    def caught_up(self, local, offsets, lock, *, aborts: bool, relist) -> ProducerStateManager:
        """:meth:`catch_up` under ``lock``, again after ``relist()`` while the writer renamed
        or deleted a file under it (:func:`following_the_writer`)."""
        def catch_up():
            with lock:
                return self.catch_up(local, offsets, aborts=aborts)
        return following_the_writer(catch_up, read_only=True, relist=relist)

    def _load_from_snapshot(self, local, log_start_offset: int, log_end_offset: int) -> ProducerStateManager:
        producers = ProducerStateManager(local.path, producer_id_expiration_ms=_NEVER_MS, read_only=True)
        producers.load(log_start_offset, log_end_offset, local.batches_between, now_ms=0)
        self.producers, self._replayed_to, self._knows_aborts = producers, log_end_offset, False
        return producers

    def _noted(self, batches):
        """``batches``, noting each one applied."""
        for batch in batches:
            yield batch
            self._replayed_to = batch.next_offset


def last_stable_offset(producers, offsets, *, auto_high_watermark: bool) -> int:
    """min(first offset of an open transaction, high watermark) of a log whose producer
    state is ``producers`` (caught up) and whose offsets are ``offsets``. O(producers)."""
    high_watermark = offsets.high_watermark
    fuo = producers.first_unstable_offset(None if auto_high_watermark else high_watermark, offsets.log_start_offset)
    return high_watermark if fuo is None else min(fuo, high_watermark)


def following_the_writer(read, *, read_only: bool, relist):
    """``read()``; for a read-only log whose writer renamed or deleted a file under it
    (compaction, retention: ENOENT, ESTALE), again after ``relist()`` (listing the directory
    again), up to RELIST_ATTEMPTS times. A writable log runs it once."""
    def step(attempt: int):
        if attempt > 1:
            relist()
        return read()
    return while_files_vanish(step, read_only=read_only)
