"""Requests and responses on the wire, as Kafka's ``RequestChannel`` hands them between the
sockets and ``KafkaApis``: a frame (the bytes after the 4-byte size) becomes a
:class:`Request` (its header and body decoded), a response body becomes a frame.

Every layout comes from kafka-python's message classes, generated from Kafka's own JSON
message definitions (``kafka.protocol``), including the flexible versions' compact fields
and tagged fields; nothing here spells out a message's fields. Cost: O(frame bytes) to
decode or encode, one copy.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from pylog.errors import MissingDependencyError

try:
    from kafka.protocol.api_header import RequestHeader
except ImportError as e:  # pragma: no cover - the serve extra is missing
    raise MissingDependencyError("pylog serve needs kafka-python 3 (its kafka.protocol message classes): "
                                 "pip install 'pylog-kafka[serve]'") from e


class BadRequest(Exception):
    """A frame the server cannot answer: it closes the connection, as Kafka's broker does
    for a request it cannot parse (the client reconnects and asks ApiVersions again)."""


class UnsupportedVersion(BadRequest):
    """A known API at a version this server does not implement. ApiVersions answers it
    with ``UNSUPPORTED_VERSION`` at version 0; any other API closes the connection."""

    def __init__(self, message: str, header):
        super().__init__(message)
        self.header = header


@dataclass
class Request:
    """One decoded request: ``header`` (api key, version, correlation id, client id) and
    ``body`` (the request message, fields in snake case as in Kafka's JSON)."""

    header: object
    body: object

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version


def peek_header(frame: bytes):
    """The header of ``frame`` read as the non-flexible header (version 1): its api key,
    version, correlation id and client id are laid out the same in every header version,
    so this is enough to pick the message class. Raises :class:`BadRequest` when even
    that does not parse."""
    try:
        return RequestHeader.decode(io.BytesIO(frame), flexible=False)
    except Exception as e:  # kafka-python raises struct.error, ValueError, UnicodeDecodeError...
        raise BadRequest(f"request header does not parse: {e}") from None


def parse_request(frame: bytes, request_classes, versions: dict) -> Request:
    """``frame`` as a :class:`Request`, its body decoded with ``request_classes[api_key]``
    at the header's version. Raises :class:`UnsupportedVersion` for a version outside
    ``versions[api_key]`` (min, max), :class:`BadRequest` for an api key ``versions`` lacks
    or a body that does not parse, null where the message's definition allows no null
    included (as Kafka's generated readers refuse it)."""
    header = peek_header(frame)
    key, version = header.request_api_key, header.request_api_version
    if key not in versions:
        raise BadRequest(f"api key {key} is not implemented")
    low, high = versions[key]
    if not low <= version <= high:
        raise UnsupportedVersion(f"api key {key} version {version} is outside {low}-{high}", header)
    try:
        message = request_classes[key].decode(frame, version=version, header=True)
    except Exception as e:
        raise BadRequest(f"api key {key} version {version}: body does not parse: {e}") from None
    null = _null_field(message, message.fields, version)
    if null is not None:
        raise BadRequest(f"api key {key} version {version}: {null} is null, which its definition does not allow")
    return Request(message.header, message)


#: the types whose null is a length of -1 (or a compact length of 0)
_NULL_LENGTH_TYPES = ("string", "bytes", "records")


def _null_field(value, fields, version: int) -> str | None:
    """The path of the first field of ``value`` (a decoded message or struct whose
    definition is ``fields``) that is null though not nullable at ``version``, or None.
    kafka-python's decoders read a null length as None whatever the definition says.
    Cost: O(fields and array items)."""
    for field in fields.values() if isinstance(fields, dict) else fields:
        if not field.for_version_q(version):
            continue
        item = getattr(value, field.name, None)
        if item is None:
            if field.nullable_for_version_q(version) or field.tagged_field_q(version) or not (
                    field.is_array() or field.is_struct() or field.type_str in _NULL_LENGTH_TYPES):
                continue  # a uuid of zeros decodes as None too
            return field.name
        if field.is_struct_array():
            for i, element in enumerate(item):
                inner = _null_field(element, field.fields, version)
                if inner is not None:
                    return f"{field.name}[{i}].{inner}"
        elif field.is_array():
            if any(element is None for element in item):
                return f"{field.name}[]"
        elif field.is_struct():
            inner = _null_field(item, field.fields, version)
            if inner is not None:
                return f"{field.name}.{inner}"
    return None


def encode_response(request: Request, body) -> bytes:
    """``body`` framed (4-byte size, response header, message) at the request's version.
    The header is flexible when the version is (but for ApiVersions, whose response header
    never is: its class says so). Cost: O(response bytes)."""
    return encode_body(body, request.api_version, request.header.correlation_id)


def encode_body(body, version: int, correlation_id: int) -> bytes:
    """``body`` framed with a response header at ``version`` (the version is set before the
    header: kafka-python's ``encode(version=...)`` would write it into a response header,
    which has no such field)."""
    body.API_VERSION = version
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))
