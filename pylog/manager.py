"""``LogManager``: a Kafka log dir holding many ``<topic>-<partition>`` directories, and
``Topic``, which spreads appends over a topic's partitions with Kafka's default
partitioner (docs/internals.md#log-dir).

Topic settings are not part of Kafka's on-disk layout (a cluster keeps them in its
metadata); pylog keeps each topic's overrides in ``topic-configs.json`` at the root so
they survive a reopen. Logs are opened on first use and kept open until ``close()``;
their segments share one bound on open files (``max_open_files``), so a process can keep
thousands of partitions open under a small descriptor limit. The log dir's clean-shutdown
marker is kept by the logs themselves (pylog/log_dir.py).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import threading
import uuid
import warnings
import weakref

from pylog.arguments import check_append_options, check_int, check_records_iterable
from pylog.closing import close_all
from pylog.config import LogConfig, build_config
from pylog.errors import (
    InvalidConfigError, InvalidPartitionsError, InvalidRecordError, LogDirNotFoundError, PylogWarning, ReadOnlyError,
    StorageError, UnknownTopicError,
)
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import (
    INT32_RANGE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REMOTE_LOG_METADATA_TOPIC,
    REPLICATION_OFFSET_CHECKPOINT,
)
from pylog.log import AppendInfo, Log
from pylog.log.local import release_unflushed
from pylog.logdir.metadata import LogDirMetadata
from pylog.partition_dir import PartitionDir, directory_path, ensure_directory, partition_dir_name, validate_topic
from pylog.partitioner import partition_for_key
from pylog.record.encode import check_record
from pylog.record.record import as_record
from pylog.remote.location import check_read_only, local_path, remote_target
from pylog.remote.store import is_url, redact
from pylog.retention.cleaner import Cleaner
from pylog.segment.open_files import OpenFiles

MAX_PARTITIONS = 100_000
#: The log dir's checkpoint files, each with a line per partition.
CHECKPOINT_FILES = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)


class LogManager:
    """Every partition log under ``root``.

    >>> import tempfile
    >>> with LogManager(tempfile.mkdtemp()) as m:
    ...     t = m.create_topic("events", partitions=3)
    ...     _ = t.append([(b"user-1", b"login")])
    ...     sorted(m.topics())
    ['events']
    """

    def __new__(cls, root=None, *args, read_only: bool = False, storage_options: dict | None = None,
                remote_log_metadata=None, encryption_key=None, **kwargs):
        """An object-store URL (``s3://``, ``gs://``, ``az://``, ``abfss://``; ``file://`` of a
        tiered layout) opens a read-only :class:`~pylog.remote.log_dir.RemoteLogDir` there
        (``storage_options``: fsspec's, as pandas takes them; ``remote_log_metadata``: where
        the ``__remote_log_metadata`` partitions are; ``encryption_key``: the key pair of
        encrypted Aiven segments; docs/tiered.md)."""
        if remote_target(root) is None:
            return super().__new__(cls)
        check_read_only(read_only, root)
        from pylog.remote.log_dir import RemoteLogDir
        return RemoteLogDir(root, storage_options=storage_options, remote_log_metadata=remote_log_metadata,
                            encryption_key=encryption_key)

    def __init__(self, root, config: LogConfig | dict | None = None, *, read_only: bool = False,
                 io: FileIO | None = None, max_open_files: int | None = None, remote_storage=None,
                 storage_options: dict | None = None, remote_log_metadata=None, encryption_key=None, **overrides):
        """``max_open_files``: file descriptors the segments of all its logs may hold at once
        (default: half the process's ``RLIMIT_NOFILE``, at most 1,000; least recently used
        segments give theirs back, see :class:`OpenFiles`). ``remote_storage``: an
        object-store URL (``storage_options``: fsspec's) to which a writable manager tiers the
        topics configured ``remote_storage_enable``, every ``remote_log_manager_task_interval_ms``
        and on :meth:`tier` (:class:`~pylog.remote.manager.RemoteLogManager`)."""
        self.root = directory_path(local_path(root) if isinstance(root, str) else root)
        self.config = build_config(config, overrides)
        self.read_only = read_only
        self.io = io or DEFAULT_IO
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], Log] = {}
        self._open_files = OpenFiles(max_open_files)
        ensure_directory(self.root, create=not read_only, what="log dir")
        self.metadata = LogDirMetadata.for_root(self.root)
        self.metadata.all_overrides()  # a topic-configs.json that does not parse fails here
        self._cleaner = None
        finalizer = weakref.finalize(self, _release_unclosed_logs, self._logs, self.root)
        finalizer.atexit = False  # as a dropped file: released when collected, not at exit
        # -- tiering (pylog/remote/manager.py) --------------------------------------------------
        self.remote_storage, self.storage_options = remote_storage, storage_options
        self.remote_log_metadata, self._encryption_key = remote_log_metadata, encryption_key
        self._remote_log_manager = None
        self._remote_log_dir = None  # the logs' remote parts (pylog/log/tiered.py), listed on first use
        if remote_storage is not None and not read_only:
            from pylog.remote.manager import RemoteLogManager
            self._remote_log_manager = RemoteLogManager(self, remote_storage, storage_options=storage_options)
            self._remote_log_manager.start()
        # -- end of tiering ----------------------------------------------------------------------

    @classmethod
    def open_existing(cls, root, *, read_only: bool, storage_options: dict | None = None,
                      remote_log_metadata=None) -> "LogManager":
        """A manager of the existing log dir ``root`` (the CLI's and Spark's one way in), or,
        for a URL (``s3://``, ``s3a://``, ``gs://``, ``az://``, ``abfss://``, ``file://``), the
        read-only log dir there, opened with ``storage_options`` (fsspec's; credentials
        otherwise come from the standard environment) and ``remote_log_metadata``. Raises
        :class:`LogDirNotFoundError` when there is none: not even a writer creates it. Cost
        for a URL: one listing of the objects under it."""
        if is_url(root):
            remote = {k: v for k, v in (("storage_options", storage_options),
                                        ("remote_log_metadata", remote_log_metadata)) if v is not None}
            manager = cls(root, read_only=read_only, **remote)
            if isinstance(manager, LogManager) or manager.topics():
                return manager
            manager.close()
            raise LogDirNotFoundError(f"no Kafka data at {redact(root)}: no partition's objects under it "
                                      f"(check the bucket and prefix)")
        if not os.path.isdir(root):
            raise LogDirNotFoundError(f"no log dir at {root}")
        return cls(root, read_only=read_only)

    # -- discovery (the log dir's metadata, pylog/logdir/metadata.py) -------------------------
    def _partition_dirs(self) -> dict[str, list[int]]:
        return self.metadata.partition_dirs()

    def topics(self) -> list[str]:
        """Names of the topics present (sorted)."""
        return self.metadata.topics()

    def partitions(self, topic: str) -> list[int]:
        """Partition numbers of ``topic``; raises :class:`UnknownTopicError` if absent."""
        return self.metadata.partitions(topic)

    def topic_config(self, topic: str) -> LogConfig:
        """The manager's config with the topic's overrides applied (as topic-configs.json
        holds them now)."""
        return self.metadata.topic_config(topic, self.config)

    def topic_overrides(self, topic: str) -> dict:
        """The topic's own settings (field names and values), as topic-configs.json holds them."""
        return self.metadata.topic_overrides(topic)

    # -- topics --------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, config: LogConfig | dict | None = None, *,
                     validate_only: bool = False) -> "Topic | None":
        """Create ``partitions`` partition directories (idempotent for an existing topic of
        the same size). ``config``: overrides for this topic, kept in topic-configs.json.
        Raises :class:`InvalidTopicError` for the name, :class:`InvalidPartitionsError`
        for the count and :class:`InvalidConfigError` for the settings, before touching the
        disk; with ``validate_only`` (Kafka's CreateTopics option) that is all it does, and
        it returns None."""
        validate_topic(name)
        if not isinstance(partitions, int) or isinstance(partitions, bool) or not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"partitions must be an int in [1, {MAX_PARTITIONS}], got {partitions!r}")
        overrides = _overrides_of(config)
        build_config(self.config, overrides)  # validate before touching the disk
        if validate_only:
            return None
        with self._lock:
            existing = self._partition_dirs().get(name)
            if existing and len(existing) != partitions:
                raise InvalidConfigError(f"topic {name!r} already exists with {len(existing)} partitions")
            self._update_topic_overrides(name, lambda current: overrides if overrides or current is None else current)
            for p in range(partitions):
                self._create_partition(name, p)
        return Topic(self, name)

    def set_topic_config(self, name: str, config: LogConfig | dict) -> None:
        """Record ``config`` as topic ``name``'s overrides in topic-configs.json (Kafka's
        AlterConfigs), checked before anything is written; logs opened from now on use them.
        Opens no log, so a topic can be declared before its partitions hold files.
        Other topics' entries are kept as the file holds them now (see
        :meth:`alter_topic_config`). Cost: one locked read and one fsynced write of the file."""
        with self._lock:
            self.metadata.set_topic_config(name, _overrides_of(config), defaults=self.config, io=self.io)

    def alter_topic_config(self, name: str, changes: dict | None = None, *, remove=(),
                           validate_only: bool = False) -> dict:
        """Set ``changes`` (field names and values) and take the fields named in ``remove``
        back to the manager's defaults in topic ``name``'s overrides, keeping the others
        (Kafka's IncrementalAlterConfigs); returns the overrides now recorded. The file is
        read again and written under the log dir's lock of topic-configs.json, which every
        writer in every process takes, so concurrent changes to other fields or topics are
        kept; the result is checked whole before anything is written
        (:class:`InvalidConfigError`). The topic's logs this manager holds open take the new
        settings at once (:meth:`Log.update_config`), as a Kafka broker's do. Durable on
        return. With ``validate_only`` (Kafka's option) the result is checked and returned,
        and nothing changes. Cost: as :meth:`set_topic_config`."""
        with self._lock:
            recorded = self.metadata.alter_topic_config(name, changes, remove=remove, defaults=self.config,
                                                        io=self.io, validate_only=validate_only)
            if not validate_only:
                config = self.topic_config(name)
                for (topic, _), log in self._logs.items():
                    if topic == name:
                        log.update_config(config)
            return recorded

    def add_partitions(self, name: str, partitions: int, *, validate_only: bool = False) -> "Topic | None":
        """Grow topic ``name`` to ``partitions`` partitions (Kafka's CreatePartitions: a
        topic only grows, so keys map to other partitions from now on). Raises
        :class:`InvalidPartitionsError` for a count that is not larger, before touching the
        disk; with ``validate_only`` that check is all it does, and it returns None.
        Cost: one directory per new partition."""
        current = len(self.partitions(name))
        if not isinstance(partitions, int) or isinstance(partitions, bool) or not current < partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"the number of partitions of a topic can only be increased: topic {name!r} has {current} "
                f"partition(s), {partitions!r} would not be an increase (at most {MAX_PARTITIONS})")
        if validate_only:
            return None
        with self._lock:
            for p in range(current, partitions):
                self._create_partition(name, p)
        return Topic(self, name)

    def delete_topic(self, name: str) -> list[str]:
        """Delete every partition directory of topic ``name``, its lines in the log dir's
        checkpoints and its settings; returns the directories removed. Each partition's
        writer lock is taken first, so a topic another process writes is refused with
        :class:`LogLockedError` and nothing is deleted. As Kafka does, a directory is first
        renamed ``<topic>-<partition>.<id>-delete`` (no longer a partition), then removed.
        With ``remote_storage``, the partitions' tiered segments are deleted first (a store
        failure raises and leaves the local topic whole). Not reversible. Cost: O(files of
        the topic), plus a DELETE per remote object."""
        parts = self.partitions(name)
        if self.read_only:
            raise ReadOnlyError(f"cannot delete topic {name!r}: the log dir {self.root} is open read-only")
        tiering = self._remote_log_manager
        with tiering.paused() if tiering is not None else contextlib.nullcontext(), self._lock:
            logs = [self.log(name, p) for p in parts]  # every writer lock, or an error before any change
            if tiering is not None:
                tiering.delete_partitions(logs)
            removed = []
            for log in logs:
                pdir = PartitionDir(log.path, io=self.io)
                log.close()
                del self._logs[(name, log.partition)]
                doomed = f"{log.path}.{uuid.uuid4().hex}-delete"
                self.io.rename(log.path, doomed)
                pdir.write_offsets({n: None for n in CHECKPOINT_FILES})
                shutil.rmtree(doomed)
                removed.append(log.path)
            self._update_topic_overrides(name, lambda current: None)
        return removed

    def topic(self, name: str) -> "Topic":
        """The existing topic ``name``."""
        self.partitions(name)
        return Topic(self, name)

    def log(self, topic: str, partition: int, *, create: bool = False) -> Log:
        """The open :class:`Log` of ``topic``-``partition`` (opened on first use)."""
        validate_topic(topic)
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise UnknownTopicError(f"partition must be a non-negative int, got {partition!r}")
        key = (topic, partition)
        with self._lock:
            log = self._logs.get(key)
            if log is not None:
                return log
            path = os.path.join(self.root, partition_dir_name(topic, partition))
            if not os.path.isdir(path) and (not create or self.read_only):
                raise UnknownTopicError(f"no partition {topic}-{partition} in {self.root}")
            log = Log.open(path, self.topic_config(topic), read_only=self.read_only, io=self.io,
                           open_files=self._open_files)
            self._attach_remote(log)
            self._logs[key] = log
            return log

    # -- the remote part of each log (pylog/log/tiered.py) ----------------------------------
    def _attach_remote(self, log: Log) -> None:
        """Give ``log`` its tiered segments in ``remote_storage`` (none there: none)."""
        if self.remote_storage is None or log.topic == REMOTE_LOG_METADATA_TOPIC:  # the metadata is never tiered
            return
        try:
            if self._remote_log_dir is None:
                metadata = self.remote_log_metadata
                if metadata is None and REMOTE_LOG_METADATA_TOPIC in self.topics():  # this log dir tiers its own logs
                    tiering = self._remote_log_manager  # its records as its tiering wrote them, in memory
                    metadata = self.root if tiering is None else tiering.metadata
                from pylog.remote.log_dir import RemoteLogDir
                self._remote_log_dir = RemoteLogDir(self.remote_storage, storage_options=self.storage_options,
                                                    remote_log_metadata=metadata, encryption_key=self._encryption_key)
            log.remote = self._remote_log_dir.log(log.topic, log.partition)
        except UnknownTopicError:
            log.remote = None
        except StorageError as e:  # the store is down: the local log works on, its remote part comes back later
            log.remote = None
            warnings.warn(f"{log.topic}-{log.partition}: its tiered segments are unreachable, so reads below its "
                          f"local log start fail until a tiering round lists them again: {e}", PylogWarning,
                          stacklevel=3)

    def refresh_remote(self) -> None:
        """List ``remote_storage`` again and give every open log its tiered segments as they
        are now (after a tiering round copied or deleted some). Cost: one listing."""
        with self._lock:
            if self.remote_storage is None:
                return
            self._remote_log_dir = None  # not closed: reads in progress finish on it (it holds no descriptor)
            for log in self._logs.values():
                self._attach_remote(log)

    def _create_partition(self, topic: str, partition: int) -> None:
        """Make the directory and files of ``topic``-``partition`` and close it again (one
        already open stays open): creating a topic holds no lock or descriptor afterwards."""
        if (topic, partition) in self._logs or self.read_only:
            self.log(topic, partition, create=True)  # read-only: an existing one, or UnknownTopicError
            return
        path = os.path.join(self.root, partition_dir_name(topic, partition))
        Log.open(path, self.topic_config(topic), io=self.io, open_files=self._open_files).close()

    def logs(self) -> list[Log]:
        """Every partition log, opened."""
        return [self.log(t, p) for t, parts in sorted(self._partition_dirs().items()) for p in parts]

    # -- maintenance -----------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every open writable log (see :meth:`Log.flush`)."""
        for log in list(self._logs.values()):
            if not log.read_only:
                log.flush()

    def start_cleaner(self, interval_ms: int | None = None):
        """Start the background thread that applies retention and compaction to every log,
        each every ``interval_ms``, or by default every ``retention_check_interval_ms`` of
        its config (:class:`~pylog.retention.cleaner.Cleaner`)."""
        with self._lock:
            if self._cleaner is None:
                self._cleaner = Cleaner(self.logs, interval_ms=interval_ms)
                self._cleaner.start()
            return self._cleaner

    def tier(self, now_ms: int | None = None):
        """Run one round of tiering now (copy closed segments of the topics configured
        ``remote_storage_enable``, then local and total retention) and return when it is
        done, with what it did (:class:`~pylog.remote.manager.TierResult`). Raises the
        first failure (a :class:`StorageError` while the store is down) after every log had
        its turn; local segments not copied stay. Cost: an upload of each segment to copy."""
        if self._remote_log_manager is None:
            raise InvalidConfigError(f"the log dir {self.root} has no remote_storage to tier to"
                                     + (" (it is open read-only)" if self.read_only else ""))
        result = self._remote_log_manager.run_once(now_ms)
        self.refresh_remote()
        if result.errors:
            raise result.errors[0][1]
        return result

    def close(self) -> None:
        """Close every log: each flushes, and the last to close writes the log dir's
        clean-shutdown marker when every partition is known clean (pylog/log_dir.py).
        A log whose close fails (a full disk) is released all the same, the others are
        closed, then the first failure is raised."""
        if self._remote_log_manager is not None:  # before the lock: a round in progress takes it
            self._remote_log_manager.stop()
        if self._remote_log_dir is not None:
            self._remote_log_dir.close()
        with self._lock:
            if self._cleaner is not None:
                self._cleaner.stop()
                self._cleaner = None
            logs = list(self._logs.values())
            self._logs.clear()  # the same dict: what a dropped manager releases
            close_all(log.close for log in logs)

    def __enter__(self) -> "LogManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _update_topic_overrides(self, name: str, change) -> dict:
        """:meth:`LogDirMetadata.update_topic_config` (under the cross-process lock of
        topic-configs.json), checked against this manager's config and written through its io."""
        with self._lock:
            return self.metadata.update_topic_config(name, change, defaults=self.config, io=self.io)


def _release_unclosed_logs(logs: dict, root: str) -> None:
    """A ``LogManager`` garbage-collected without ``close()``: its open logs are released
    (descriptors and writer locks, unflushed, so their next open recovers them), with one
    ``ResourceWarning``, as Python closes a dropped file."""
    if logs:
        warnings.warn(f"unclosed LogManager of {root} (its {len(logs)} open logs are released unflushed)",
                      ResourceWarning, stacklevel=2)
        close_all(lambda log=log: release_unflushed(log) for log in logs.values())
        logs.clear()


class Topic:
    """A topic of a :class:`LogManager`: appends partitioned as Kafka's default partitioner does."""

    def __init__(self, manager: LogManager, name: str):
        self.manager = manager
        self.name = name
        self._round_robin = itertools.count()

    @property
    def partitions(self) -> list[int]:
        """This topic's partition numbers, sorted."""
        return self.manager.partitions(self.name)

    def log(self, partition: int) -> Log:
        """The open :class:`~pylog.log.Log` of one partition of this topic."""
        return self.manager.log(self.name, partition)

    def partition_for(self, key: bytes | None) -> int:
        """Where a record with ``key`` goes: murmur2 for a key, round-robin for None."""
        n = len(self.partitions)
        if key is None:
            return next(self._round_robin) % n
        return partition_for_key(key, n)

    def append(self, records, partition: int | None = None, **options) -> dict[int, AppendInfo]:
        """Append records: to ``partition`` if given, else each keyed record to murmur2(key)
        mod partitions and the null-keyed ones, as one batch, to the next partition in
        turn. One batch per partition touched. Returns ``{partition: AppendInfo}``.
        Bad options and records are refused before any partition is written; a limit one
        partition's log enforces (``max_message_bytes``) leaves the partitions before it
        appended, as separate Kafka produce requests would."""
        check_append_options(**options)
        parts = self.partitions
        if partition is not None:
            check_int(partition, "partition", INT32_RANGE)
            if partition not in parts:
                raise UnknownTopicError(f"topic {self.name!r} has no partition {partition}")
            return {partition: self.log(partition).append(records, **options)}
        groups: dict[int, list] = {}
        null_target = None
        check_records_iterable(records)
        compacted = self.manager.topic_config(self.name).compact
        for item in records:
            rec = check_record(as_record(item))
            if rec.key is None:
                if compacted:
                    raise InvalidRecordError("compacted topic cannot accept a record without a key")
                if null_target is None:
                    null_target = next(self._round_robin) % len(parts)
                p = null_target
            else:
                p = partition_for_key(rec.key, len(parts))
            groups.setdefault(p, []).append(rec)
        return {p: self.log(p).append(group, **options) for p, group in sorted(groups.items())}

    def __repr__(self) -> str:
        return f"Topic({self.name!r})"


def _overrides_of(config) -> dict:
    if config is None:
        return {}
    if isinstance(config, dict):
        return dict(config)
    if isinstance(config, LogConfig):
        default = LogConfig()
        return {k: v for k, v in vars(config).items() if getattr(default, k) != v}
    raise InvalidConfigError(f"config must be a LogConfig or dict, not {type(config).__name__}")
