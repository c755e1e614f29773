"""The one seam all of pylog's file writes go through: segments, indexes, checkpoints,
snapshots.

``FileIO`` is the real thing (``os`` calls). A test swaps in a subclass that injects
faults (ENOSPC, EIO) or forgets everything written since the last ``fsync`` to
simulate power loss, then checks nothing acknowledged was lost. Reads use ``os.pread``
directly (indexes through a read-only map): they change nothing, so they need no seam.
Nothing is written through a memory map: a full disk is an error from a write call, never
a fault on a mapped page.
"""

from __future__ import annotations

import contextlib
import errno
import os

from pylog.errors import StorageError


class FileIO:
    """Durable-write primitives. Every method raises :class:`StorageError` on failure."""

    def open(self, path: str, *, create: bool = True) -> int:
        """Open ``path`` for reading and writing (created when missing). Returns the fd."""
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise StorageError(e.errno, f"cannot open {path}: {e.strerror}") from None

    def pwrite(self, fd: int, data, position: int) -> None:
        """Write all of ``data`` at ``position`` (one call unless the write comes up short)."""
        try:
            n = os.pwrite(fd, data, position)
            view = memoryview(data)[n:] if n != len(data) else None
            while view:
                position += n
                n = os.pwrite(fd, view, position)
                if n <= 0:
                    raise OSError(errno.EIO, "short write")
                view = view[n:]
        except OSError as e:
            raise StorageError(e.errno, f"write failed: {e.strerror}") from None

    def truncate(self, fd: int, size: int) -> None:
        try:
            os.ftruncate(fd, size)
        except OSError as e:
            raise StorageError(e.errno, f"truncate failed: {e.strerror}") from None

    def fsync(self, fd: int) -> None:
        try:
            os.fsync(fd)
        except OSError as e:
            raise StorageError(e.errno, f"fsync failed: {e.strerror}") from None

    def fsync_path(self, path: str) -> None:
        """fsync the file at ``path`` (written through an fd since closed); no-op if absent."""
        if not os.path.exists(path):
            return
        fd = self.open(path, create=False)
        try:
            self.fsync(fd)
        finally:
            self.close(fd)

    def fsync_dir(self, path: str) -> None:
        """fsync a directory so renames and creations in it are durable."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass  # some file systems refuse fsync on directories
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        try:
            os.replace(src, dst)
        except OSError as e:
            raise StorageError(e.errno, f"cannot rename {src} to {dst}: {e.strerror}") from None

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(e.errno, f"cannot remove {path}: {e.strerror}") from None

    def close(self, fd: int) -> None:
        try:
            os.close(fd)
        except OSError:
            pass

    def write_file(self, path: str, data: bytes, *, fsync: bool = True) -> None:
        """Write a whole small file atomically: ``path.tmp``, fsync, rename, fsync dir.
        On failure the old file is untouched and no ``.tmp`` is left (on a full disk it
        would hold space)."""
        tmp = path + ".tmp"
        fd = self.open(tmp)
        try:
            try:
                self.truncate(fd, 0)
                self.pwrite(fd, data, 0)
                if fsync:
                    self.fsync(fd)
            finally:
                self.close(fd)
            self.rename(tmp, path)
        except StorageError:
            with contextlib.suppress(StorageError):
                self.remove(tmp)
            raise
        if fsync:
            self.fsync_dir(os.path.dirname(path) or ".")


#: The seam used when a caller passes none.
DEFAULT_IO = FileIO()
