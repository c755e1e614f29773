"""What the subcommands share: opening a root or partition directory, taking a log for
writing from the process that holds it, and table output."""

from __future__ import annotations

import os
import re
from contextlib import ExitStack, contextmanager

from pylog.errors import (
    InputFormatError, InvalidArgumentError, LogDirNotFoundError, LogLockedError, PylogWarning, UnknownTopicError,
)
from pylog.layout import INTERNAL_TOPICS
from pylog.logdir.writers import WriterPool
from pylog.log.list_offset import EARLIEST, LATEST
from pylog.manager import LogManager
from pylog.partition_dir import nested_log_dirs
from pylog.remote.store import ObjectStore, is_url


def no_partitions(path: str, command: str) -> InvalidArgumentError:
    """The error for a ``path`` holding no partition, naming the log dirs inside it when it
    is a replica set's root (one per replica, ``broker-<id>``)."""
    nested = nested_log_dirs(path)
    hint = "" if not nested else (f"; it holds the log dirs {', '.join(nested)} of a replica set: "
                                  f"{command} one of them (pylog {command} {os.path.join(path, nested[0])})")
    return InvalidArgumentError(f"{path} holds no partitions: give a broker log dir or a "
                                f"<topic>-<partition> directory holding .log files{hint}")


def parse_offset_spec(text: str, option: str, names=(EARLIEST, LATEST)) -> str | int:
    """An offset spec given on the command line, for :meth:`Log.list_offset
    <pylog.log.reading.RecordReads.list_offset>`: one of ``names`` as it is, else the int it
    spells (what it means, an offset or a time, is the option's); :class:`InvalidArgumentError`
    naming ``option`` for anything else.

    >>> parse_offset_spec("latest", "--offset"), parse_offset_spec("-2", "--time")
    ('latest', -2)
    """
    if text in names:
        return text
    try:
        return int(text)
    except ValueError:
        raise InvalidArgumentError(f"{option} {text!r} is not {', '.join(names)} or a number") from None


def add_storage_arguments(p) -> None:
    """``--storage-option KEY=VALUE`` (repeatable) and ``--remote-log-metadata``: how a
    command reads a URL (:func:`storage_options`)."""
    p.add_argument("--storage-option", dest="storage_option", action="append", metavar="KEY=VALUE",
                   help="for a URL: an fsspec storage option the environment cannot give (repeatable); a dotted "
                        "KEY nests (client_kwargs.endpoint_url=http://host:9000) and a VALUE that is JSON "
                        "(true, 5, {...}) is read as JSON. Credentials come from the standard environment "
                        "(AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*)")
    p.add_argument("--remote-log-metadata", metavar="PATH_OR_URL",
                   help="for a tiered layout: the log dir holding the __remote_log_metadata partitions, which "
                        "say which remote segments are live")


def storage_options(args) -> dict | None:
    """The ``--storage-option KEY=VALUE`` arguments as fsspec's ``storage_options`` (None
    when none is given). Raises :class:`InvalidArgumentError` for one that is not KEY=VALUE."""
    import json
    out: dict = {}
    for item in getattr(args, "storage_option", None) or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip("."):  # the text is not shown: it may be a secret typed without its KEY=
            raise InvalidArgumentError("a --storage-option is not KEY=VALUE")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        *parents, name = key.split(".")
        place = out
        for parent in parents:
            place = place.setdefault(parent, {})
            if not isinstance(place, dict):
                raise InvalidArgumentError(f"--storage-option {key}: {parent} is given a value and nested keys")
        place[name] = value
    return out or None


def one_line_warnings(command: str) -> None:
    """From now on in this process, a :class:`~pylog.errors.PylogWarning` prints as
    ``pylog COMMAND: warning: ...`` on one line of stderr (others as Python prints them)."""
    import sys
    import warnings

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, PylogWarning):
            print(f"pylog {command}: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)
    warnings.showwarning = show


def open_object_store(url: str, args):
    """The :class:`~pylog.remote.store.ObjectStore` rooted at ``url`` (a directory of
    objects), with the command's ``--storage-option``. No request."""
    return ObjectStore.from_url(url, storage_options(args))


def open_url_manager(args, root: str, *, read_only: bool = True) -> LogManager:
    """:meth:`LogManager.open_existing` with the command's ``--storage-option`` and
    ``--remote-log-metadata``; pylog's warnings while it runs (a tiered layout read without
    its metadata) are said as its errors are, in one line on stderr."""
    if is_url(root):
        one_line_warnings(args.command)
    return LogManager.open_existing(root, read_only=read_only, storage_options=storage_options(args),
                                    remote_log_metadata=getattr(args, "remote_log_metadata", None))


#: How long a command that changes logs waits for a live client to hand one over (--timeout-ms).
DEFAULT_TIMEOUT_MS = 30_000


def add_timeout_argument(p) -> None:
    p.add_argument("--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS, metavar="MS",
                   help="how long to wait for a process writing a log (a producer, a consumer committing) to hand "
                        f"it over, per log (default {DEFAULT_TIMEOUT_MS})")


@contextmanager
def writer_pool(root: str):
    """``with writer_pool(root) as pool:`` the writer pool of a command that changes logs
    (pylog/logdir/writers.py, without a cleaner thread): logs taken with :func:`taken_log`
    go through the clients' hand-off, and any other process wanting one meanwhile gets it;
    every log is closed (flushed) at the end. Raises :class:`LogDirNotFoundError`."""
    if not os.path.isdir(root):
        raise LogDirNotFoundError(f"no log dir at {root}")
    pool = WriterPool(root, clean=False)
    try:
        yield pool
    finally:
        pool.release()


@contextmanager
def taken_log(pool, topic: str, partition: int, timeout_ms: int, *, keep: bool = False):
    """``with taken_log(pool, t, p, args.timeout_ms) as log:`` the partition's writable log,
    held for the block: the process writing it hands it over (waiting up to ``timeout_ms``,
    else :class:`LogLockedError`); closed after the block unless ``keep``."""
    if timeout_ms < 0:
        raise InvalidArgumentError(f"--timeout-ms must be at least 0, got {timeout_ms}")
    with ExitStack() as stack:
        try:
            log = stack.enter_context(pool.writer(topic, partition, max_block_ms=timeout_ms))
        except LogLockedError as e:
            raise LogLockedError(f"{e}; not handed over within --timeout-ms {timeout_ms} (only producers and "
                                 f"consumers hand a log over: close any other program writing it)") from None
        yield log
    if not keep:
        pool.close_log(topic, partition)


def open_topic_log(root: str, topic: str, partition: int, *, read_only: bool, create: bool = False):
    manager = LogManager.open_existing(root, read_only=read_only) if os.path.isdir(root) or read_only else None
    if manager is None:
        manager = LogManager(root)
    if create and topic not in manager.topics():
        manager.create_topic(topic, partition + 1)
    if topic not in manager.topics():
        manager.close()
        raise UnknownTopicError(f"unknown topic {topic!r} in {root}")
    return manager, manager.log(topic, partition)


def table(rows: list[dict], columns: list[str]) -> str:
    """A plain aligned text table."""
    widths = {c: max([len(c)] + [len(str(r.get(c, ""))) for r in rows]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def kafka_table(rows: list[dict], columns: list[str]) -> str:
    """A table as Kafka's admin tools print one (ToolsUtils.prettyPrintTable): every cell,
    the last too, padded to its column's width and followed by a tab."""
    widths = [max([len(c)] + [len(str(r.get(c, ""))) for r in rows]) for c in columns]

    def line(cells) -> str:
        return "".join(str(c).ljust(w) + "\t" for c, w in zip(cells, widths))
    return "\n".join([line(columns)] + [line(r.get(c, "") for c in columns) for r in rows])


def parse_properties(items: list[str] | None, known: dict[str, str]) -> dict[str, str]:
    """``--property name=value`` arguments as a dict, each name one of ``known`` (name ->
    what it does); defaults are the caller's. Raises :class:`InputFormatError`."""
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise InputFormatError(f"--property {item!r} is not name=value")
        if name not in known:
            raise InputFormatError(f"unknown --property {name!r}; known: {', '.join(sorted(known))}")
        out[name] = value
    return out


def flag(props: dict[str, str], name: str, default: bool = False) -> bool:
    """A boolean property as Kafka's tools read it: true when it says "true" (any case)."""
    return props[name].strip().lower() == "true" if name in props else default


def properties_help(known: dict[str, str]) -> str:
    """The help text of a ``--property`` option: every property and what it does."""
    return "NAME=VALUE ...; " + "; ".join(f"{k}: {v}" for k, v in known.items())


def unescape(text: str) -> bytes:
    """A separator as typed on a shell line, as UTF-8: ``\\t``, ``\\n``, ``\\r`` and ``\\\\``
    are the characters they name (``key.separator=\\t`` needs no ``$'\\t'``)."""
    return re.sub(r"\\[tnr\\]", lambda m: _ESCAPES[m[0]], text).encode("utf-8")


_ESCAPES = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\\\": "\\"}


def internal_topic(name: str) -> bool:
    """Kafka's internal topics: ``__consumer_offsets`` and ``__transaction_state``."""
    return name in INTERNAL_TOPICS


def add_exclude_internal_argument(p) -> None:
    """``--exclude-internal-topics``, as kafka-topics.sh's ``--exclude-internal``."""
    p.add_argument("--exclude-internal-topics", action="store_true",
                   help="leave out __consumer_offsets and __transaction_state")


def topic_pattern(topic: str | None, option: str = "--topic") -> re.Pattern:
    """``--topic`` (or ``option``) as the tools read it: a regular expression matched
    against the whole name (every topic when None), read as Kafka's IncludeList reads it
    (a comma is ``|``: ``orders,payments`` names both; spaces and enclosing quotes are
    dropped); :class:`InvalidArgumentError` when it does not compile."""
    if topic is not None:
        topic = re.sub(r"""["']+$""", "", re.sub(r"""^["']+""", "", topic.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(".*" if topic is None else topic)
    except re.error as e:
        raise InvalidArgumentError(f"{option} {topic!r} is not a regular expression: {e}") from None


def wanted_topics(names, topic: str | None, *, exclude_internal: bool, option: str = "--topic") -> list[str]:
    """The ``names`` that ``--topic`` (or ``option``) matches, without the internal topics
    when ``exclude_internal``."""
    pattern = topic_pattern(topic, option)
    return [t for t in names if pattern.fullmatch(t) and not (exclude_internal and internal_topic(t))]
