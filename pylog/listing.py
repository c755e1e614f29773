"""Reading a partition directory's listing: which base offsets have a file of a kind.

Every open goes over every file name of every segment (30,000 names for 10,000
segments), so this is done once per open, for all kinds together, in one pass: by the
C extension with the ``c`` backend (:mod:`pylog.record.backend`), else in Python. The
result is the same either way.
"""

from __future__ import annotations

from pylog.layout import (
    INDEX_SUFFIX, LOG_SUFFIX, OFFSET_DIGITS as BASE_DIGITS, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
)
from pylog.record import backend

KINDS = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)


class Listing:
    """The names of one ``listdir``, grouped by kind on first use."""

    def __init__(self, names: list[str]):
        self.names = names
        self._bases: dict[str, list[int]] | None = None

    def bases(self, suffix: str) -> list[int]:
        """Base offsets of the names ``<20 digits><suffix>``, in listing order."""
        if self._bases is None:
            self._bases = _group(list(self.names))
        if suffix not in self._bases:
            self._bases[suffix] = _bases_python(self.names, suffix)
        return self._bases[suffix]

    def offsets(self, suffix: str) -> list[int]:
        """Base offsets of the ``<20 digits><suffix>`` names, ascending."""
        return sorted(self.bases(suffix))


def _group(names: list[str]) -> dict[str, list[int]]:
    segment_names = backend.c_function("segment_names")
    if segment_names is not None:
        return dict(zip(KINDS, segment_names(names, KINDS)))
    out: dict[str, list[int]] = {suffix: [] for suffix in KINDS}
    for name in names:
        group = out.get(name[BASE_DIGITS:])
        if group is not None and _digits(name[:BASE_DIGITS]):
            group.append(int(name[:BASE_DIGITS]))
    return out


def _bases_python(names: list[str], suffix: str) -> list[int]:
    return [int(n[:BASE_DIGITS]) for n in names if n[BASE_DIGITS:] == suffix and _digits(n[:BASE_DIGITS])]


def _digits(text: str) -> bool:
    return len(text) == BASE_DIGITS and text.isascii() and text.isdigit()
