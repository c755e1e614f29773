"""How ``pylog console-consumer`` prints a record: Kafka's DefaultMessageFormatter (the
``print.*`` properties and separators of ``kafka-console-consumer.sh``), or one JSON object
per line.

Default output, fields in Kafka's order, each followed by ``key.separator`` (a tab) and the
record by ``line.separator`` (a newline)::

    CreateTime:1700000000000<TAB>Partition:0<TAB>Offset:5<TAB>h1:v1,h2:v2<TAB>key<TAB>value

``print.timestamp`` prints ``CreateTime:<ms>``, ``LogAppendTime:<ms>`` or ``NO_TIMESTAMP``
(a magic 0 record); ``print.headers`` prints ``NO_HEADERS`` for none; a null key, value or
header value prints as ``null.literal`` ("null"). Keys and values are written as their bytes.
"""

from __future__ import annotations

import argparse
import base64
import json

from pylog.cli.common import flag, unescape

#: The properties of Kafka's DefaultMessageFormatter that pylog reads, with what they do.
PROPERTIES = {
    "print.timestamp": "print the timestamp type and timestamp (default false)",
    "print.key": "print the key (default false)",
    "print.value": "print the value (default true)",
    "print.partition": "print Partition:P (default false)",
    "print.offset": "print Offset:N (default false)",
    "print.headers": "print the headers as k:v pairs (default false)",
    "key.separator": "between fields (default a tab; \\t, \\n accepted)",
    "line.separator": "after each record (default a newline)",
    "headers.separator": "between headers (default ,)",
    "null.literal": "what a null key, value or header value prints as (default null)",
}


class DefaultFormatter:
    """Kafka's DefaultMessageFormatter: the fields the ``print.*`` properties ask for."""

    def __init__(self, props: dict[str, str]):
        self.fields = [name for name, default in (("timestamp", False), ("partition", False), ("offset", False),
                                                  ("headers", False), ("key", False), ("value", True))
                       if flag(props, f"print.{name}", default)]
        self.key_separator = unescape(props.get("key.separator", "\t"))
        self.line_separator = unescape(props.get("line.separator", "\n"))
        self.headers_separator = unescape(props.get("headers.separator", ","))
        self.null = unescape(props.get("null.literal", "null"))

    def format(self, r) -> bytes:
        """One record as Kafka's console consumer prints it, line separator included."""
        return self.key_separator.join([self._field(name, r) for name in self.fields]) + self.line_separator

    def _field(self, name: str, r) -> bytes:
        if name == "timestamp":
            if r.timestamp_type in (None, "NoTimestampType"):
                return b"NO_TIMESTAMP"
            return f"{r.timestamp_type}:{r.timestamp}".encode()
        if name == "partition":
            return b"Partition:%d" % r.partition
        if name == "offset":
            return b"Offset:%d" % r.offset
        if name == "headers":
            if not r.headers:
                return b"NO_HEADERS"
            return self.headers_separator.join(k.encode() + b":" + self._bytes(v) for k, v in r.headers)
        return self._bytes(r.key if name == "key" else r.value)

    def _bytes(self, b) -> bytes:
        return self.null if b is None else b


class JsonFormatter:
    """One JSON object per record: ``topic``, ``partition``, ``offset``, ``timestamp``,
    ``timestamp_type``, ``key``, ``value`` and ``headers`` (a list of ``{"key", "value"}``).
    A key, value or header value that is valid UTF-8 is written as text, any other as
    base64; the field ``<name>_encoding`` beside it says which (``"utf-8"`` or ``"base64"``;
    null for a null)."""

    def __init__(self, props: dict[str, str]):
        self.line_separator = unescape(props.get("line.separator", "\n"))

    def format(self, r) -> bytes:
        """One record as one line of JSON (ASCII), line separator included."""
        out = {"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
               "timestamp_type": r.timestamp_type}
        _put(out, "key", r.key)
        _put(out, "value", r.value)
        out["headers"] = [_put({"key": k}, "value", v) for k, v in r.headers]
        return json.dumps(out).encode() + self.line_separator


def _put(obj: dict, name: str, data) -> dict:
    """Set ``obj[name]`` to ``data`` as text or base64, and ``obj[name + "_encoding"]``."""
    if data is None:
        obj[name], obj[f"{name}_encoding"] = None, None
        return obj
    try:
        obj[name], obj[f"{name}_encoding"] = bytes(data).decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        obj[name], obj[f"{name}_encoding"] = base64.b64encode(data).decode(), "base64"
    return obj


FORMATTERS = {"default": DefaultFormatter, "text": DefaultFormatter, "json": JsonFormatter}


def formatter_name(text: str) -> str:
    """``--formatter``'s value: a name of :data:`FORMATTERS`, or Kafka's class name of its
    DefaultMessageFormatter (``kafka.tools.DefaultMessageFormatter``, as tutorials give it),
    which is ``default``; another of Kafka's classes is refused."""
    if text in FORMATTERS:
        return text
    if text.rpartition(".")[2] == "DefaultMessageFormatter":
        return "default"
    raise argparse.ArgumentTypeError(f"{text!r}: the formatters are default (Kafka's DefaultMessageFormatter) "
                                     f"and json; no other Kafka formatter class is available")


#: Kafka's deserializers whose output the formatters print: a key or value as its bytes
#: (the UTF-8 text a StringDeserializer gives prints as the same bytes)
BYTES_DESERIALIZERS = ("StringDeserializer", "ByteArrayDeserializer")


def deserializer(text: str) -> str:
    """``--key-deserializer`` and ``--value-deserializer``: accepted when the class prints
    what pylog prints (:data:`BYTES_DESERIALIZERS`), else refused."""
    if text.rpartition(".")[2] in BYTES_DESERIALIZERS:
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: keys and values are printed as their bytes, as Kafka's "
                                     f"StringDeserializer and ByteArrayDeserializer print them; no other "
                                     f"deserializer is available")
