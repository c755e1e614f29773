"""The transaction coordinator's state kept in a log dir's ``__transaction_state``
partitions (pylog's or a broker's), replayed read-only as a coordinator reloads it: the
latest record of a transactional id wins, a tombstone removes it. Reading never modifies
the directories."""

from __future__ import annotations

import os
import re

from pylog.coordinator.txn_coordinator import TXN_TOPIC, TxnMetadata, apply_txn_records
from pylog.errors import LogDirNotFoundError
from pylog.log import Log

_TXN_PARTITION = re.compile(re.escape(TXN_TOPIC) + r"-(\d+)")


def read_transaction_states(log_dir) -> dict[str, tuple[int, TxnMetadata]]:
    """``{transactional id: (its __transaction_state partition, TxnMetadata)}`` for every
    transactional id of ``log_dir``, sorted by id. Cost: one pass over each partition."""
    if not os.path.isdir(log_dir):
        raise LogDirNotFoundError(f"log dir {log_dir} does not exist or is not a directory")
    states: dict[str, tuple[int, TxnMetadata]] = {}
    for name in os.listdir(log_dir):
        match = _TXN_PARTITION.fullmatch(name)
        path = os.path.join(log_dir, name)
        if match is None or not os.path.isdir(path) or not os.listdir(path):
            continue
        partition_states: dict[str, TxnMetadata] = {}  # an id lives in one partition
        with Log.open(path, read_only=True) as log:
            apply_txn_records(partition_states, log.records())
        states.update((tid, (int(match[1]), meta)) for tid, meta in partition_states.items())
    return dict(sorted(states.items()))
