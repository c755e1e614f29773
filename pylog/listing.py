"""Reading a partition directory's listing: which base offsets have a file of a kind.

Every open goes over every file name of every segment (30,000 names for 10,000
segments), so this is done once per open, for all kinds together, by the C extension
when it is built. Without it, the names are joined once and split on ``<suffix>\\n``,
and the 20-digit prefixes are checked in bulk; names of any other shape (a stray file,
a non-digit prefix) make that check fail, and the names are then checked one by one.
The result is the same either way.
"""

from __future__ import annotations

from pylog.layout import INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX

try:
    from pylog import _speedups
except ImportError:  # pragma: no cover - no compiler at install time
    _speedups = None

BASE_DIGITS = 20  # segment files are named <base offset, 20 digits><suffix>
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
    if _speedups is not None:
        return dict(zip(KINDS, _speedups.segment_names(names, KINDS)))
    return {suffix: _bases_python(names, suffix) for suffix in KINDS}


def _bases_python(names: list[str], suffix: str) -> list[int]:
    # Names are separated by two newlines so that after a split on "<suffix>\n" every
    # chunk still begins its last name with a newline.
    text = "\n" + "\n\n".join(names) + "\n"
    if not names or text.count("\n") == 2 * len(names):  # no name holds a newline
        heads = [chunk[-BASE_DIGITS - 1:] for chunk in text.split(suffix + "\n")[:-1]]
        joined = "".join(heads)
        count = len(heads)
        if (len(joined) == (BASE_DIGITS + 1) * count and joined[::BASE_DIGITS + 1] == "\n" * count
                and joined.count("\n") == count and _digits(joined.replace("\n", ""))):
            return [int(h) for h in heads]
    width = BASE_DIGITS + len(suffix)
    return [int(n[:BASE_DIGITS]) for n in names
            if len(n) == width and n.endswith(suffix) and _digits(n[:BASE_DIGITS])]


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() if text else True
