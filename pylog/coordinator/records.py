"""Coordinator records: the key/value pairs Kafka's coordinators keep in their internal
topics (docs/format/consumer-offsets.md).

Each record's key is ``type:int16`` followed by the key message of that type; its value is
``version:int16`` followed by the value message at that version, or null (a tombstone: the
key's state is deleted). A :class:`RecordSet` holds the schemas of one coordinator's record
types and decodes, encodes and renders them as Kafka's ``DumpLogSegments`` prints them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, NamedTuple

from pylog.coordinator.schema import Message, decode, encode, json_text, json_tree
from pylog.errors import InvalidRecordError, MissingKeyError

_INT16 = struct.Struct(">h")
#: what DumpLogSegments prints as the payload of a tombstone
TOMBSTONE_TEXT = "<DELETE>"


class UnknownRecordTypeError(InvalidRecordError):
    """Raised when a coordinator record's key starts with a type this reader does not know."""

    def __init__(self, type_id: int):
        super().__init__(f"unknown record type {type_id}")
        self.type_id = type_id


@dataclass(frozen=True)
class RecordType:
    """One record type: its id (the key's leading int16), key and value schemas, and, when
    Kafka's dump renders the value specially, the function that builds its JSON tree."""
    type_id: int
    key: Message
    value: Message
    value_json: Callable[[int, dict], dict] | None = None


class CoordinatorRecord(NamedTuple):
    type_id: int
    name: str             # the key schema's name, e.g. "OffsetCommitKey"
    key: dict
    value_version: int | None
    value: dict | None    # None: a tombstone


class RecordSet:
    """The record types of one coordinator topic."""

    def __init__(self, types: list[RecordType]):
        self._types = {t.type_id: t for t in types}

    def record_type(self, type_id: int) -> RecordType:
        t = self._types.get(type_id)
        if t is None:
            raise UnknownRecordTypeError(type_id)
        return t

    def decode(self, key: bytes, value: bytes | None) -> CoordinatorRecord:
        """One record from its key and value bytes. Raises :class:`UnknownRecordTypeError`
        for an unknown type and :class:`InvalidRecordError` for bytes that break the schema.
        O(len(key) + len(value))."""
        type_id, key_body = _versioned(key, "key")
        t = self.record_type(type_id)
        key_data = decode(t.key, type_id, key_body)
        if value is None:
            return CoordinatorRecord(type_id, t.key.name, key_data, None, None)
        version, value_body = _versioned(value, "value")
        return CoordinatorRecord(type_id, t.key.name, key_data, version, decode(t.value, version, value_body))

    def encode_key(self, type_id: int, data: dict) -> bytes:
        return _INT16.pack(type_id) + encode(self.record_type(type_id).key, type_id, data)

    def encode_value(self, type_id: int, version: int, data: dict | None) -> bytes | None:
        """The value bytes, or ``None`` (a tombstone) for ``data=None``."""
        if data is None:
            return None
        return _INT16.pack(version) + encode(self.record_type(type_id).value, version, data)

    def dump_text(self, key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
        """``(key text, payload text or None)`` as Kafka's DumpLogSegments prints a record
        of this topic: ``{"type":"T","data":{...}}`` and ``{"version":"V","data":{...}}``
        (``<DELETE>`` for a tombstone); for a record it cannot decode, a key text saying
        so and no payload. Raises :class:`MissingKeyError` for a record without a key,
        which Kafka's tool treats as fatal too."""
        if key is None:
            raise MissingKeyError(f"Failed to decode message at offset {offset} using the specified decoder "
                                     f"(message had a missing key)")
        try:
            rec = self.decode(key, value)
        except UnknownRecordTypeError as e:
            return f"Unknown record type {e.type_id} at offset {offset}, skipping.", None
        except InvalidRecordError as e:
            return f"Error at offset {offset}, skipping. {e.reason}", None
        t = self._types[rec.type_id]
        key_text = json_text({"type": str(rec.type_id), "data": json_tree(t.key, rec.type_id, rec.key)})
        if rec.value is None:
            return key_text, TOMBSTONE_TEXT
        tree = (t.value_json or (lambda v, d: json_tree(t.value, v, d)))(rec.value_version, rec.value)
        return key_text, json_text({"version": str(rec.value_version), "data": tree})


def _versioned(buf: bytes, what: str) -> tuple[int, bytes]:
    if len(buf) < _INT16.size:
        raise InvalidRecordError(f"Could not read version from {what}'s buffer ({len(buf)} bytes)")
    return _INT16.unpack_from(buf)[0], bytes(buf[_INT16.size:])
