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


def parse_request(frame: bytes, request_classes: dict, versions: dict) -> Request:
    """``frame`` as a :class:`Request`, its body decoded with ``request_classes[api_key]``
    at the header's version. Raises :class:`UnsupportedVersion` for a version outside
    ``versions[api_key]`` (min, max), :class:`BadRequest` for an unknown api key or a body
    that does not parse."""
    header = peek_header(frame)
    key, version = header.request_api_key, header.request_api_version
    if key not in request_classes:
        raise BadRequest(f"api key {key} is not implemented")
    low, high = versions[key]
    if not low <= version <= high:
        raise UnsupportedVersion(f"api key {key} version {version} is outside {low}-{high}", header)
    try:
        message = request_classes[key].decode(frame, version=version, header=True)
    except Exception as e:
        raise BadRequest(f"api key {key} version {version}: body does not parse: {e}") from None
    return Request(message.header, message)


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
