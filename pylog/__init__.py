"""pylog: Apache Kafka's partition log as a Python library, in Kafka's own on-disk format.

>>> import pylog, tempfile, os
>>> with pylog.Log.open(os.path.join(tempfile.mkdtemp(), "events-0")) as log:
...     _ = log.append([b"hello", (b"key", b"world")])
...     [(r.offset, r.key, r.value) for r in log.records()]
[(0, None, b'hello'), (1, b'key', b'world')]
"""

import warnings as _warnings

from pylog import errors as _errors
from pylog.config import LogConfig
from pylog.errors import *  # noqa: F401,F403 - the whole hierarchy is public
from pylog.errors import PylogError, SpeedupsMissingWarning  # noqa: F401
from pylog.record import backend as _backend
from pylog.record import (
    Compression, ControlRecord, LegacyBatch, Record, RecordBatch, decode_batches, encode_batch,
)

__version__ = "0.1.0"

SPEEDUPS = _backend.speedups is not None
if not SPEEDUPS and not _backend.SWITCHED_OFF:
    _warnings.warn("pylog's C speedups (pylog._speedups) are not built: pylog works, but encoding and "
                   "decoding records run in pure Python, several times slower; reinstall with a C "
                   "compiler present (pip install -e .) to build them", SpeedupsMissingWarning, stacklevel=2)
SPEEDUPS: bool
"""True when the optional C extension ``pylog._speedups`` is loaded (``pylog --version`` shows it):
built, and not switched off by ``PYLOG_NO_SPEEDUPS`` (:mod:`pylog.record.backend`)."""

_LAZY = {
    "Log": ("pylog.log", "Log"),
    "AppendInfo": ("pylog.log", "AppendInfo"),
    "FetchData": ("pylog.segment.fetch", "FetchData"),
    "Segment": ("pylog.segment.segment", "Segment"),
    "OffsetIndex": ("pylog.index", "OffsetIndex"),
    "TimeIndex": ("pylog.index", "TimeIndex"),
    "TxnIndex": ("pylog.index", "TxnIndex"),
    "LogManager": ("pylog.manager", "LogManager"),
    "Topic": ("pylog.manager", "Topic"),
    "ReplicaSet": ("pylog.replication", "ReplicaSet"),
    **{name: ("pylog.clients", name) for name in (
        "Producer", "Consumer", "TopicPartition", "ConsumerRecord", "ConsumerRebalanceListener", "RecordMetadata")},
}


__all__ = sorted(
    ["LogConfig", "Compression", "ControlRecord", "LegacyBatch", "Record", "RecordBatch", "decode_batches",
     "encode_batch", "SPEEDUPS", *_LAZY]
    + [n for n, v in vars(_errors).items() if isinstance(v, type) and issubclass(v, (Exception, Warning))
       and v.__module__ == _errors.__name__ and not n.startswith("_")]
)


def __getattr__(name):
    """Engine classes load on first use, so ``import pylog`` stays cheap."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'pylog' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
