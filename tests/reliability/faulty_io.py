"""An I/O seam that forgets: a ``FileIO`` that remembers what each file held at its last
fsync, so a test can simulate power loss (drop everything written since, or keep a
random prefix of it) and inject ENOSPC/EIO into writes. Every write pylog makes goes
through it: segments, their indexes, checkpoints and snapshots."""

from __future__ import annotations

import errno
import os
import random

from pylog.errors import StorageError
from pylog.io import FileIO

SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


class FaultyIO(FileIO):
    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.synced: dict[str, bytes] = {}     # path -> contents at its last fsync
        self.paths: dict[int, str] = {}        # fd -> path
        self.created: set[str] = set()         # files this seam created
        self.fail_after_bytes: int | None = None
        self.fail_path_suffix: str | None = None  # every write to a file whose name ends so fails
        self.fail_errno = errno.ENOSPC
        self.written = 0
        self.faults = 0

    def open(self, path, *, create=True):
        existed = os.path.exists(path)
        fd = super().open(path, create=create)
        self.paths[fd] = path
        if not existed:
            self.created.add(path)
        if existed and path not in self.synced:
            with open(path, "rb") as f:
                self.synced[path] = f.read()
        return fd

    def pwrite(self, fd, data, position):
        if self.fail_path_suffix is not None and self.paths.get(fd, "").endswith(self.fail_path_suffix):
            self.faults += 1
            raise StorageError(self.fail_errno, f"write failed: {os.strerror(self.fail_errno)}")
        if self.fail_after_bytes is not None and self.written + len(data) > self.fail_after_bytes:
            self.faults += 1
            keep = max(0, self.fail_after_bytes - self.written)
            if keep:  # a torn write: part of it reached the file
                super().pwrite(fd, memoryview(data)[:keep], position)
            raise StorageError(self.fail_errno, f"write failed: {os.strerror(self.fail_errno)}")
        self.written += len(data)
        super().pwrite(fd, data, position)

    def fsync(self, fd):
        """Remember what the file holds: that, not what the disk's cache holds, is what
        ``power_loss`` keeps. No real fsync: no test of this seam loses power for real, and each
        waits milliseconds on a shared disk (with fsync_dir's, two thirds of the power-loss test)."""
        path = self.paths.get(fd)
        if path is not None:
            with open(path, "rb") as f:
                self.synced[path] = f.read()

    def fsync_dir(self, path):
        """Nothing: the seam takes a rename as durable at once (``rename`` carries what it
        remembers over), so no real directory fsync decides what ``power_loss`` keeps."""

    def close(self, fd):
        self.paths.pop(fd, None)
        super().close(fd)

    def rename(self, src, dst):
        super().rename(src, dst)
        if src in self.synced:
            self.synced[dst] = self.synced.pop(src)
        if src in self.created:
            self.created.discard(src)
            self.created.add(dst)

    def remove(self, path):
        super().remove(path)
        self.synced.pop(path, None)
        self.created.discard(path)

    def write_file(self, path, data, *, fsync=True):
        super().write_file(path, data, fsync=fsync)
        if fsync:
            self.synced[path] = bytes(data)

    def power_loss(self, directory: str, *, keep_random_prefix: bool = False) -> int:
        """Put every file the seam wrote back to what it held at its last fsync (plus, if
        asked, a random prefix of what came after); segment and index files it created
        and never fsynced are gone. Returns the bytes forgotten."""
        lost = 0
        for path, synced in list(self.synced.items()):
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                now = f.read()
            keep = synced
            if keep_random_prefix and len(now) > len(synced) and now.startswith(synced):
                keep = now[: self.rng.randint(len(synced), len(now))]
            if keep != now:
                lost += max(0, len(now) - len(keep))
                with open(path, "wb") as f:
                    f.write(keep)
        for root, _, files in os.walk(directory):
            for name in files:
                p = os.path.join(root, name)
                if p.endswith(SEGMENT_FILE_SUFFIXES) and p in self.created and p not in self.synced:
                    lost += os.path.getsize(p)
                    os.remove(p)  # never fsynced: the file itself may be gone
        return lost
