"""``LogSegments``: a log's segments by base offset (Kafka's ``LogSegments``), and
``SegmentFactory``: the one place a ``Segment`` is built from a log's config.

Neither is thread-safe: the ``Log``'s lock guards them.
"""

from __future__ import annotations

import threading

from sortedcontainers import SortedDict

from pylog.config import LogConfig
from pylog.io import FileIO
from pylog.layout import CLEANED_SUFFIX, DELETED_SUFFIX
from pylog.segment.segment import Segment, roll_jitter_ms


class LogSegments:
    """The segments of one log, sorted by base offset; the last is the active one (Kafka's
    ``LogSegments``). Lookups are O(log segments); lists are copies, safe to use after
    the log's lock is released. ``files`` is the open-file budget the segments report to.

    >>> class Seg:
    ...     def __init__(self, base): self.base_offset = base
    >>> segs = LogSegments()
    >>> for base in (0, 10, 20): segs.add(Seg(base))
    >>> segs.floor(15).base_offset, [s.base_offset for s in segs.from_floor(15)]
    (10, [10, 20])
    """

    def __init__(self, files=None):
        self._by_base: SortedDict = SortedDict()
        self._files = files
        self._active = None  # the last segment, asked for on every append and log-end lookup

    def __len__(self) -> int:
        return len(self._by_base)

    def __iter__(self):
        """The segments, oldest first (a copy)."""
        return iter(list(self._by_base.values()))

    def __contains__(self, base_offset: int) -> bool:
        return base_offset in self._by_base

    def add(self, segment) -> None:
        """Add ``segment``, replacing any segment at its base offset. O(log segments)."""
        self._by_base[segment.base_offset] = segment
        self._active = None

    def add_all(self, segments) -> None:
        """Add many segments at once (opening a log). O(n log n)."""
        self._by_base.update((s.base_offset, s) for s in segments)
        self._active = None

    def remove(self, base_offset: int):
        """Drop the segment at ``base_offset`` and return it (``KeyError`` if none)."""
        self._active = None
        return self._by_base.pop(base_offset)

    def get(self, base_offset: int):
        """The segment at ``base_offset``, or None."""
        return self._by_base.get(base_offset)

    def holds(self, segment) -> bool:
        """Whether ``segment`` itself (not a replacement at its base offset) is in the map."""
        return self._by_base.get(segment.base_offset) is segment

    def bases(self) -> list[int]:
        """Base offsets, ascending (a copy). O(segments)."""
        return list(self._by_base.keys())

    @property
    def active(self):
        """The last segment, the one appends go to (``IndexError`` when empty)."""
        if self._active is None:
            self._active = self._by_base.peekitem(-1)[1]
        return self._active

    @property
    def first(self):
        """The oldest segment (``IndexError`` when empty)."""
        return self._by_base.peekitem(0)[1]

    @property
    def first_base_offset(self) -> int:
        return self._by_base.keys()[0]

    def floor(self, offset: int):
        """The segment with the largest base offset <= ``offset`` (the one that would hold
        it), or None when ``offset`` is below every segment."""
        i = self._by_base.bisect_right(offset)
        return self._by_base.values()[i - 1] if i > 0 else None

    def lower(self, offset: int):
        """The segment with the largest base offset < ``offset``, or None."""
        i = self._by_base.bisect_left(offset)
        return self._by_base.values()[i - 1] if i > 0 else None

    def higher(self, offset: int):
        """The segment with the smallest base offset > ``offset``, or None."""
        i = self._by_base.bisect_right(offset)
        return self._by_base.values()[i] if i < len(self._by_base) else None

    def from_floor(self, offset: int) -> list:
        """The floor segment of ``offset`` (the first one if ``offset`` is below all) and
        every later one, oldest first (a copy). O(log segments + segments returned)."""
        i = max(self._by_base.bisect_right(offset) - 1, 0)
        return list(self._by_base.values()[i:])

    def size_bytes(self) -> int:
        """Bytes of all ``.log`` files. O(segments)."""
        return sum(s.size_bytes for s in self._by_base.values())

    def touch(self, segment) -> None:
        """``segment`` is about to be read: it becomes the most recently used of the
        open-file budget (which may release other segments' files)."""
        self._files.touch(segment)

    def close_all(self) -> None:
        """Release every segment's files (they stay in the map)."""
        for segment in self._by_base.values():
            segment.close()


class SegmentFactory:
    """Builds the segments of one partition directory from its config: index sizes, index
    interval, roll jitter, I/O seam and open-file budget, all in one place.

    ``writable`` is the default for opened segments (False for a read-only log).
    """

    def __init__(self, directory: str, config: LogConfig, io: FileIO, files, *, writable: bool):
        self.directory = directory
        self.config = config
        self.io = io
        self.files = files
        self.writable = writable

    def _settings(self) -> dict:
        config = self.config
        return dict(index_bytes=config.segment_index_bytes, index_interval_bytes=config.index_interval_bytes,
                    io=self.io, open_files=self.files)

    def _jitter_ms(self) -> int:
        """Each segment's own roll jitter, as Kafka draws it per segment."""
        return roll_jitter_ms(self.config.segment_jitter_ms, self.config.segment_ms)

    def open(self, base_offset: int, suffix: str = "", *, writable: bool | None = None) -> Segment:
        """The existing segment at ``base_offset``; no file is opened until first use. O(1)."""
        return Segment(self.directory, base_offset, writable=self.writable if writable is None else writable,
                       suffix=suffix, roll_jitter_ms=self._jitter_ms(), **self._settings())

    def open_all(self, bases_and_suffixes) -> list[Segment]:
        """``open`` for every ``(base offset, suffix)``, the settings built once (opening a
        log of 10,000 segments). O(segments), no file opened."""
        settings, directory, writable = self._settings(), self.directory, self.writable
        draw = self.config.segment_jitter_ms > 0  # else every jitter is 0
        return [Segment(directory, base, writable=writable, suffix=suffix,
                        roll_jitter_ms=self._jitter_ms() if draw else 0, **settings)
                for base, suffix in bases_and_suffixes]

    def create(self, base_offset: int, suffix: str = "") -> Segment:
        """A new empty segment; files already at that base offset and suffix are removed."""
        return Segment.create(self.directory, base_offset, suffix=suffix, roll_jitter_ms=self._jitter_ms(),
                              **self._settings())

    def cleaned(self, base_offset: int) -> Segment:
        """A new empty segment with the ``.cleaned`` suffix (compaction's output)."""
        return self.create(base_offset, CLEANED_SUFFIX)


def batches_from(segments: list, start: int, end: int):
    """Batches whose offsets overlap ``[start, end)`` in ``segments`` (the floor segment of
    ``start`` and later ones), for producer-state replay. Walks each segment in chunks from
    the batch holding ``start``."""
    for seg in segments:
        if seg.base_offset >= end:
            return
        h = seg.translate_offset(start)
        if h is None:
            continue
        for b in seg.batches(h.position):
            if b.base_offset >= end:
                return
            yield b


def tail_start(segments: LogSegments, end: int, max_bytes: int) -> int:
    """Where to start reading back about the last ``max_bytes`` of the log before offset
    ``end``: an offset-index entry or a segment's base offset (a walk can start at either),
    crossing into earlier segments while the bytes run short. O(segments walked back +
    log index entries)."""
    segment = segments.floor(end - 1)
    while segment is not None:
        header = segment.translate_offset(end)
        position = segment.size_bytes if header is None else header.position
        if position > max_bytes:
            return segment.offset_index.floor_position(position - max_bytes)[0]
        max_bytes -= position
        previous = segments.lower(segment.base_offset)
        if previous is None:
            return segment.base_offset
        segment = previous
    return end


def batches_before(segments: LogSegments, end: int, max_bytes: int):
    """The batches of about the last ``max_bytes`` of the log before offset ``end``, oldest
    first (from :func:`tail_start`). O(max_bytes + index_interval_bytes)."""
    start = tail_start(segments, end, max_bytes)
    return batches_from(segments.from_floor(start), start, end)


def delete_segment(segment: Segment, *, delay_ms: int) -> threading.Timer | None:
    """Rename ``segment``'s files ``.deleted`` now and remove them after ``delay_ms`` (at
    once when 0): a fetch that holds the file meanwhile still reads it. Returns the timer
    of a delayed removal (:class:`DelayedDeletes` keeps them)."""
    segment.change_suffix(DELETED_SUFFIX)
    if delay_ms <= 0:
        segment.delete_files()
        return None
    timer = threading.Timer(delay_ms / 1000.0, segment.delete_files)
    timer.daemon = True
    timer.start()
    return timer


class DelayedDeletes:
    """The segments of one log renamed ``.deleted`` whose files go after
    ``file_delete_delay_ms`` (Kafka's asynchronous delete). :meth:`finish` removes those
    still waiting at once: the log closes, and a process that then exits (``pylog
    retention``, a script) would leave them on disk until the log's next open. Fetches
    already planned keep reading: they hold the files open."""

    def __init__(self):
        self._waiting: list[tuple[threading.Timer, Segment]] = []

    def delete(self, segment: Segment, *, delay_ms: int) -> None:
        timer = delete_segment(segment, delay_ms=delay_ms)
        if timer is not None:
            self._waiting = [(t, s) for t, s in self._waiting if t.is_alive()] + [(timer, segment)]

    def finish(self) -> None:
        """Remove every waiting segment's files now. O(segments waiting)."""
        waiting, self._waiting = self._waiting, []
        for timer, segment in waiting:
            timer.cancel()
            timer.join()  # a removal under way ends first; removing again is harmless
            segment.delete_files()
