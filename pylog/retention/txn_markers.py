"""Which transactional batches and markers a compaction pass may remove: Kafka's rule.

A pass walks the batches in offset order, starting each aborted transaction (from the
``.txnindex`` files) when it reaches the transaction's first offset.

- A data batch of an aborted transaction goes: committed readers never saw it.
- An ABORT marker may go when this pass met no batch of its transaction. A pass that
  drops the transaction's batches keeps the marker (and its ``.txnindex`` entry); the
  next pass meets none and may drop it.
- A COMMIT marker may go when this pass met no batch of its transaction.

A marker that may go is first stamped with a delete horizon (now + ``delete_retention_ms``)
and is removed by the first pass after the horizon, so that a reader which fetched the
transaction's records shortly before still finds its marker. Memory: one entry per
producer with a transaction in the cleaned range.
"""

from __future__ import annotations

from typing import Iterable

from pylog.index.txn_index import AbortedTxn
from pylog.layout import CONTROL_ABORT, CONTROL_COMMIT


class TxnMarkers:
    """The transaction state of one compaction pass over a log's batches, in order."""

    def __init__(self, aborted: Iterable[AbortedTxn]):
        self._pending = sorted(aborted, key=lambda t: t.first_offset, reverse=True)
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # producer -> (txn, a batch of it was met)
        self._committed: set[int] = set()  # producers with a batch of an open or committed txn met

    def _start_up_to(self, offset: int) -> None:
        while self._pending and self._pending[-1].first_offset <= offset:
            txn = self._pending.pop()
            self._aborted[txn.producer_id] = (txn, False)

    def on_data(self, batch) -> bool:
        """Whether ``batch`` (not a control batch) belongs to an aborted transaction and goes."""
        self._start_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        pid = batch.producer_id
        if pid in self._aborted:
            self._aborted[pid] = (self._aborted[pid][0], True)
            return True
        self._committed.add(pid)
        return False

    def on_marker(self, batch) -> tuple[bool, AbortedTxn | None]:
        """(whether the control ``batch`` may go, the aborted transaction whose index entry
        must stay because its marker stays)."""
        self._start_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True, None  # a marker emptied by an earlier pass
        pid = batch.producer_id
        kind = records[0].control_type_id
        if kind == CONTROL_ABORT:
            txn, met = self._aborted.pop(pid, (None, False))
            return (False, txn) if met else (True, None)
        if kind == CONTROL_COMMIT:
            met = pid in self._committed
            self._committed.discard(pid)
            return not met, None
        return False, None
