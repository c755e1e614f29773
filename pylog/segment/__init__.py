"""Segments: a ``.log`` file with its indexes, and the fetch results read from them
(docs/format/segment.md)."""

from pylog.segment.fetch import FetchData
from pylog.segment.file import BatchHeader, LogFile
from pylog.segment.segment import Segment

__all__ = ["BatchHeader", "FetchData", "LogFile", "Segment"]
