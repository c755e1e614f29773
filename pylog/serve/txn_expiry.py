"""The server's periodic abort of transactions left open past their timeout, as Kafka's
transaction coordinator runs it every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (10 s by default): a
transactional producer that died or hung mid-transaction must not hold ``read_committed``
consumers at its first record forever. Each round asks the log dir's transaction
coordinator
(:meth:`~pylog.coordinator.txn_coordinator.TransactionCoordinator.abort_expired`: the
epoch bumped, so the producer is fenced if it comes back, and ABORT markers written) in
the disk thread pool, only once the log dir has transaction state (a server whose
clients never used transactions reads nothing). Transactions of pylog's own producers in
other processes of the log dir are aborted as well: the coordinator's state is the log
dir's.

Cost: every interval, a listing of ``__transaction_state``'s partition directories and a
replay of their new records; the markers written when a transaction is aborted.
"""

from __future__ import annotations

import asyncio
import logging

from pylog.errors import PylogError

LOG = logging.getLogger("pylog.serve")


async def abort_timed_out_transactions(apis) -> None:
    """Abort the timed-out transactions every interval of ``apis.config``, until cancelled.
    A failure of one round (a full disk) is logged and the next round tries again."""
    interval_s = apis.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
    while True:
        await asyncio.sleep(interval_s)
        try:
            coordinator = await apis.txn_coordinator(create=False)
            if coordinator is not None:
                aborted = await apis.run_blocking(coordinator.abort_expired)
                if aborted:
                    LOG.info("aborted transactions past their timeout: %s", ", ".join(aborted))
        except PylogError as e:
            LOG.warning("the abort of timed-out transactions failed (tried again in %.1f s): %s", interval_s, e)
