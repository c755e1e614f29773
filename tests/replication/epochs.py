"""Test helper: does a log's ``leader-epoch-checkpoint`` say what its batches say?"""

from __future__ import annotations

import os

from pylog.checkpoint import LeaderEpochCheckpoint
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.segments import batches_from


def epochs_from_batches(log) -> list[tuple[int, int]]:
    """The entries Kafka's rules give for the log's batches, cut at its log start."""
    cache = LeaderEpochFileCache(None)
    cache.assign_batches(batches_from(log.segments, log.log_start_offset, log.log_end_offset))
    cache.truncate_from_start(log.log_start_offset)
    return cache.entries


def checkpoint_mismatch(log) -> str | None:
    """None when the file on disk matches the batches (an epoch begun at the log end with
    no batch yet may follow), else what differs."""
    on_disk = LeaderEpochCheckpoint(os.path.join(log.path, "leader-epoch-checkpoint")).read()
    if on_disk and on_disk[-1][1] == log.log_end_offset:
        on_disk = on_disk[:-1]
    expected = epochs_from_batches(log)
    return None if on_disk == expected else f"{log.path}: checkpoint {on_disk} but batches say {expected}"
