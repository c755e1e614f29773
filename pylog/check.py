"""The invariant checker behind ``Log.check()`` and ``pylog verify``.

Each problem is one line naming the file and byte position. Checked: every batch's
CRC and structure (deep), offsets strictly increasing within and across segments and
never below a segment's base offset, bytes after the last whole batch, offset-index
entries increasing and pointing at batch starts at or before the batch holding their
offset, time-index timestamps increasing with offsets inside the segment, and the
log's offsets ordered: log start <= high watermark <= log end, recovery point <= log end.
"""

from __future__ import annotations

from pylog.errors import CorruptIndexError, PylogError, RecordFormatError
from pylog.layout import MAGIC_V2


def check_log(log, *, deep: bool = True) -> list[str]:
    """Every invariant violation of ``log`` (see the module doc). O(bytes) when ``deep``."""
    problems: list[str] = []
    prev_next = None
    for seg in log.segments:
        prev_next = _check_segment(seg, prev_next, deep, problems)
    leo = log.log_end_offset
    if not log.log_start_offset <= log.high_watermark <= leo:
        problems.append(f"{log.path}: offsets out of order: log start {log.log_start_offset}, "
                        f"high watermark {log.high_watermark}, log end {leo}")
    if log.recovery_point > leo:
        problems.append(f"{log.path}: recovery point {log.recovery_point} is past the log end {leo}")
    return problems


def _check_segment(seg, prev_next, deep: bool, problems: list[str]):
    path = seg.log_path
    headers = []
    try:
        for h in seg.headers(0):
            headers.append(h)
    except RecordFormatError as e:
        problems.append(f"{path}: {e.reason} at position {e.position}")
    end = headers[-1].position + headers[-1].size if headers else 0
    if end < seg.size_bytes:
        problems.append(f"{path}: {seg.size_bytes - end} invalid bytes at the end (position {end})")
    for h in headers:
        if h.base_offset < seg.base_offset:
            problems.append(f"{path}: batch at position {h.position} has offset {h.base_offset} "
                            f"below the segment base {seg.base_offset}")
        if prev_next is not None and h.magic == MAGIC_V2 and h.base_offset < prev_next:
            problems.append(f"{path}: batch at position {h.position} starts at offset {h.base_offset}, "
                            f"not after the previous batch (next offset {prev_next})")
        if h.last_offset < h.base_offset:
            problems.append(f"{path}: batch at position {h.position} ends before it starts")
        prev_next = h.last_offset + 1
    if deep:
        _check_crcs(seg, end, problems)
    _check_offset_index(seg, headers, problems)
    _check_time_index(seg, headers, problems)
    return prev_next


def _check_crcs(seg, end: int, problems: list[str]) -> None:
    try:
        for b in seg.batches(0, end):
            try:
                b.records(path=seg.log_path)
            except PylogError as e:
                problems.append(f"{seg.log_path}: {e}")
    except RecordFormatError as e:
        problems.append(f"{seg.log_path}: {e}")


def _check_offset_index(seg, headers, problems: list[str]) -> None:
    idx = seg.offset_index
    try:
        entries = list(idx.entries())
    except (CorruptIndexError, OSError) as e:
        problems.append(f"{idx.path}: unreadable: {e}")
        return
    by_position = {h.position: i for i, h in enumerate(headers)}
    last = None
    for off, pos in entries:
        if last is not None and off <= last:
            problems.append(f"{idx.path}: entry offset {off} does not increase (previous {last})")
        last = off
        i = by_position.get(pos)
        if i is None:
            problems.append(f"{idx.path}: entry ({off}, position {pos}) does not point at a batch start")
            continue
        holder = next((j for j in range(i, len(headers)) if headers[j].last_offset >= off), None)
        if headers[i].base_offset > off and headers[i].magic == MAGIC_V2:
            problems.append(f"{idx.path}: entry offset {off} is below the batch at position {pos}")
        elif holder is None:
            problems.append(f"{idx.path}: entry offset {off} is past the end of {seg.log_path}")


def _check_time_index(seg, headers, problems: list[str]) -> None:
    idx = seg.time_index
    try:
        entries = list(idx.entries())
    except (CorruptIndexError, OSError) as e:
        problems.append(f"{idx.path}: unreadable: {e}")
        return
    last_ts = None
    end_offset = headers[-1].last_offset if headers else seg.base_offset
    for ts, off in entries:
        if last_ts is not None and ts < last_ts:
            problems.append(f"{idx.path}: timestamp {ts} goes backwards (previous {last_ts})")
        last_ts = ts
        if not seg.base_offset <= off <= end_offset:
            problems.append(f"{idx.path}: entry offset {off} is outside the segment "
                            f"[{seg.base_offset}, {end_offset}]")
