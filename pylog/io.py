"""The one seam all of pylog's file writes go through.

``FileIO`` is the real thing (``os`` calls). A test swaps in a subclass that injects
faults (ENOSPC, EIO) or forgets everything written since the last ``fsync`` to
simulate power loss, then checks nothing acknowledged was lost. Reads use ``os.pread``
directly: they change nothing, so they need no seam.
"""

from __future__ import annotations

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
        """Write all of ``data`` at ``position`` (loops over short writes)."""
        view = memoryview(data)
        try:
            while view:
                n = os.pwrite(fd, view, position)
                if n <= 0:
                    raise OSError(errno.EIO, "short write")
                view = view[n:]
                position += n
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
        """Write a whole small file atomically: ``path.tmp``, fsync, rename, fsync dir."""
        tmp = path + ".tmp"
        fd = self.open(tmp)
        try:
            self.truncate(fd, 0)
            self.pwrite(fd, data, 0)
            if fsync:
                self.fsync(fd)
        finally:
            self.close(fd)
        self.rename(tmp, path)
        if fsync:
            self.fsync_dir(os.path.dirname(path) or ".")


def fsync_path(path: str) -> None:
    """fsync a file by name (for files written through a map or plain appends); no-op if absent."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: The seam used when a caller passes none.
DEFAULT_IO = FileIO()
