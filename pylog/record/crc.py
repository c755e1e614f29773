"""CRC-32C (Castagnoli), the checksum of v2 batches (docs/format/batch.md) and of producer
snapshots, computed by the ``crc32c`` package (the CPU's CRC instructions where it has them).

The package is loaded by the first checksum, not by ``import pylog``: its import reads its
own distribution metadata (~40 ms, more than the rest of the record codec). Callers look
the function up here at each call (``crc.crc32c(data)``), so after the first they call the
package's own.
"""

from __future__ import annotations


def crc32c(data, value: int = 0) -> int:
    """The CRC-32C of the bytes-like ``data``, continued from ``value``. The first call
    loads the ``crc32c`` package and puts its function in this one's place. Cost: O(len)."""
    global crc32c
    from crc32c import crc32c as native
    crc32c = native
    return native(data, value)
