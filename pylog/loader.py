"""Opening a partition directory: the steps Kafka's ``LogLoader`` takes, in order
(docs/internals.md#recovery).

1. Temp files: remove ``.deleted`` and ``.cleaned`` files; finish an interrupted swap
   (``.swap`` files replace the segments whose offsets they cover).
2. Remove index files that have no ``.log``.
3. Open every segment (indexes lazily).
4. Unless the last close was clean: recover every segment from the one holding the
   recovery point: re-validate batch by batch, rebuild indexes, cut at the first invalid
   or incomplete batch, and drop every later segment. Their ``.txnindex`` files are
   rewritten after the producer-state replay; every other one is checked against its
   segment's markers when first needed (docs/format/txnindex.md), never trusted as found.

A read-only open does none of the writes: it resolves swaps in memory and leaves
damaged tails unread (readers never see past the last whole batch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pylog.io import FileIO
from pylog.listing import Listing
from pylog.layout import (
    CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
)
from pylog.segment.segment import Segment

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass
class LoadReport:
    """What opening found and did (for logs, ``describe`` and tests)."""

    clean: bool = False
    recovered_segments: list[int] = field(default_factory=list)
    truncated_bytes: int = 0
    deleted_segments: list[int] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    swapped_segments: list[int] = field(default_factory=list)


_KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, ".snapshot")


def parse_segment_file(name: str) -> tuple[int, str, str] | None:
    """``00000000000000000042.log.swap`` -> ``(42, ".log", ".swap")``; None for other names."""
    if len(name) < 24 or name[20] != "." or not name[:20].isdigit():
        return None
    rest = name[20:]
    for kind in _KINDS:
        if rest.startswith(kind):
            extra = rest[len(kind):]
            if extra and not (extra.startswith(".") and extra[1:].replace(".", "").isalpha()):
                return None
            return int(name[:20]), kind, extra
    return None


def list_segment_files(directory: str, names: list[str] | None = None) -> list[tuple[int, str, str, str]]:
    """(base offset, kind, extra suffix, file name) of every segment-like file, sorted.
    One ``listdir`` (or the given ``names``) and no regular expressions: this runs on
    every open, over every file of every segment."""
    out = []
    for name in os.listdir(directory) if names is None else names:
        parsed = parse_segment_file(name)
        if parsed is not None:
            out.append((parsed[0], parsed[1], parsed[2], name))
    out.sort()
    return out


def has_temp_files(names: list[str]) -> bool:
    """Whether any ``.deleted``, ``.cleaned`` or ``.swap`` file is present."""
    text = "\n".join(names) + "\n"
    return any(suffix + "\n" in text for suffix in (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX))


def lowest_cleaned_base(files: list[tuple[int, str, str, str]]) -> int | None:
    """Base offset of the lowest ``.cleaned`` file: ``.swap`` files at or above it are an
    interrupted split, to be dropped (the original segments are still whole)."""
    return min((base for base, _, extra, _ in files if extra == CLEANED_SUFFIX), default=None)


def clean_temp_files(directory: str, io: FileIO, report: LoadReport) -> None:
    """Step 1: delete ``.deleted``/``.cleaned`` files, complete ``.swap`` renames."""
    files = list_segment_files(directory)
    min_cleaned = lowest_cleaned_base(files)
    for base, kind, extra, name in files:
        if extra in (DELETED_SUFFIX, CLEANED_SUFFIX):
            io.remove(os.path.join(directory, name))
            report.removed_files.append(name)
        elif extra == SWAP_SUFFIX and min_cleaned is not None and base >= min_cleaned:
            io.remove(os.path.join(directory, name))  # an interrupted split: start again
            report.removed_files.append(name)
    swaps = [f for f in list_segment_files(directory) if f[2] == SWAP_SUFFIX and f[1] == LOG_SUFFIX]
    for base, _, _, _ in swaps:
        seg = Segment(directory, base, index_bytes=1 << 20, index_interval_bytes=4096, writable=False,
                      suffix=SWAP_SUFFIX, io=io)
        end = seg.next_offset
        seg.close()
        for obase, okind, oextra, oname in list_segment_files(directory):
            if oextra == "" and base <= obase < max(end, base + 1) and okind != ".snapshot":
                io.remove(os.path.join(directory, oname))
                report.removed_files.append(oname)
    for base, kind, extra, name in list_segment_files(directory):
        if extra == SWAP_SUFFIX:
            io.rename(os.path.join(directory, name), os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
            if base not in report.swapped_segments:
                report.swapped_segments.append(base)
    if swaps:
        io.fsync_dir(directory)


def remove_orphan_indexes(directory: str, io: FileIO, report: LoadReport,
                          names: list[str] | Listing) -> tuple[list[int], set[int]]:
    """Step 2: index files whose ``.log`` is gone are deleted, as Kafka does. Returns the
    sorted base offsets of the ``.log`` files and those of the ones lacking an ``.index``
    or ``.timeindex``. Set operations over the names only: this runs over every file of
    every segment on each open."""
    listing = names if isinstance(names, Listing) else Listing(names)
    logs = set(listing.bases(LOG_SUFFIX))
    indexed = set(listing.bases(INDEX_SUFFIX))
    timed = set(listing.bases(TIME_INDEX_SUFFIX))
    for suffix, have in ((INDEX_SUFFIX, indexed), (TIME_INDEX_SUFFIX, timed),
                         (TXN_INDEX_SUFFIX, set(listing.bases(TXN_INDEX_SUFFIX)))):
        for base in sorted(have - logs):
            name = f"{base:020d}{suffix}"
            io.remove(os.path.join(directory, name))
            report.removed_files.append(name)
    return sorted(logs), logs - (indexed & timed)


def live_segment_bases(directory: str, *, read_only: bool, names: list[str] | None = None) -> list[tuple[int, str]]:
    """(base offset, suffix) of the segments to open. Read-only opens resolve an
    unfinished swap in memory: ``.swap`` files stand in for the range they cover."""
    files = list_segment_files(directory, names)
    plain = sorted(b for b, kind, extra, _ in files if kind == LOG_SUFFIX and extra == "")
    if not read_only:
        return [(b, "") for b in plain]
    min_cleaned = lowest_cleaned_base(files)
    swaps = sorted(b for b, kind, extra, _ in files if kind == LOG_SUFFIX and extra == SWAP_SUFFIX
                   and (min_cleaned is None or b < min_cleaned))  # at or above: an interrupted split
    if not swaps:
        return [(b, "") for b in plain]
    out = [(b, SWAP_SUFFIX) for b in swaps]
    for b in plain:
        if not any(s <= b < _swap_end(directory, s) for s in swaps):
            out.append((b, ""))
    return sorted(out)


def _swap_end(directory: str, base: int) -> int:
    seg = Segment(directory, base, index_bytes=1 << 20, index_interval_bytes=4096, writable=False,
                  suffix=SWAP_SUFFIX)
    try:
        return max(seg.next_offset, base + 1)
    finally:
        seg.close()


def index_needs_rebuild(segment: Segment) -> bool:
    """True if the segment's ``.index`` or ``.timeindex`` fails its sanity check (loads them)."""
    try:
        segment._raw_offset_index().sanity_check()
        segment._raw_time_index().sanity_check()
    except Exception:
        return True
    return False
