"""``TransactionCoordinator`` used from several threads of one process (as ``pylog serve``'s
disk threads use it): a transactional id's steps exclude each other there too."""

from __future__ import annotations

import threading

from pylog import LogManager
from pylog.coordinator.txn_coordinator import TransactionCoordinator
from pylog.logdir.writers import WriterPool


def test_partitions_added_from_eight_threads_at_once_are_all_recorded(tmp_path):
    """Each add reads the id's state and writes it back with its partition: without the
    id's mutex excluding this process's threads, concurrent adds lose each other's."""
    with LogManager(tmp_path) as manager:
        manager.create_topic("t", 64)
    pool = WriterPool.for_root(str(tmp_path))
    coordinator = TransactionCoordinator(str(tmp_path), pool, partitions=1)
    try:
        pid, epoch = coordinator.init_producer_id("tx", 60_000)
        start = threading.Barrier(8)

        def add(thread: int) -> None:
            start.wait()
            for p in range(thread * 8, thread * 8 + 8):
                coordinator.add_partitions("tx", pid, epoch, [("t", p)])
        threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert coordinator.current("tx").partitions == {("t", p) for p in range(64)}
    finally:
        coordinator.close()
        pool.release()
