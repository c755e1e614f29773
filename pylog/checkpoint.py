"""Kafka's checkpoint files: small text files replaced atomically (docs/format/checkpoints.md).

Format: a version line, an entry-count line, then one entry per line. Written to
``<file>.tmp``, fsynced, renamed over the original, and the directory fsynced, so a
reader sees the old file or the new one, never a mix.
"""

from __future__ import annotations

import os
from typing import Callable

from pylog.errors import CorruptCheckpointError
from pylog.io import DEFAULT_IO, FileIO
from pylog.layout import CHECKPOINT_VERSION


def read_checkpoint(path: str, parse_line: Callable[[list[str]], object], *,
                    version: int = CHECKPOINT_VERSION) -> list:
    """Entries of the checkpoint at ``path`` (an empty or missing file has none).

    Raises :class:`CorruptCheckpointError` naming the file and line for a wrong version,
    a malformed line or a count that does not match.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise CorruptCheckpointError("checkpoint is not UTF-8 text", path=path) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    try:
        found = int(lines[0])
    except ValueError:
        raise CorruptCheckpointError(f"malformed version line {lines[0]!r}", path=path) from None
    if found != version:
        raise CorruptCheckpointError(f"unrecognised version {found} (expected {version})", path=path)
    if len(lines) < 2:
        raise CorruptCheckpointError("missing entry count line", path=path)
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpointError(f"malformed entry count {lines[1]!r}", path=path) from None
    body = lines[2:]
    if count != len(body):
        raise CorruptCheckpointError(f"expected {count} entries but found {len(body)}", path=path)
    out = []
    for i, line in enumerate(body, start=3):
        try:
            out.append(parse_line(line.split()))
        except (ValueError, IndexError):
            raise CorruptCheckpointError(f"malformed line {i}: {line!r}", path=path) from None
    return out


def write_checkpoint(path: str, lines: list[str], *, version: int = CHECKPOINT_VERSION,
                     io: FileIO = DEFAULT_IO) -> None:
    """Replace the checkpoint at ``path`` atomically and durably (tmp, fsync, rename, fsync dir)."""
    text = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    io.write_file(path, text.encode("utf-8"))


def _offset_line(parts: list[str]) -> tuple[tuple[str, int], int]:
    topic, partition, offset = parts
    return (topic, int(partition)), int(offset)


class OffsetCheckpoint:
    """``<topic> <partition> <offset>`` lines: recovery points, log start offsets, high
    watermarks, cleaner offsets."""

    def __init__(self, path, *, io: FileIO = DEFAULT_IO):
        self.path = os.fspath(path)
        self.io = io

    def read(self) -> dict[tuple[str, int], int]:
        return dict(read_checkpoint(self.path, _offset_line))

    def write(self, entries: dict[tuple[str, int], int]) -> None:
        lines = [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
        write_checkpoint(self.path, lines, io=self.io)
