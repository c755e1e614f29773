"""What a partition directory keeps besides its segments: its name, its writer lock and
the log dir's clean-shutdown marker (both kept by pylog/log_dir.py), and its entries in the
log dir's checkpoint files (docs/format/checkpoints.md).

Kafka keeps recovery points, log start offsets and high watermarks in files at the
log-dir root (the partition directory's parent), one line per partition. pylog does
the same, updating its own line with a read-modify-write under a lock on the parent
directory, so several partitions (and processes) can share one log dir.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re

from pylog.checkpoint import OffsetCheckpoint
from pylog.errors import CorruptCheckpointError, InvalidTopicError, StorageError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import (
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from pylog.log_dir import LogDirWriters, has_marker, lock_partition

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
        self.name = os.path.basename(self.path)
        self.key = (self.topic, self.partition)
        self.io = io
        self._writers: LogDirWriters | None = None

    # -- writer lock and clean-shutdown marker (both belong to the log dir: pylog/log_dir.py) ----
    def lock(self) -> None:
        """Take the exclusive writer lock. Raises :class:`LogLockedError` if another writer
        holds it, in this process or another."""
        self._writers = lock_partition(self.log_dir, self.name, self.io)

    def unlock(self, *, clean: bool = False) -> None:
        """Release the writer lock. ``clean``: the log was flushed and closed, so the log dir's
        marker is written back if no other writer is left and every partition is known clean."""
        if self._writers is not None:
            writers, self._writers = self._writers, None
            writers.unlock(self.name, clean=clean)

    def take_clean_shutdown_marker(self) -> bool:
        """On a writable open (lock held): True if recovery may be skipped. The log dir's
        marker is removed before any write, so a crash from now on counts as unclean. A
        marker inside the partition directory (written by earlier pylog versions; Kafka never
        has one) is ignored and removed."""
        self.io.remove(os.path.join(self.path, CLEAN_SHUTDOWN_FILE))
        return self._writers.take_marker(self.name)

    def has_clean_shutdown_marker(self) -> bool:
        """Whether the log dir's marker is present (what a read-only open reports)."""
        return has_marker(self.log_dir)

    # -- checkpoints ----------------------------------------------------------------------------
    def read_offsets(self) -> dict[str, int | None]:
        """This partition's recovery point, log start offset and high watermark from the
        log dir's checkpoint files (None where absent or unreadable, as Kafka resets)."""
        out = {}
        for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
            try:
                out[name] = OffsetCheckpoint(os.path.join(self.log_dir, name), io=self.io).read().get(self.key)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):  # no descriptor left: the file is not unreadable
                    raise StorageError(e.errno, f"cannot read {name} in {self.log_dir}: {e.strerror}") from None
                out[name] = None
            except CorruptCheckpointError:
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
