"""A real full disk for tests: a size-limited tmpfs mounted for one test (root only, the
test is skipped otherwise) and a filler file that takes every free page of it, then gives
them back one page at a time."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess

import pytest

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def value(i: int) -> bytes:
    """The value of record ``i`` (its offset in the tests' logs)."""
    return b"%08d" % i + b"." * (i % 23)


@contextlib.contextmanager
def mounted_tmpfs(path, size_bytes: int):
    """Mount a tmpfs of ``size_bytes`` at ``path`` for the duration; unmounted after.
    Skips the test when not root or when the mount is refused (e.g. in a container)."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs root, to mount a size-limited tmpfs")
    os.makedirs(path, exist_ok=True)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs at {path}: {mount.stderr.strip()}")
    try:
        yield str(path)
    finally:
        if subprocess.run(["umount", str(path)]).returncode != 0:
            subprocess.run(["umount", "--lazy", str(path)], check=True)


class Filler:
    """A file that fills its file system: ``fill()`` takes every free page, ``free_page()``
    gives one back, ``free_all()`` all of them."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.size_bytes = os.fstat(self.fd).st_size

    def fill(self) -> None:
        page = b"\xff" * PAGE_BYTES
        while True:
            try:
                written = os.pwrite(self.fd, page, self.size_bytes)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                return
            self.size_bytes += written

    def free_page(self) -> None:
        self.size_bytes = max(0, (self.size_bytes - 1) // PAGE_BYTES * PAGE_BYTES)
        os.ftruncate(self.fd, self.size_bytes)

    def free_all(self) -> None:
        self.size_bytes = 0
        os.ftruncate(self.fd, 0)
