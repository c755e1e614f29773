"""Input lines as records, the way Kafka's console producer reads them (its
LineMessageReader), and the timing that turns a stream of lines into appends.

A line is ``[headers<headers.delimiter>][key<key.separator>]value``: headers only with
``parse.headers=true`` (``k1:v1,k2:v2``, split at ``headers.separator`` and then at the first
``headers.key.separator``), the key only with ``parse.key=true``. A key, value or header value
equal to ``null.marker`` is null. A line without a separator it needs is an
:class:`InputFormatError` naming the line, unless ``ignore.error=true`` (then the part is
missing: no headers, a null key, a header with a null value). Separators are literal
strings (Kafka reads ``headers.separator`` as a regular expression).
"""

from __future__ import annotations

import os
import select
import time

from pylog.cli.common import flag, unescape
from pylog.errors import InputFormatError
from pylog.record.record import Record

#: The properties of Kafka's LineMessageReader, with what they do.
PROPERTIES = {
    "parse.key": "a key comes first on each line (default false)",
    "key.separator": "between key and value (default a tab; \\t accepted)",
    "parse.headers": "headers come first on each line (default false)",
    "headers.delimiter": "between the headers and the key or value (default a tab)",
    "headers.separator": "between two headers (default ,)",
    "headers.key.separator": "between a header's key and value (default :)",
    "null.marker": "a key, value or header value equal to this is null (default: none)",
    "ignore.error": "a line without a separator it needs is taken as it is instead of an error (default false)",
}


class LineReader:
    """Parses lines (bytes, without their newline) into :class:`Record`\\ s."""

    def __init__(self, props: dict[str, str]):
        self.parse_key = flag(props, "parse.key")
        self.key_separator = unescape(props.get("key.separator", "\t"))
        self.parse_headers = flag(props, "parse.headers")
        self.headers_delimiter = unescape(props.get("headers.delimiter", "\t"))
        self.headers_separator = unescape(props.get("headers.separator", ","))
        self.headers_key_separator = unescape(props.get("headers.key.separator", ":"))
        self.null_marker = unescape(props["null.marker"]) if "null.marker" in props else None
        self.ignore_error = flag(props, "ignore.error")
        self.line_number = 0
        self._check_separators()

    def _check_separators(self) -> None:
        named = {"key.separator": self.key_separator, "headers.delimiter": self.headers_delimiter,
                 "headers.separator": self.headers_separator, "headers.key.separator": self.headers_key_separator}
        if not all(named.values()):
            raise InputFormatError(f"empty separator: {', '.join(k for k, v in named.items() if not v)}")
        pairs = [("headers.delimiter", "headers.separator"), ("headers.delimiter", "headers.key.separator"),
                 ("headers.separator", "headers.key.separator")]
        pairs += [(name, "null.marker") for name in named] if self.null_marker is not None else []
        named["null.marker"] = self.null_marker
        for a, b in pairs:
            if named[a] == named[b]:
                raise InputFormatError(f"{a} and {b} may not be equal")

    def record(self, line: bytes) -> Record:
        """The record of one input line. Raises :class:`InputFormatError`."""
        self.line_number += 1
        headers, rest = self._split(self.parse_headers, line, line, self.headers_delimiter, "headers delimiter")
        key, value = self._split(self.parse_key, line, rest, self.key_separator, "key separator")
        return Record(self._nullable(value), key=self._nullable(key),
                      headers=self._headers(headers) if headers is not None and headers != self.null_marker else ())

    def _split(self, enabled: bool, line: bytes, text: bytes, separator: bytes, what: str):
        if not enabled:
            return None, text
        head, sep, tail = text.partition(separator)
        if sep:
            return head, tail
        if self.ignore_error:
            return None, text
        raise InputFormatError(f"no {what} {separator.decode(errors='replace')!r} on line {self.line_number}: "
                               f"{line.decode(errors='replace')!r}")

    def _headers(self, text: bytes) -> tuple:
        out = []
        for pair in text.split(self.headers_separator):
            key, sep, value = pair.partition(self.headers_key_separator)
            if not sep and not self.ignore_error:
                raise InputFormatError(f"no header key separator {self.headers_key_separator.decode()!r} in "
                                       f"{pair.decode(errors='replace')!r} on line {self.line_number}")
            if key == self.null_marker:
                raise InputFormatError(f"a header key equals the null marker on line {self.line_number}: "
                                       "header keys cannot be null")
            out.append((key.decode("utf-8", "replace"), self._nullable(value) if sep else None))
        return tuple(out)

    def _nullable(self, part):
        return None if part is None or part == self.null_marker else part


def line_batches(fd: int, *, linger_ms: int, batch_records: int):
    """Yield lists of input lines (bytes, newline removed) from the file descriptor ``fd``:
    a list as soon as it holds ``batch_records`` lines, or ``linger_ms`` after its first line
    came, or at the end of the input. So a slow writer's line is appended within
    ``linger_ms``, and fast input is appended in large batches. Waits with ``select``;
    reads what is there (at most 64 KiB at a time) without waiting for more."""
    pending = b""
    lines: list[bytes] = []
    deadline = 0.0
    while True:
        timeout = None if not lines else max(0.0, deadline - time.monotonic())
        if select.select([fd], [], [], timeout)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                if pending:
                    lines.append(pending.rstrip(b"\r"))
                if lines:
                    yield lines
                return
            *complete, pending = (pending + chunk).split(b"\n")
            for line in complete:
                if not lines:
                    deadline = time.monotonic() + linger_ms / 1000
                lines.append(line.rstrip(b"\r"))
                if len(lines) >= batch_records:
                    yield lines
                    lines = []
        elif lines:
            yield lines
            lines = []
