"""Kafka's five codecs, with Kafka's framings (docs/format/batch.md#compression).

- gzip: RFC 1952 members (stdlib ``zlib``), with the header Java's GZIPOutputStream writes.
- snappy: xerial framing on write (16-byte header, 32 KiB blocks), xerial or raw
  snappy on read (``cramjam``, the Rust ``snap`` codec, which python-snappy also uses).
- lz4: LZ4 frames with independent 64 KiB blocks and no checksums (``lz4`` package); the
  fast compressor at Kafka's default level 9, the high-compression one at other levels.
  Magic-0 data carries Kafka's old broken header checksum; it is repaired before decoding.
- zstd: standard frames without a content size, ending in an empty last block, as Kafka's
  streaming ZstdOutputStream writes them (``zstandard`` package).

Decompression output is bounded by ``max_output_bytes`` so a crafted input cannot make
pylog allocate more than it implies; past the bound a :class:`InvalidRecordError` says so.
Cost: one pass over the input, one output buffer. Each codec's library loads with the
codec's first use: ``import pylog`` and uncompressed data need none of them (~20 ms).
"""

from __future__ import annotations

import struct
import zlib

from pylog.errors import InvalidRecordError, UnsupportedCompressionError
from pylog.layout import COMPRESSION_IDS, COMPRESSION_NAMES, INT32_MAX

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)

#: Kafka codec ids by name and back.
CODEC_IDS = COMPRESSION_IDS
CODEC_NAMES = COMPRESSION_NAMES

#: Upper bound of a decompressed batch, whatever the input: Kafka's own segment limit (2 GiB).
HARD_MAX_OUTPUT_BYTES = INT32_MAX

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_MAGIC = _XERIAL_HEADER[:8]
_XERIAL_BLOCK_BYTES = 32 * 1024
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
#: FLG (version 1, independent blocks, no checksums, no content size) and BD (64 KiB blocks)
_LZ4_DESCRIPTOR = b"\x60\x40"
_LZ4_BLOCK_BYTES = 64 * 1024
_LZ4_UNCOMPRESSED_FLAG = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"
#: Java's GZIPOutputStream header: magic, deflate, no flags, no time, no extra flags, OS unknown
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

#: Kafka's default levels (compression.gzip.level, compression.lz4.level, compression.zstd.level)
GZIP_DEFAULT_LEVEL = 6
LZ4_DEFAULT_LEVEL = 9
ZSTD_DEFAULT_LEVEL = 3

_zstd_compressors: dict = {}  # level -> zstandard.ZstdCompressor


def _codec_errors() -> tuple:
    """What the codec libraries raise for bytes they cannot decompress (each its own type)."""
    import cramjam
    import zstandard

    return zlib.error, cramjam.DecompressionError, RuntimeError, zstandard.ZstdError, ValueError


def codec_id(compression: str | int) -> int:
    """Kafka's id for a codec given by name (``"gzip"``) or id; raises on anything else."""
    if isinstance(compression, int) and not isinstance(compression, bool):
        if 0 <= compression < len(CODEC_NAMES):
            return compression
    elif isinstance(compression, str):
        cid = CODEC_IDS.get(compression.lower())
        if cid is not None:
            return cid
    raise UnsupportedCompressionError(
        f"unknown compression {compression!r}; expected one of {', '.join(CODEC_NAMES)}")


def compress(codec: int, data: bytes, level: int | None = None, *, magic: int = 2) -> bytes:
    """Compress ``data`` with Kafka's framing for ``codec``. Cost: O(len(data))."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _gzip_compress(data, GZIP_DEFAULT_LEVEL if level is None or level < 0 else level)
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        out = _lz4_compress(data, level)
        return _break_lz4_header_checksum(out) if magic == 0 else out
    if codec == ZSTD:
        if magic < 2:
            raise UnsupportedCompressionError("zstd needs record batch magic 2")
        return _zstd_compress(data, ZSTD_DEFAULT_LEVEL if level is None else level)
    raise UnsupportedCompressionError(f"unknown compression id {codec}")


def _gzip_compress(data, level: int) -> bytes:
    """One gzip member with the header Java's GZIPOutputStream writes (no time, no extra
    flags, OS 255), so that with the same zlib the bytes are Kafka's."""
    c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = c.compress(data) + c.flush()
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def _lz4_compress(data, level: int | None) -> bytes:
    """Kafka's lz4 frame: 64 KiB independent blocks, no checksums. Kafka compresses with
    lz4's fast compressor at its default level (9, and pylog's levels up to 0), with the
    high-compression one at any other level."""
    from lz4 import block as _lz4b, frame as _lz4f

    if level is None or level <= 0 or level == LZ4_DEFAULT_LEVEL:
        return _lz4f.compress(data, compression_level=0 if level is None or level == LZ4_DEFAULT_LEVEL else level,
                              block_size=_lz4f.BLOCKSIZE_MAX64KB, block_linked=False,
                              content_checksum=False, store_size=False)
    parts = [_LZ4_MAGIC, _LZ4_DESCRIPTOR, bytes([(xxh32(_LZ4_DESCRIPTOR) >> 8) & 0xFF])]
    mv = memoryview(data)
    for i in range(0, len(mv), _LZ4_BLOCK_BYTES):
        block = mv[i:i + _LZ4_BLOCK_BYTES]
        packed = _lz4b.compress(block, mode="high_compression", compression=level, store_size=False)
        if len(packed) >= len(block):  # stored as it is, the size's high bit set
            parts += [struct.pack("<I", len(block) | _LZ4_UNCOMPRESSED_FLAG), bytes(block)]
        else:
            parts += [struct.pack("<I", len(packed)), packed]
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _zstd_compress(data, level: int) -> bytes:
    """A zstd frame as Kafka's ZstdOutputStream writes it: no content size, the data's
    blocks flushed, then an empty last block."""
    import zstandard

    c = _zstd_compressors.get(level)
    if c is None:
        c = _zstd_compressors[level] = zstandard.ZstdCompressor(level=level, write_content_size=False)
    stream = c.compressobj()
    return stream.compress(data) + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + stream.flush()


def decompress(codec: int, data, *, magic: int = 2, max_output_bytes: int | None = None) -> bytes:
    """Decompress one Kafka compressed payload. Raises :class:`InvalidRecordError` on
    damaged input or output larger than ``max_output_bytes``."""
    limit = HARD_MAX_OUTPUT_BYTES if max_output_bytes is None else max_output_bytes
    try:
        if codec == GZIP:
            out = _gunzip(data, limit)
        elif codec == SNAPPY:
            out = _snappy_decompress(data, limit)
        elif codec == LZ4:
            out = _lz4_decompress(data, magic, limit)
        elif codec == ZSTD:
            out = _zstd_decompress(data, limit)
        elif codec == NONE:
            out = bytes(data)
        else:
            raise UnsupportedCompressionError(f"unknown compression id {codec}")
    except InvalidRecordError:
        raise
    except _codec_errors() as e:  # evaluated only for an exception
        raise InvalidRecordError(f"{CODEC_NAMES[codec]} payload does not decompress: {e}") from None
    if len(out) > limit:
        raise InvalidRecordError(f"{CODEC_NAMES[codec]} payload decompresses past {limit} bytes")
    return out


def _gunzip(data, limit: int) -> bytes:
    parts = []
    total = 0
    data = bytes(data)
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(data, limit - total + 1)
        if d.unconsumed_tail:
            raise InvalidRecordError(f"gzip payload decompresses past {limit} bytes")
        if not d.eof:
            raise InvalidRecordError("gzip payload is truncated")
        parts.append(chunk)
        total += len(chunk)
        data = d.unused_data  # concatenated gzip members
    return b"".join(parts)


def _xerial_compress(data) -> bytes:
    import cramjam

    parts = [_XERIAL_HEADER]
    mv = memoryview(data)
    for i in range(0, len(mv), _XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(mv[i:i + _XERIAL_BLOCK_BYTES]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data, limit: int) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != _XERIAL_MAGIC or len(mv) < 16:
        return _snappy_raw(mv, limit)
    pos, parts, total = 16, [], 0
    while pos < len(mv):
        if pos + 4 > len(mv):
            raise InvalidRecordError("xerial snappy block length is truncated")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > len(mv):
            raise InvalidRecordError(f"xerial snappy block of {n} bytes overruns the payload")
        block = _snappy_raw(mv[pos:pos + n], limit - total)
        parts.append(block)
        total += len(block)
        pos += n
    return b"".join(parts)


def _snappy_raw(mv, limit: int) -> bytes:
    declared = _uvarint_prefix(mv)
    if declared > limit:
        raise InvalidRecordError(f"snappy block declares {declared} bytes, past the {limit}-byte bound")
    import cramjam

    return bytes(cramjam.snappy.decompress_raw(mv))


def _uvarint_prefix(mv) -> int:
    value = shift = 0
    for i in range(min(len(mv), 5)):
        b = mv[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value
        shift += 7
    raise InvalidRecordError("snappy block length prefix is malformed")


def _lz4_decompress(data, magic: int, limit: int) -> bytes:
    from lz4 import frame as _lz4f

    buf = bytes(data)
    if magic == 0 and buf[:4] == _LZ4_MAGIC:
        buf = _repair_lz4_header_checksum(buf)
    parts, total = [], 0
    while buf:  # one or more concatenated frames
        d = _lz4f.LZ4FrameDecompressor()
        chunk = d.decompress(buf, max_length=limit - total + 1)
        total += len(chunk)
        if total > limit:
            raise InvalidRecordError(f"lz4 payload decompresses past {limit} bytes")
        if not d.eof:
            raise InvalidRecordError("lz4 payload is truncated")
        parts.append(chunk)
        buf = d.unused_data
    return b"".join(parts)


def _lz4_descriptor_end(buf: bytes) -> int:
    if len(buf) < 7:
        raise InvalidRecordError("lz4 frame header is truncated")
    flg = buf[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _repair_lz4_header_checksum(buf: bytes) -> bytes:
    """Kafka 0.8/0.9 hashed the magic into the header checksum; Kafka skips the check for
    magic-0 data, so pylog rewrites the byte to the correct value before decoding."""
    end = _lz4_descriptor_end(buf)
    hc = (xxh32(buf[4:end]) >> 8) & 0xFF
    return buf[:end] + bytes([hc]) + buf[end + 1:]


def _break_lz4_header_checksum(buf: bytes) -> bytes:
    end = _lz4_descriptor_end(buf)
    hc = (xxh32(buf[0:end]) >> 8) & 0xFF
    return buf[:end] + bytes([hc]) + buf[end + 1:]


#: The most a zstd input byte can expand to (an RLE block: 4 bytes for 128 KiB), used to
#: feed the decoder slices small enough that its output cannot overshoot the bound by much.
_ZSTD_MAX_RATIO = 32768


def _zstd_decompress(data, limit: int) -> bytes:
    """Decode one or more frames, feeding input in slices sized so the output stays within
    ``limit`` plus ~2 MiB even for a crafted input. O(len(output))."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    rest = memoryview(bytes(data))
    parts, total = [], 0
    while len(rest):
        d = dctx.decompressobj()
        pos = 0
        while pos < len(rest) and not d.eof:
            step = max(64, (limit - total) // _ZSTD_MAX_RATIO)
            chunk = d.decompress(rest[pos:pos + step])
            pos += step
            total += len(chunk)
            if total > limit:
                raise InvalidRecordError(f"zstd payload decompresses past {limit} bytes")
            parts.append(chunk)
        if not d.eof:
            raise InvalidRecordError("zstd payload is truncated")
        unused = d.unused_data
        rest = rest[pos:] if not unused else memoryview(unused + bytes(rest[pos:]))
    return b"".join(parts)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of a short input (the lz4 frame descriptor). Pure Python: O(n), for a few bytes."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for k in range(4):
                lane = int.from_bytes(data[i:i + 4], "little")
                v[k] = (_rotl((v[k] + lane * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
