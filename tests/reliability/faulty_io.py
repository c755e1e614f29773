"""An I/O seam that forgets: a ``FileIO`` that remembers what each file held at its last
fsync, so a test can simulate power loss (drop everything written since, or keep a
random prefix of it) and inject ENOSPC/EIO into writes."""

from __future__ import annotations

import errno
import os
import random

from pylog.errors import StorageError
from pylog.io import FileIO


class FaultyIO(FileIO):
    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.synced: dict[str, bytes] = {}     # path -> contents at its last fsync
        self.paths: dict[int, str] = {}        # fd -> path
        self.fail_after_bytes: int | None = None
        self.fail_errno = errno.ENOSPC
        self.written = 0
        self.faults = 0

    def open(self, path, *, create=True):
        existed = os.path.exists(path)
        fd = super().open(path, create=create)
        self.paths[fd] = path
        if existed and path not in self.synced:
            with open(path, "rb") as f:
                self.synced[path] = f.read()
        return fd

    def pwrite(self, fd, data, position):
        if self.fail_after_bytes is not None and self.written + len(data) > self.fail_after_bytes:
            self.faults += 1
            keep = max(0, self.fail_after_bytes - self.written)
            if keep:  # a torn write: part of it reached the file
                super().pwrite(fd, memoryview(data)[:keep], position)
            raise StorageError(self.fail_errno, f"write failed: {os.strerror(self.fail_errno)}")
        self.written += len(data)
        super().pwrite(fd, data, position)

    def fsync(self, fd):
        super().fsync(fd)
        path = self.paths.get(fd)
        if path is not None:
            with open(path, "rb") as f:
                self.synced[path] = f.read()

    def close(self, fd):
        self.paths.pop(fd, None)
        super().close(fd)

    def rename(self, src, dst):
        super().rename(src, dst)
        if src in self.synced:
            self.synced[dst] = self.synced.pop(src)

    def remove(self, path):
        super().remove(path)
        self.synced.pop(path, None)

    def write_file(self, path, data, *, fsync=True):
        super().write_file(path, data, fsync=fsync)
        if fsync:
            self.synced[path] = bytes(data)

    def power_loss(self, directory: str, *, keep_random_prefix: bool = False) -> int:
        """Put every file the seam wrote back to what it held at its last fsync (plus, if
        asked, a random prefix of what came after). Index files, written through maps, get
        a random tail of zeros. Returns the bytes forgotten."""
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
                if p.endswith((".index", ".timeindex")) and self.rng.random() < 0.5:
                    size = os.path.getsize(p)
                    with open(p, "r+b") as f:
                        f.seek(self.rng.randint(0, size) if size else 0)
                        f.write(b"\0" * self.rng.randint(0, 64))
                elif p.endswith(".log") and p not in self.synced:
                    os.remove(p)  # never fsynced: the file itself may be gone
        return lost
