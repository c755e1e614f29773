"""What a partition directory keeps besides its segments: its name, its writer lock,
its clean-shutdown marker and its entries in the log dir's checkpoint files
(docs/format/checkpoints.md).

Kafka keeps recovery points, log start offsets and high watermarks in files at the
log-dir root (the partition directory's parent), one line per partition. pylog does
the same, updating its own line with a read-modify-write under a lock on the parent
directory, so several partitions (and processes) can share one log dir.
"""

from __future__ import annotations

import fcntl
import json
import os
import re

from pylog.checkpoint import OffsetCheckpoint
from pylog.errors import CorruptCheckpointError, InvalidTopicError, LogLockedError, StorageError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import (
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)

MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic(name) -> str:
    """Kafka's rule: 1-249 of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``. Raises
    :class:`InvalidTopicError`; so no topic name can escape its log dir."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"topic name must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters, longer than {MAX_TOPIC_LENGTH}")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")
    return name


def parse_partition_dir(name: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)``: split at the last ``-`` as Kafka does."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise InvalidTopicError(
            f"partition directory {name!r} is not named <topic>-<partition> (for example orders-0)")
    return validate_topic(topic), int(part)


class PartitionDir:
    """A partition directory and its log dir. Holds the writer lock while open."""

    def __init__(self, path, *, io: FileIO = DEFAULT_IO):
        self.path = os.path.abspath(str(path))
        self.log_dir = os.path.dirname(self.path)
        self.topic, self.partition = parse_partition_dir(os.path.basename(self.path))
        self.key = (self.topic, self.partition)
        self.io = io
        self._lock_fd: int | None = None

    # -- writer lock -------------------------------------------------------------------
    def lock(self) -> None:
        """Take the exclusive writer lock (``flock`` on the directory). Raises
        :class:`LogLockedError` if another writer holds it, in this process or another."""
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogLockedError(f"{self.path} is open for writing elsewhere (its lock is held)") from None
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the fd releases the flock
            self._lock_fd = None

    # -- clean-shutdown marker ---------------------------------------------------------------
    def take_clean_shutdown_marker(self) -> bool:
        """True if the last writer closed cleanly; removes the marker (before any write),
        so a crash from now on counts as unclean."""
        marker = os.path.join(self.path, CLEAN_SHUTDOWN_FILE)
        if not os.path.exists(marker):
            return False
        self.io.remove(marker)
        self.io.fsync_dir(self.path)
        return True

    def has_clean_shutdown_marker(self) -> bool:
        return os.path.exists(os.path.join(self.path, CLEAN_SHUTDOWN_FILE))

    def write_clean_shutdown_marker(self) -> None:
        """Written last on close, after every file was flushed."""
        data = json.dumps({"version": 0, "brokerEpoch": -1}).encode()
        self.io.write_file(os.path.join(self.path, CLEAN_SHUTDOWN_FILE), data)

    # -- checkpoints ----------------------------------------------------------------------------
    def read_offsets(self) -> dict[str, int | None]:
        """This partition's recovery point, log start offset and high watermark from the
        log dir's checkpoint files (None where absent or unreadable, as Kafka resets)."""
        out = {}
        for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
            try:
                out[name] = OffsetCheckpoint(os.path.join(self.log_dir, name), io=self.io).read().get(self.key)
            except (CorruptCheckpointError, OSError):
                out[name] = None
        return out

    def write_offsets(self, values: dict[str, int]) -> None:
        """Set this partition's lines in the given checkpoint files (tmp, fsync, rename),
        under a lock on the log dir so concurrent partitions do not lose each other's lines."""
        fd = os.open(self.log_dir, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            for name, offset in values.items():
                cp = OffsetCheckpoint(os.path.join(self.log_dir, name), io=self.io)
                try:
                    entries = cp.read()
                except CorruptCheckpointError:
                    entries = {}
                if entries.get(self.key) == offset:
                    continue
                entries[self.key] = offset
                cp.write(entries)
        except OSError as e:
            raise StorageError(e.errno, f"cannot write checkpoints in {self.log_dir}: {e.strerror}") from None
        finally:
            os.close(fd)  # releases the flock
