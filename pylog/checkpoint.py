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
    return parse_checkpoint(text, parse_line, path=path, version=version)


def parse_checkpoint(text: str, parse_line: Callable[[list[str]], object], *, path: str | None = None,
                     version: int = CHECKPOINT_VERSION) -> list:
    """Entries of a checkpoint's text (``path`` names it in errors), as :func:`read_checkpoint`."""
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

    @staticmethod
    def parse(data: bytes, path: str | None = None) -> dict[tuple[str, int], int]:
        """The entries of a checkpoint's bytes (read from object storage)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptCheckpointError("checkpoint is not UTF-8 text", path=path) from None
        return dict(parse_checkpoint(text, _offset_line, path=path))

    def write(self, entries: dict[tuple[str, int], int]) -> None:
        lines = [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
        write_checkpoint(self.path, lines, io=self.io)


def _epoch_line(parts: list[str]) -> tuple[int, int]:
    epoch, start = parts
    return int(epoch), int(start)


class LeaderEpochCheckpoint:
    """``<epoch> <start offset>`` lines of a partition's ``leader-epoch-checkpoint``."""

    def __init__(self, path, *, io: FileIO = DEFAULT_IO):
        self.path = os.fspath(path)
        self.io = io

    def read(self) -> list[tuple[int, int]]:
        return read_checkpoint(self.path, _epoch_line)

    def write(self, entries: list[tuple[int, int]]) -> None:
        write_checkpoint(self.path, [f"{e} {o}" for e, o in entries], io=self.io)


def read_partition_metadata(path) -> dict[str, str]:
    """``partition.metadata``: ``version: 0`` and ``topic_id: <base64 uuid>``."""
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                key, sep, value = line.partition(":")
                if not sep:
                    raise CorruptCheckpointError(f"malformed line {i}: {line.strip()!r}", path=os.fspath(path))
                out[key.strip()] = value.strip()
    except UnicodeDecodeError:
        raise CorruptCheckpointError("partition metadata is not UTF-8 text", path=os.fspath(path)) from None
    if out.get("version") != "0" or "topic_id" not in out:
        raise CorruptCheckpointError("partition metadata lacks version 0 or topic_id", path=os.fspath(path))
    return out


def write_partition_metadata(path, topic_id: str, *, io: FileIO = DEFAULT_IO) -> None:
    """Replace ``partition.metadata`` atomically and durably, as Kafka writes it (no newline
    after the topic id)."""
    io.write_file(os.fspath(path), f"version: 0\ntopic_id: {topic_id}".encode("utf-8"))
