"""The transaction coordinator's state kept in a log dir's ``__transaction_state``
partitions (pylog's or a broker's), replayed read-only as a coordinator reloads it: the
latest record of a transactional id wins, a tombstone removes it. Reading never modifies
the directories."""

from __future__ import annotations

import os
import re

from pylog.coordinator.txn_coordinator import TXN_TOPIC, TxnMetadata
from pylog.coordinator.txn_records import TXN_RECORDS
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
        with Log.open(path, read_only=True) as log:
            for record in log.records():
                decoded = TXN_RECORDS.decode(record.key, record.value)
                tid = decoded.key["transactionalId"]
                if decoded.value is None:
                    states.pop(tid, None)
                else:
                    states[tid] = (int(match[1]), TxnMetadata.from_value(decoded.value))
    return dict(sorted(states.items()))
