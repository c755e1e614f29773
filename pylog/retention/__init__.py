"""Kafka's two cleanup policies (docs/retention.md): ``delete`` removes whole old
segments by time, size or log start offset; ``compact`` keeps the latest record per key."""

from pylog.retention.compact import CleanResult, compact
from pylog.retention.delete import enforce_retention

__all__ = ["CleanResult", "compact", "enforce_retention"]
