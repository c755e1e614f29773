"""``LogDirMetadata``: the topics of a local log dir, their partitions and their settings,
as every process reads and changes them (Kafka keeps this in its cluster metadata; a log
dir holds it in its directory names and ``topic-configs.json``).

- A topic's partitions are its ``<topic>-<partition>`` directories (Kafka's rule; an empty
  directory is an empty partition, which its first writer fills). Where the root holds no
  checkpoint yet (new, or a replica set's root), a directory that is itself a log dir is
  skipped.
- A topic's settings are its overrides in ``topic-configs.json``, a JSON object of
  ``{topic: {field: value}}``. Every change reads the file again and replaces it (tmp,
  fsync, rename) under one cross-process lock, a byte of ``.pylog-clients.lock``
  (:func:`topic_configs_lock`), so concurrent changes from several processes (managers,
  ``pylog configs --alter``, the coordinators creating their internal topics) lose none.

One instance per log dir and process (:meth:`LogDirMetadata.for_root`) keeps what it
read, and reads again only when a ``stat`` says the directory or the file changed
(:class:`~pylog.stat_watch.StatWatch`): a lookup costs one ``stat``, a change one listing
or one read of the file. Thread-safe.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager

from pylog.config import LogConfig, build_config
from pylog.errors import InvalidConfigError, InvalidTopicError, UnknownTopicError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import CLIENTS_LOCK_FILE, TOPIC_CONFIGS_FILE
from pylog.locks import name_lock
from pylog.partition_dir import LOG_DIR_FILES, is_log_dir, parse_partition_dir, partition_dir_name, validate_topic
from pylog.stat_watch import StatWatch

@contextmanager
def topic_configs_lock(root: str):
    """Hold the log dir's lock of ``topic-configs.json``: one byte of the clients' lock
    file, exclusive against every other holder, in this process or another (OFD locks; the
    kernel releases it when a process dies). Not reentrant."""
    with name_lock(os.path.join(root, CLIENTS_LOCK_FILE), TOPIC_CONFIGS_FILE):
        yield


class LogDirMetadata:
    """The topics of the local log dir ``root`` (an existing directory)."""

    _instances: dict[str, "LogDirMetadata"] = {}
    _instances_lock = threading.Lock()

    @classmethod
    def for_root(cls, root) -> "LogDirMetadata":
        """This process's instance for ``root`` (made on first use, kept for the process)."""
        key = os.path.realpath(root)
        with cls._instances_lock:
            instance = cls._instances.get(key)
            if instance is None:
                instance = cls._instances[key] = cls(key)
            return instance

    def __init__(self, root):
        self.root = os.fspath(root)
        self._configs_path = os.path.join(self.root, TOPIC_CONFIGS_FILE)
        self._lock = threading.RLock()
        self._listing = StatWatch([self.root])
        self._partitions: dict[str, list[int]] = {}
        self._configs = StatWatch([self._configs_path])
        self._overrides: dict[str, dict] = {}

    # -- partitions --------------------------------------------------------------------------
    def partition_dirs(self) -> dict[str, list[int]]:
        """Partition numbers by topic (a copy). One ``stat``; a listing when the root changed."""
        with self._lock:
            if self._listing.changed():
                self._listing.mark()
                self._partitions = _list_partitions(self.root)
            return {t: list(p) for t, p in self._partitions.items()}

    def topics(self) -> list[str]:
        """Names of the topics present (sorted)."""
        return sorted(self.partition_dirs())

    def partitions(self, topic: str) -> list[int]:
        """Partition numbers of ``topic``; raises :class:`UnknownTopicError` if absent."""
        parts = self.partition_dirs().get(validate_topic(topic))
        if not parts:
            raise UnknownTopicError(f"unknown topic {topic!r} in {self.root}")
        return parts

    def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has (0: no such topic)."""
        return len(self.partition_dirs().get(topic, ()))

    def create_partitions(self, topic: str, partitions: int) -> None:
        """Make the missing directories of partitions ``0..partitions-1`` of ``topic``
        (empty: its first writer creates the files). Cost: a ``mkdir`` per partition."""
        validate_topic(topic)
        for p in range(partitions):
            os.makedirs(os.path.join(self.root, partition_dir_name(topic, p)), exist_ok=True)

    # -- settings ------------------------------------------------------------------------------
    def topic_overrides(self, topic: str) -> dict:
        """The topic's own settings (field names and values), as topic-configs.json holds
        them now. Raises :class:`InvalidConfigError` for a file that does not parse."""
        return dict(self._read_overrides().get(topic, {}))

    def all_overrides(self) -> dict[str, dict]:
        """Every topic's own settings, as topic-configs.json holds them now."""
        return {t: dict(v) for t, v in self._read_overrides().items()}

    def topic_config(self, topic: str, defaults: LogConfig | None = None) -> LogConfig:
        """``defaults`` (pylog's when None) with the topic's overrides applied."""
        return build_config(defaults, self.topic_overrides(topic))

    def set_topic_config(self, topic: str, overrides: dict, *, defaults: LogConfig | None = None,
                         io: FileIO = DEFAULT_IO) -> None:
        """Record ``overrides`` as the topic's settings, replacing its entry (Kafka's
        AlterConfigs); checked against ``defaults`` first. Durable on return."""
        validate_topic(topic)
        build_config(defaults, overrides)
        self.update_topic_config(topic, lambda current: dict(overrides), defaults=defaults, io=io)

    def alter_topic_config(self, topic: str, changes: dict | None = None, *, remove=(),
                           defaults: LogConfig | None = None, io: FileIO = DEFAULT_IO,
                           validate_only: bool = False) -> dict:
        """Set ``changes`` (field names and values) and take the fields named in ``remove``
        back to the defaults in the topic's settings, keeping the others (Kafka's
        IncrementalAlterConfigs); returns the settings now recorded. Concurrent changes to
        other fields or topics, in any process, are kept; the result is checked whole before
        anything is written (:class:`InvalidConfigError`). Durable on return. With
        ``validate_only`` the result is checked and returned, and nothing is written."""
        validate_topic(topic)
        changes, remove = dict(changes or {}), list(remove)
        build_config(defaults, changes)
        unknown = sorted(set(remove) - set(vars(defaults or LogConfig())))
        if unknown:
            raise InvalidConfigError(f"cannot remove unknown setting(s) {', '.join(map(str, unknown))}")

        def altered(current: dict | None) -> dict:
            return {**{k: v for k, v in (current or {}).items() if k not in remove}, **changes}
        return self.update_topic_config(topic, altered, defaults=defaults, io=io, validate_only=validate_only)

    def update_topic_config(self, topic: str, change, *, defaults: LogConfig | None = None,
                            io: FileIO = DEFAULT_IO, validate_only: bool = False) -> dict:
        """Under :func:`topic_configs_lock`: read the file again, replace the topic's entry by
        ``change(current entry or None)`` (None removes it), check it and write the file if it
        changed (not with ``validate_only``). Returns the new entry ({} when removed). Cost:
        one locked read and, on a change, one fsynced write of the file."""
        with self._lock, topic_configs_lock(self.root):
            data = _read_configs(self._configs_path)  # as it is now, whatever was read before
            current = data.get(topic)
            new = change(current)
            if new is not None:
                build_config(defaults, new)
            if new != current and not validate_only:
                if new is None:
                    del data[topic]
                else:
                    data[topic] = new
                io.write_file(self._configs_path, json.dumps(data, indent=1, sort_keys=True).encode())
            return dict(new or {})

    def _read_overrides(self) -> dict[str, dict]:
        with self._lock:
            if self._configs.changed():
                self._configs.mark()
                try:
                    self._overrides = _read_configs(self._configs_path)
                except InvalidConfigError:
                    self._configs = StatWatch([self._configs_path])  # unread: read again next time
                    raise
            return self._overrides


def _read_configs(path: str) -> dict[str, dict]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise InvalidConfigError(f"cannot read {path}: {e}") from None
    return parse_topic_configs(raw, path)


def parse_topic_configs(raw: bytes, where: str) -> dict[str, dict]:
    """The ``{topic: {field: value}}`` of a ``topic-configs.json`` read from ``where``;
    :class:`InvalidConfigError` naming it for anything else."""
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise InvalidConfigError(f"cannot read {where}: {e}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InvalidConfigError(f"{where} does not hold a JSON object of topics' settings")
    return data


def _list_partitions(root: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return out
    may_nest = LOG_DIR_FILES.isdisjoint(names)
    for name in names:
        path = os.path.join(root, name)
        if not os.path.isdir(path) or "." in name.rpartition("-")[2] or may_nest and is_log_dir(path):
            continue
        try:
            topic, part = parse_partition_dir(name)
        except InvalidTopicError:  # not a partition directory: Kafka skips it too
            continue
        out.setdefault(topic, []).append(part)
    return {t: sorted(p) for t, p in out.items()}
