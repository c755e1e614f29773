"""The partition log, split as Apache Kafka splits it: ``Log`` (the public API and the
lock) composes ``LogSegments`` (the sorted map of segments), ``LogOffsets`` (log start,
high watermark, recovery point) and what ``LogLoader`` opened (docs/internals.md)."""

from pylog.log.appends import AppendInfo
from pylog.log.local import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from pylog.log.log import Log

__all__ = ["AppendInfo", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "Log", "MAX_TIMESTAMP"]
