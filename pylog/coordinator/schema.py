"""Kafka's message schemas as data, with their binary and JSON forms.

Kafka describes every protocol and coordinator record in a JSON schema: named fields, each
with the versions it exists in, the versions it may be null in, and (in *flexible* versions)
an optional tag. This module is the one owner of the wire types those schemas use:

=============  ==========================================  =============================================
type           classic versions                            flexible versions
=============  ==========================================  =============================================
int8..int64    big-endian two's complement                 same
uuid           16 bytes                                    same
string         int16 length (-1 = null) + UTF-8            uvarint length + 1 (0 = null) + UTF-8
bytes          int32 length (-1 = null) + bytes            uvarint length + 1 (0 = null) + bytes
array          int32 count (-1 = null) + items             uvarint count + 1 (0 = null) + items
struct         its fields (nullable: int8 -1 / 1 first)    its fields, then its tagged fields
=============  ==========================================  =============================================

Tagged fields (flexible versions only) follow a struct's other fields: uvarint count, then per
field uvarint tag, uvarint size, value. Tags this module does not know are kept, in order, and
written back unchanged. Decoded messages are plain dicts keyed by Kafka's JSON field names
(camelCase); fields absent from a version hold their defaults.

:func:`json_tree` and :func:`json_text` give the JSON Kafka's generated converters write:
fields in schema order, only those present in the version, tagged fields only when they differ
from their default, bytes as base64, uuids as Kafka's URL-safe base64 text.
"""

from __future__ import annotations

import base64
import functools
import struct
from dataclasses import dataclass

from pylog.errors import InvalidRecordError
from pylog.record.varint import encode_uvarint as _uvarint

_PRIMITIVES = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
               "int64": struct.Struct(">q")}
_UUID_BYTES = 16
_MAX_UVARINT_BYTES = 5
_UNSET = object()  # a field without an explicit default takes its type's zero value


@functools.lru_cache(maxsize=None)  # a handful of distinct specs, parsed once each
def versions(spec: str) -> tuple[int, int]:
    """``"0+"``, ``"1-3"``, ``"2"`` or ``"none"`` as an inclusive ``(low, high)`` range."""
    if spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 2**15 - 1)
    low, _, high = spec.partition("-")
    return (int(low), int(high or low))


def _in(version: int, span: tuple[int, int]) -> bool:
    return span[0] <= version <= span[1]


@dataclass(frozen=True)
class Array:
    """``[]item``: item is a primitive type name or a :class:`Struct`."""
    item: object


@dataclass(frozen=True)
class Struct:
    fields: tuple


@dataclass(frozen=True)
class Field:
    """One field: ``type`` is a primitive name, :class:`Array` or :class:`Struct`;
    ``present``/``nullable``/``tagged`` are version specs; ``tag`` its tag when tagged;
    ``default`` (``None`` for null) replaces the type's zero value."""
    name: str
    type: object
    present: str = "0+"
    nullable: str = "none"
    default: object = _UNSET
    tag: int | None = None
    tagged: str = "none"

    def exists_in(self, version: int) -> bool:
        return _in(version, versions(self.present))

    def is_tagged_in(self, version: int) -> bool:
        return self.tag is not None and _in(version, versions(self.tagged))

    def nullable_in(self, version: int) -> bool:
        return _in(version, versions(self.nullable))

    def default_value(self):
        if self.default is not _UNSET:
            return self.default
        if isinstance(self.type, Array):
            return []
        if isinstance(self.type, Struct):
            return None
        return {"string": "", "bytes": b"", "uuid": bytes(_UUID_BYTES)}.get(self.type, 0)


@dataclass(frozen=True)
class Message:
    """A top-level schema: its name, valid versions and first flexible version."""
    name: str
    valid: str
    flexible: str
    fields: tuple

    def check_version(self, version: int) -> None:
        if not _in(version, versions(self.valid)):
            raise InvalidRecordError(f"{self.name} has no version {version} (valid versions: {self.valid})")

    def is_flexible(self, version: int) -> bool:
        return _in(version, versions(self.flexible))


# ==== decoding ======================================================================================
class _Reader:
    """Reads wire values from ``buf``; a value running past the end raises InvalidRecordError."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str):
        self.buf = bytes(buf)
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise InvalidRecordError(f"{self.what}: {len(self.buf)} bytes end inside a field at byte {self.pos}")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def primitive(self, name: str) -> int:
        s = _PRIMITIVES[name]
        return s.unpack(self.take(s.size))[0]

    def uvarint(self) -> int:
        value = 0
        for i in range(_MAX_UVARINT_BYTES):
            b = self.take(1)[0]
            value |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                return value
        raise InvalidRecordError(f"{self.what}: unsigned varint longer than {_MAX_UVARINT_BYTES} bytes "
                                 f"at byte {self.pos}")

    def length(self, flexible: bool, classic: str) -> int:
        """A length or count; -1 for null."""
        return self.uvarint() - 1 if flexible else self.primitive(classic)


def decode(message: Message, version: int, buf: bytes) -> dict:
    """The fields of ``message`` at ``version`` from ``buf`` (bytes after the last field are
    ignored, as Kafka ignores them). Raises :class:`InvalidRecordError` for an unknown version
    or bytes that end early or hold an impossible length. O(len(buf))."""
    message.check_version(version)
    reader = _Reader(buf, f"{message.name} v{version}")
    return _read_struct(reader, message.fields, version, message.is_flexible(version))


def _read_struct(r: _Reader, fields: tuple, version: int, flexible: bool) -> dict:
    out = {}
    for f in fields:
        if f.exists_in(version) and not (flexible and f.is_tagged_in(version)):
            out[f.name] = _read_value(r, f, f.type, version, flexible)
        else:
            out[f.name] = f.default_value()
    if flexible:
        by_tag = {f.tag: f for f in fields if f.exists_in(version) and f.is_tagged_in(version)}
        unknown = []
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            raw = r.take(size)
            f = by_tag.get(tag)
            if f is None:
                unknown.append((tag, raw))
            else:
                sub = _Reader(raw, f"{r.what} tag {tag}")
                out[f.name] = _read_value(sub, f, f.type, version, True, tagged=True)
        if unknown:
            out["_unknown_tags"] = unknown
    return out


def _read_value(r: _Reader, f: Field, typ, version: int, flexible: bool, tagged: bool = False):
    if typ in _PRIMITIVES:
        return r.primitive(typ)
    if typ == "uuid":
        return r.take(_UUID_BYTES)
    if isinstance(typ, Struct):
        if f.nullable_in(version):
            present = r.uvarint() > 0 if tagged else r.primitive("int8") >= 0
            if not present:
                return None
        return _read_struct(r, typ.fields, version, flexible)
    n = r.length(flexible, "int32" if typ != "string" else "int16")
    if n < 0:
        if not f.nullable_in(version):
            raise InvalidRecordError(f"{r.what}: field {f.name} is null but not nullable in this version")
        return None
    if typ == "string":
        return r.take(n).decode("utf-8", "replace")
    if typ == "bytes":
        return r.take(n)
    item = typ.item
    if n > len(r.buf) - r.pos:  # every item takes at least one byte
        raise InvalidRecordError(f"{r.what}: field {f.name} claims {n} items in {len(r.buf) - r.pos} bytes")
    if isinstance(item, Struct):
        return [_read_struct(r, item.fields, version, flexible) for _ in range(n)]
    return [_read_value(r, Field(f.name, item), item, version, flexible) for _ in range(n)]


# ==== encoding ======================================================================================
def encode(message: Message, version: int, data: dict) -> bytes:
    """``data`` (a dict as :func:`decode` returns; missing fields take their defaults) in
    ``message``'s wire form at ``version``. Raises :class:`InvalidRecordError` for an unknown
    version. O(size of the result)."""
    message.check_version(version)
    out = bytearray()
    _write_struct(out, message.fields, version, message.is_flexible(version), data)
    return bytes(out)


def _length(out: bytearray, n: int, flexible: bool, classic: str) -> None:
    out += _uvarint(n + 1) if flexible else _PRIMITIVES[classic].pack(n)


def _write_struct(out: bytearray, fields: tuple, version: int, flexible: bool, data: dict) -> None:
    tagged = []
    for f in fields:
        if not f.exists_in(version):
            continue
        value = data.get(f.name, f.default_value())
        if flexible and f.is_tagged_in(version):
            if value != f.default_value():
                raw = bytearray()
                _write_value(raw, f, f.type, version, True, value, tagged=True)
                tagged.append((f.tag, bytes(raw)))
        else:
            _write_value(out, f, f.type, version, flexible, value)
    if flexible:
        tagged = sorted(tagged + list(data.get("_unknown_tags", ())))
        out += _uvarint(len(tagged))
        for tag, raw in tagged:
            out += _uvarint(tag) + _uvarint(len(raw)) + raw


def _write_value(out: bytearray, f: Field, typ, version: int, flexible: bool, value, tagged: bool = False):
    if typ in _PRIMITIVES:
        out += _PRIMITIVES[typ].pack(value)
    elif typ == "uuid":
        out += bytes(value)
    elif isinstance(typ, Struct):
        if f.nullable_in(version):
            if value is None:
                out += _uvarint(0) if tagged else b"\xff"
                return
            out += _uvarint(1) if tagged else b"\x01"
        _write_struct(out, typ.fields, version, flexible, value)
    elif value is None:
        if not f.nullable_in(version):
            raise InvalidRecordError(f"field {f.name} is not nullable in version {version}")
        _length(out, -1, flexible, "int16" if typ == "string" else "int32")
    elif typ in ("string", "bytes"):
        raw = value.encode("utf-8") if typ == "string" else bytes(value)
        _length(out, len(raw), flexible, "int16" if typ == "string" else "int32")
        out += raw
    else:
        _length(out, len(value), flexible, "int32")
        for item in value:
            if isinstance(typ.item, Struct):
                _write_struct(out, typ.item.fields, version, flexible, item)
            else:
                _write_value(out, Field(f.name, typ.item), typ.item, version, flexible, item)


# ==== JSON ==========================================================================================
def json_tree(message: Message, version: int, data: dict) -> dict:
    """The JSON object Kafka's generated converter writes for ``data`` at ``version``, as
    Python values ready for :func:`json_text` (bytes already base64 text)."""
    return _struct_tree(message.fields, version, message.is_flexible(version), data)


def _struct_tree(fields: tuple, version: int, flexible: bool, data: dict) -> dict:
    out = {}
    for f in fields:
        if not f.exists_in(version):
            continue
        value = data.get(f.name, f.default_value())
        if flexible and f.is_tagged_in(version) and value == f.default_value():
            continue
        out[f.name] = _value_tree(f.type, version, flexible, value)
    return out


def _value_tree(typ, version: int, flexible: bool, value):
    if value is None:
        return None
    if typ == "bytes":
        return base64.b64encode(value).decode("ascii")
    if typ == "uuid":
        return uuid_text(value)
    if isinstance(typ, Struct):
        return _struct_tree(typ.fields, version, flexible, value)
    if isinstance(typ, Array):
        return [_value_tree(typ.item, version, flexible, v) for v in value]
    return value


def uuid_text(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(s: str) -> str:
    """A JSON string as Jackson writes it: short escapes where JSON has them, ``\\u00XX``
    (upper-case hex) for other control characters, everything else as is."""
    return '"' + "".join(_SHORT_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if c < " " else c) for c in s) + '"'


def json_text(tree) -> str:
    """Compact JSON text of a tree from :func:`json_tree`, byte for byte as Jackson's
    ``JsonNode.toString()`` writes it."""
    if tree is None:
        return "null"
    if tree is True or tree is False:
        return "true" if tree else "false"
    if isinstance(tree, str):
        return _quote(tree)
    if isinstance(tree, dict):
        return "{" + ",".join(f"{_quote(k)}:{json_text(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, list):
        return "[" + ",".join(json_text(v) for v in tree) + "]"
    return str(tree)
