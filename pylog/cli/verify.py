"""``pylog verify ROOT|PARTITION...``: check every batch CRC, index entry, offset order and
checkpoint (the same checker as ``Log.check()``); prints each problem with its file and
position, exits 0 only when everything is clean. ``--repair`` opens each partition for
writing first, so that a recovery truncates what does not validate at its end (printed).

A URL (``s3://``, ``gs://``, ``az://``, ``abfss://``, ``file://``) of a log dir, partition
directory or tiered layout in object storage is checked by the same checker, each problem
naming the object's URL: every segment's ``.log`` is read once front to back in ranged GETs
of ``SCAN_BYTES`` (twice: the header walk, then the batches), its indexes once."""

from __future__ import annotations

import os
import sys


from pylog.checkpoint import OffsetCheckpoint
from pylog.check import check_log
from pylog.cli.common import add_storage_arguments, no_partitions, open_url_manager
from pylog.errors import InvalidArgumentError, LogDirNotFoundError, PylogError, RemoteObjectNotFoundError
from pylog.layout import INDEX_SUFFIX, LOG_START_OFFSET_CHECKPOINT, LOG_SUFFIX, RECOVERY_POINT_CHECKPOINT, \
    REPLICATION_OFFSET_CHECKPOINT, TIME_INDEX_SUFFIX
from pylog.log import Log
from pylog.partition_dir import is_partition_dir, is_renamed_partition_dir
from pylog.manager import LogManager
from pylog.remote.aiven import ChunkedSegmentBytes
from pylog.remote.segment import RemoteLogFile
from pylog.remote.store import is_url

#: Bytes of a remote ``.log`` one ranged GET of the checker's walk fetches.
SCAN_BYTES = 8 * 1024 * 1024


def add_parser(sub) -> None:
    p = sub.add_parser("verify")
    p.add_argument("paths", nargs="+", metavar="ROOT|PARTITION",
                   help="broker log dirs (every partition in them) or partition directories; or their URLs in "
                        "object storage (s3://, s3a://, gs://, az://, abfss://, file://)")
    p.add_argument("--shallow", action="store_true", help="skip the CRC of every batch")
    p.add_argument("--repair", action="store_true",
                   help="open each partition for writing first: a tail that does not validate is truncated "
                        "(and printed), as a recovery does; then check")
    add_storage_arguments(p)
    p.set_defaults(run=run)


def _partition_dirs(path: str) -> list[str]:
    if not os.path.exists(path):
        raise LogDirNotFoundError(f"no such directory {path}")
    if not os.path.isdir(path):
        raise InvalidArgumentError(f"{path} is a file: give a log dir or a partition directory "
                                   f"(pylog dump reads one segment or index file)")
    if is_partition_dir(path):
        return [path]
    found = sorted(os.path.join(path, n) for n in os.listdir(path)
                   if is_partition_dir(os.path.join(path, n)) and not is_renamed_partition_dir(n))
    if not found:
        raise no_partitions(path, "verify")
    return found


def run(args) -> int:
    urls = [p for p in args.paths if is_url(p)]
    if urls and args.repair:
        raise InvalidArgumentError(f"--repair changes files: {urls[0]} is read only (repair a local copy)")
    problems, checked, local = [], 0, []
    for url in urls:
        found, url_problems = _check_url(args, url, local)
        checked += found
        problems += url_problems
    dirs = [d for p in args.paths if not is_url(p) for d in _partition_dirs(p)]
    dirs += [d for p in local for d in _partition_dirs(p)]
    for d in _progress(dirs):
        try:
            with Log.open(d, read_only=not args.repair) as log:
                for tail in log.load_report.truncations:  # repaired by now, or where reading stops
                    if args.repair:
                        print(tail.message(truncated=True))
                    else:
                        problems.append(tail.message(truncated=False))
                problems += log.check(deep=not args.shallow)
        except PylogError as e:
            problems.append(f"{d}: {e}")
    for root in {os.path.dirname(os.path.abspath(d)) for d in dirs}:
        problems += _check_checkpoints(root)
    for p in problems:
        print(p)
    print(f"{checked + len(dirs)} partition(s) checked, {len(problems)} problem(s)")
    return 1 if problems else 0


def _progress(partitions: list) -> list:
    """``partitions``, behind a progress bar when stderr is a terminal (tqdm, loaded then
    only: its import takes longer than checking a small log dir)."""
    if not sys.stderr.isatty():
        return partitions
    from tqdm import tqdm

    return tqdm(partitions, desc="verify", unit="partition", file=sys.stderr, leave=False)


def _check_checkpoints(root: str) -> list[str]:
    out = []
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        try:
            OffsetCheckpoint(os.path.join(root, name)).read()
        except PylogError as e:
            out.append(str(e))
    return out


def _check_url(args, url: str, local: list[str]) -> tuple[int, list[str]]:
    """(partitions checked, problems) of the log dir, partition directory or tiered layout
    at ``url``: each partition by the checker of ``Log.check()``, then the log dir's
    checkpoints. A ``file://`` URL of a plain log dir is added to ``local`` instead, to be
    checked as the directory it is."""
    problems = []
    with open_url_manager(args, url) as manager:
        if isinstance(manager, LogManager):
            local.append(manager.root)
            return 0, []
        logs = manager.logs()
        for log in _progress(logs):
            try:
                problems += check_log(RemoteLogView(log), deep=not args.shallow)
            except PylogError as e:
                problems.append(f"{log.url}: {e}")
        problems += _check_remote_checkpoints(manager.store)
    return len(logs), problems


def _check_remote_checkpoints(store) -> list[str]:
    out = []
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        try:
            OffsetCheckpoint.parse(store.read(name), store.url(name))
        except RemoteObjectNotFoundError:
            continue
        except PylogError as e:
            out.append(str(e))
    return out


class RemoteLogView:
    """A :class:`~pylog.remote.log.RemoteLog` as :func:`check_log` reads a log: its URL,
    offsets (all of it is recovered: the recovery point is its end) and segments."""

    def __init__(self, log):
        self.path = log.url
        self.segments = [RemoteSegmentView(s) for s in log.segments]
        self.log_start_offset, self.log_end_offset = log.log_start_offset, log.log_end_offset
        self.high_watermark = self.recovery_point = log.high_watermark


class RemoteSegmentView:
    """A :class:`~pylog.remote.segment.RemoteSegment` as :func:`check_log` reads a segment:
    the ``.log``'s URL, header and batch walks over its bytes (ranged GETs of
    ``SCAN_BYTES``), and its offset and time indexes as entries with absolute offsets,
    named by their objects' URLs."""

    def __init__(self, seg):

        class ScanFile(RemoteLogFile):
            """Reads ahead ``SCAN_BYTES`` (one ranged GET) where a read leaves the last range."""
            scanned = (0, 0)

            def read(self, position: int, size: int) -> bytes:
                if not self.scanned[0] <= position <= position + size <= self.scanned[1]:
                    self.scanned = (position, position + max(size, SCAN_BYTES))
                    self.prefetch(position, max(size, SCAN_BYTES))
                return super().read(position, size)

        scan = ScanFile(seg.file.source)
        self.base_offset, self.log_path, self.size_bytes = seg.base_offset, seg.url, scan.size_bytes
        self.headers, self.batches = scan.headers, scan.batches
        self.offset_index = _IndexView(_index_url(seg, INDEX_SUFFIX), lambda: zip(*seg.offset_index()))
        self.time_index = _IndexView(_index_url(seg, TIME_INDEX_SUFFIX), lambda: zip(*seg.time_index()))


class _IndexView:
    def __init__(self, path: str, entries):
        self.path, self._entries = path, entries

    def entries(self) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in self._entries()]


def _index_url(seg, suffix: str) -> str:
    """The URL of the object holding ``seg``'s index with ``suffix``: beside the ``.log``,
    or Aiven's ``.indexes`` holding them all."""
    base = seg.url[:-len(LOG_SUFFIX)] if seg.url.endswith(LOG_SUFFIX) else seg.url
    return base + (".indexes" if isinstance(seg.file.source, ChunkedSegmentBytes) else suffix)
