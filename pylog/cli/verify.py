"""``pylog verify ROOT|PARTITION...``: check every batch CRC, index entry, offset order and
checkpoint (the same checker as ``Log.check()``); prints each problem with its file and
position, exits 0 only when everything is clean. ``--repair`` opens each partition for
writing first, so that a recovery truncates what does not validate at its end (printed)."""

from __future__ import annotations

import os
import sys

from tqdm import tqdm

from pylog.checkpoint import OffsetCheckpoint
from pylog.cli.common import is_partition_dir, no_partitions
from pylog.errors import InvalidArgumentError, LogDirNotFoundError, PylogError
from pylog.layout import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from pylog.partition_dir import is_renamed_partition_dir


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help="check CRCs, indexes, offsets and checkpoints; exit 0 only when clean")
    p.add_argument("paths", nargs="+", metavar="ROOT|PARTITION",
                   help="broker log dirs (every partition in them) or partition directories")
    p.add_argument("--shallow", action="store_true", help="skip the CRC of every batch")
    p.add_argument("--repair", action="store_true",
                   help="open each partition for writing first: a tail that does not validate is truncated "
                        "(and printed), as a recovery does; then check")
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
    from pylog.log import Log
    dirs = [d for p in args.paths for d in _partition_dirs(p)]
    problems = []
    for d in tqdm(dirs, desc="verify", unit="partition", disable=not sys.stderr.isatty(), file=sys.stderr,
                  leave=False):
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
    print(f"{len(dirs)} partition(s) checked, {len(problems)} problem(s)")
    return 1 if problems else 0


def _check_checkpoints(root: str) -> list[str]:
    out = []
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        try:
            OffsetCheckpoint(os.path.join(root, name)).read()
        except PylogError as e:
            out.append(str(e))
    return out
