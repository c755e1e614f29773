"""The three per-segment indexes: offsets, timestamps, aborted transactions
(docs/format/index.md, timeindex.md, txnindex.md)."""

from pylog.index.offset_index import OffsetIndex
from pylog.index.time_index import TimeIndex
from pylog.index.txn_index import AbortedTxn, TxnIndex

__all__ = ["AbortedTxn", "OffsetIndex", "TimeIndex", "TxnIndex"]
