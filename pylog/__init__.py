"""pylog: Apache Kafka's partition log as a Python library, in Kafka's own on-disk format."""

from pylog.errors import *  # noqa: F401,F403
from pylog.errors import __doc__ as _errors_doc  # noqa: F401
from pylog.record import (
    Compression, ControlRecord, Record, RecordBatch, decode_batches, encode_batch,
)

__version__ = "0.1.0"
