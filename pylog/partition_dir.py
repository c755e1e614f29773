"""What a partition directory keeps besides its segments: its name, its writer lock and
the log dir's clean-shutdown marker (both kept by pylog/log_dir.py), and its entries in the
log dir's checkpoint files (docs/format/checkpoints.md).

Kafka keeps recovery points, log start offsets and high watermarks in files at the
log-dir root (the partition directory's parent), one line per partition. pylog does
the same, updating its own line with a read-modify-write under a lock on the parent
directory, so several partitions (and processes) can share one log dir.
"""

from __future__ import annotations

import base64
import errno
import os
import re
import stat
import uuid

from pylog.checkpoint import OffsetCheckpoint, read_partition_metadata, write_partition_metadata
from pylog.errors import (
    CorruptCheckpointError, InvalidArgumentError, InvalidTopicError, LogDirNotFoundError, PylogError,
    StorageError,
)
from pylog.io import DEFAULT_IO, FileIO
from pylog.platform import require_posix
from pylog.layout import (
    CLEAN_SHUTDOWN_FILE, INT32_MAX, LOG_START_OFFSET_CHECKPOINT, LOG_SUFFIX, PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
)
from pylog.log_dir import LogDirWriters, has_marker, has_writer, lock_partition, log_dir_mutex

#: Files only a log dir holds (at its root, beside its partition directories), never a partition.
LOG_DIR_FILES = frozenset((RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT))
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


def partition_dir_name(topic: str, partition: int) -> str:
    """``("orders", 3)`` -> ``"orders-3"``: the directory of a topic's partition in a log
    dir (the inverse of :func:`parse_partition_dir`)."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)``: split at the last ``-`` as Kafka does."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not (part.isascii() and part.isdigit()) or int(part) > INT32_MAX:
        raise InvalidTopicError(
            f"partition directory {name!r} is not named <topic>-<partition> (for example orders-0)")
    return validate_topic(topic), int(part)


#: What Kafka renames a partition directory to: ``<topic>-<partition>.<uuid hex>-delete``
#: (deleted, removed later), ``-future`` (being moved to another log dir) and ``-stray``
#: (a replica the cluster no longer assigns here). No longer a partition of the log dir.
_RENAMED_PARTITION_DIR = re.compile(r".+-[0-9]+\.[0-9a-f]{32}-(delete|future|stray)")


def is_renamed_partition_dir(name: str) -> bool:
    """Whether the directory ``name`` is a partition Kafka (or pylog) renamed away: a
    topic being deleted, a replica moving to another log dir, a stray replica."""
    return _RENAMED_PARTITION_DIR.fullmatch(name) is not None


def is_log_dir(path: str) -> bool:
    """Whether ``path`` is a log dir: it holds one of the checkpoint files only a log dir
    has, or a directory named like a partition (a partition directory holds no directory).
    A replica set's ``broker-<id>`` directories are log dirs, though their names read like
    partitions of a topic "broker". One ``listdir``, and a ``stat`` per name that looks
    like a partition's."""
    names = os.listdir(path)
    if not LOG_DIR_FILES.isdisjoint(names):
        return True
    return any(n.rpartition("-")[2].isdigit() and os.path.isdir(os.path.join(path, n)) for n in names)


def is_partition_dir(path: str) -> bool:
    """Whether ``path`` is a directory holding ``.log`` files. One ``listdir``."""
    return os.path.isdir(path) and any(n.endswith(LOG_SUFFIX) for n in os.listdir(path))


def nested_log_dirs(path: str) -> list[str]:
    """The names of the log dirs directly inside ``path``, sorted: a replica set's root holds
    one per replica (``broker-<id>``); a broker's data directory may hold its log dir."""
    return sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n))
                  and is_log_dir(os.path.join(path, n)))


def directory_path(path) -> str:
    """``path`` (str, bytes or path-like) as an absolute ``str``. Raises :class:`InvalidArgumentError`
    for a NUL byte (no file system takes one), ``TypeError`` for anything not a path."""
    text = os.fsdecode(os.fspath(path))
    if "\0" in text:
        raise InvalidArgumentError(f"path {text!r} contains a NUL byte")
    return os.path.abspath(text)


def ensure_directory(path: str, *, create: bool, what: str) -> None:
    """Check that the absolute ``path`` is a directory, creating it (and its parents) when
    ``create``. Every refusal comes before anything is created: :class:`InvalidArgumentError`
    for a name the file system cannot hold or a file in the way, :class:`LogDirNotFoundError`
    when it is missing and not to be created, :class:`StorageError` when the file system
    refuses (permissions, a full or read-only disk). Cost: one stat, plus mkdirs."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            return
        raise InvalidArgumentError(f"{what} {path} is a file, not a directory")
    except FileNotFoundError:
        pass
    except OSError as e:
        raise _path_error(e, path, what) from None
    if not create:
        raise LogDirNotFoundError(errno.ENOENT, f"no {what}", path)
    _check_name_lengths(path, what)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise _path_error(e, path, what) from None


def _check_name_lengths(path: str, what: str) -> None:
    """The file system's NAME_MAX and PATH_MAX, checked before any directory is made, so a
    name too long never leaves its parents behind."""
    name_max = _pathconf(path, "PC_NAME_MAX", 255)
    path_max = _pathconf(path, "PC_PATH_MAX", 4096)
    if len(os.fsencode(path)) >= path_max:
        raise InvalidArgumentError(f"{what} path is {len(os.fsencode(path))} bytes, at least PATH_MAX {path_max}")
    for part in path.split(os.sep):
        if len(os.fsencode(part)) > name_max:
            raise InvalidArgumentError(
                f"{what} path component {part[:40]!r}... is {len(os.fsencode(part))} bytes, "
                f"longer than NAME_MAX {name_max}")


def _pathconf(path: str, name: str, default: int) -> int:
    """A limit from the nearest existing ancestor of ``path``, or ``default``."""
    parent = os.path.dirname(path)
    while parent and not os.path.isdir(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    try:
        return os.pathconf(parent or os.sep, name)
    except (OSError, ValueError):
        return default


def _path_error(e: OSError, path: str, what: str) -> Exception:
    """The pylog error for an OSError naming ``path``: a bad name, or the file system's refusal."""
    if e.errno in (errno.ENAMETOOLONG, errno.ENOTDIR, errno.EEXIST, errno.ELOOP):
        return InvalidArgumentError(f"{what} {path} cannot be a directory: {e.strerror}")
    return StorageError(e.errno, f"cannot use {what} {path}: {e.strerror}")


class PartitionDir:
    """A partition directory and its log dir. Holds the writer lock while open."""

    def __init__(self, path, *, io: FileIO = DEFAULT_IO):
        self.path = directory_path(path)
        self.log_dir = os.path.dirname(self.path)
        self.topic, self.partition = parse_partition_dir(os.path.basename(self.path))
        self.name = os.path.basename(self.path)
        self.key = (self.topic, self.partition)
        self.io = io
        self._writers: LogDirWriters | None = None

    @classmethod
    def open(cls, path, *, io: FileIO = DEFAULT_IO, create: bool) -> "PartitionDir":
        """The partition directory ``path``, its name checked before the disk is touched;
        created when missing and ``create`` (see :func:`ensure_directory` for the errors)."""
        pdir = cls(path, io=io)
        ensure_directory(pdir.path, create=create, what="partition directory")
        return pdir

    # -- writer lock and clean-shutdown marker (both belong to the log dir: pylog/log_dir.py) ----
    def lock(self) -> None:
        """Take the exclusive writer lock. Raises :class:`LogLockedError` if another writer
        holds it, in this process or another, :class:`UnsupportedPlatformError` off Linux
        and macOS."""
        require_posix("the partition writer lock")
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

    def has_live_writer(self) -> bool:
        """Whether this partition is open for writing (here or in another process)."""
        return has_writer(self.log_dir, self.name)

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

    def write_offsets(self, values: dict[str, int | None]) -> None:
        """Set this partition's lines in the given checkpoint files (tmp, fsync, rename),
        under a lock on the log dir so concurrent partitions do not lose each other's lines.
        None removes the line (a deleted partition)."""
        try:
            with log_dir_mutex(self.log_dir):
                self._write_offsets(values)
        except OSError as e:
            raise StorageError(e.errno, f"cannot write checkpoints in {self.log_dir}: {e.strerror}") from None

    def _write_offsets(self, values: dict[str, int | None]) -> None:
        """:meth:`write_offsets` under the log dir's lock."""
        for name, offset in values.items():
            cp = OffsetCheckpoint(os.path.join(self.log_dir, name), io=self.io)
            try:
                entries = cp.read()
            except CorruptCheckpointError:
                entries = {}
            if entries.get(self.key) == offset:
                continue
            if offset is None:
                del entries[self.key]
            else:
                entries[self.key] = offset
            cp.write(entries)


# -- topic ids (partition.metadata) ---------------------------------------------------------------

def topic_id_of(manager, name: str) -> str | None:
    """The topic id in the first partition's ``partition.metadata`` that has one, or None."""
    for p in manager.partitions(name):
        path = os.path.join(manager.root, partition_dir_name(name, p), PARTITION_METADATA)
        try:
            return read_partition_metadata(path)["topic_id"]
        except (OSError, PylogError):
            continue
    return None


def write_topic_id(manager, name: str, topic_id: str) -> None:
    """A ``partition.metadata`` in every partition of ``name`` lacking one, as Kafka writes it."""
    for p in manager.partitions(name):
        path = os.path.join(manager.root, partition_dir_name(name, p), PARTITION_METADATA)
        if not os.path.exists(path):
            write_partition_metadata(path, topic_id, io=manager.io)


def new_topic_id() -> str:
    """A random id written as Kafka writes one: URL-safe base64 of 16 bytes, no padding, not
    starting with '-' (Kafka draws again then)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
