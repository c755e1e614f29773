"""Which implementation runs the record codec's hot loops: the C extension, numpy or pure Python.

Three backends write and read the same bytes (docs/format/batch.md), and this module is
the one place that picks among them:

- decoding a batch to objects: ``c`` ``_speedups.decode_records``; ``numpy``
  ``vector_decode`` from ``VECTOR_MIN_RECORDS`` records on, else the Python loop;
  ``python`` ``python_codec.decode_records``.
- encoding records without headers: ``c`` ``_speedups.encode_records`` (an uncompressed
  batch of values or ``(key, value)`` pairs of one timestamp, header and all:
  ``_speedups.encode_batch``); ``numpy``
  ``vector_encode`` from ``VECTOR_MIN_RECORDS`` records on (with keys or timestamps), else
  the Python loop; ``python`` ``python_codec.encode_columns``.
- the columnar scan and gather: ``c`` ``_speedups.scan_records`` and ``gather``; ``numpy``
  and ``python`` both ``scan.scan_numpy`` and ``columnar``'s numpy gather (columns are
  numpy arrays, there is no numpy-free columnar decode).
- grouping segment file names: ``c`` ``_speedups.segment_names``; else ``listing``'s loop.

The backend is chosen once, at import: ``c`` when ``pylog._speedups`` is built and the
environment variable ``PYLOG_NO_SPEEDUPS`` is unset (or empty or ``0``), else ``numpy``
(numpy is a dependency, so ``python`` is never the default). :func:`use` switches it for a
block, for tests and benchmarks. The :class:`~pylog.Record` class is fixed at import
(the C type unless ``PYLOG_NO_SPEEDUPS`` is set): records made before a switch stay valid,
and every backend builds records of the class it is handed.

numpy is imported by the ``numpy`` backend's first batch of ``VECTOR_MIN_RECORDS`` records
(or the first columnar decode), never by ``import pylog``: it takes about 0.1 s to import.
"""

from __future__ import annotations

import contextlib
import os

from pylog.errors import InvalidArgumentError
from pylog.record import python_codec

#: Set to anything but ``""`` or ``"0"``, pylog leaves its C extension unloaded: the
#: ``numpy`` backend and the pure-Python ``Record`` run instead.
ENV_SWITCH = "PYLOG_NO_SPEEDUPS"

#: From this many records in a batch on, the ``numpy`` backend decodes and encodes
#: vectorised; below it the Python loops win (numpy's fixed cost per call is ~0.2 ms).
#: Measured on (8-byte key, 100-byte value) records without C, on a loaded machine: at 128
#: records the loops win both ways, at 256 the numpy decode is ~25% faster and its encode
#: within ~15%.
VECTOR_MIN_RECORDS = 256

#: The backends, fastest first.
NAMES = ("c", "numpy", "python")

#: True when :data:`ENV_SWITCH` turns the C extension off (then it is not warned about).
SWITCHED_OFF = os.environ.get(ENV_SWITCH, "") not in ("", "0")


def _load_speedups():
    """The C extension, or None when it is not built or :data:`ENV_SWITCH` turns it off."""
    if SWITCHED_OFF:
        return None
    try:
        import pylog._speedups as speedups
    except ImportError:  # no C compiler at install time
        return None
    return speedups


#: The C extension ``pylog._speedups`` as loaded, or None (not built, or switched off).
speedups = _load_speedups()

_current = "c" if speedups is not None else "numpy"


def available() -> tuple[str, ...]:
    """The backends this process can run: ``("c", "numpy", "python")`` with the C
    extension loaded, else ``("numpy", "python")``."""
    return NAMES if speedups is not None else NAMES[1:]


def current() -> str:
    """The backend in use: ``"c"``, ``"numpy"`` or ``"python"``."""
    return _current


@contextlib.contextmanager
def use(name: str):
    """Run the block with backend ``name`` (one of :func:`available`), then restore the
    previous one. For tests and benchmarks: the switch is process-wide, not per thread."""
    global _current
    if name not in available():
        raise InvalidArgumentError(f"record codec backend {name!r} is not available here: "
                                   f"choose one of {', '.join(available())}")
    previous, _current = _current, name
    try:
        yield
    finally:
        _current = previous


def c_function(name: str):
    """The C extension's function ``name`` when the backend is ``c``, else None (the caller
    runs its numpy or Python version)."""
    return getattr(speedups, name) if _current == "c" else None


def record_decoder(count: int):
    """The function decoding a batch of ``count`` records to objects, called as
    ``decoder(buf, count, base_offset, base_timestamp, append_time, record_type[, topic,
    partition, timestamp_type])``; it raises ``ValueError`` (an ``InvalidRecordError``
    from numpy or Python) for bytes that break the format. O(1)."""
    if _current == "c":
        return speedups.decode_records
    if _current == "numpy" and count >= VECTOR_MIN_RECORDS:
        return _numpy_decoder()
    return python_codec.decode_records


def record_encoder(count: int, *, values_only: bool = False):
    """The function encoding ``count`` headerless records, called as ``encoder(values,
    keys, ts_deltas)`` (``keys``/``ts_deltas`` None: all null / all 0), offset deltas
    0..count-1. It returns None, or raises ``TypeError``/``OverflowError`` (C), when an item
    is not ``bytes``/None or a delta not an int: the caller's per-record encoder then names
    it. ``values_only``: no keys and one timestamp, where numpy never beats the Python loop. O(1)."""
    if _current == "c":
        return speedups.encode_records
    if _current == "numpy" and count >= VECTOR_MIN_RECORDS and not values_only:
        return _numpy_encoder()
    return python_codec.encode_columns


def _numpy_decoder():
    # Imported on first use: the module imports numpy, which takes ~0.1 s to import.
    from pylog.record.vector_decode import decode_records_vectorised
    return decode_records_vectorised


def _numpy_encoder():
    # Imported on first use: the module imports numpy, which takes ~0.1 s to import.
    from pylog.record.vector_encode import encode_records_vectorised
    return encode_records_vectorised
