"""Portability: pylog runs on Linux and macOS; elsewhere the POSIX features raise a clear
UnsupportedPlatformError where they are used, and a missing C extension is warned about once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

import pylog.platform
from pylog import Log, PylogError, SpeedupsMissingWarning, UnsupportedPlatformError


@pytest.fixture
def windows(monkeypatch):
    """The platform check answers as it would on Windows; the OS underneath is unchanged."""
    monkeypatch.setattr(pylog.platform, "is_supported", lambda platform=None: False)


def test_this_platform_is_supported():
    assert pylog.platform.is_supported()
    assert pylog.platform.is_supported("linux") and pylog.platform.is_supported("darwin")
    assert not pylog.platform.is_supported("win32")


def test_writer_lock_off_posix_is_a_clear_pylog_error(tmp_path, windows):
    with pytest.raises(UnsupportedPlatformError, match="writer lock needs Linux or macOS") as e:
        Log.open(tmp_path / "t-0")
    assert isinstance(e.value, PylogError) and "\n" not in str(e.value)


def test_sendfile_off_posix_is_a_clear_pylog_error(tmp_path, monkeypatch):
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"x" * 10])
        fetch = log.read(0)
        a, b = socket.socketpair()
        with a, b:
            monkeypatch.setattr(pylog.platform, "is_supported", lambda platform=None: False)
            with pytest.raises(UnsupportedPlatformError, match=r"transfer_to \(os.sendfile\)"):
                fetch.transfer_to(a)
            monkeypatch.undo()
            assert fetch.transfer_to(a) == fetch.size_bytes


def _import_pylog(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True,
                          env=env, timeout=60)


def test_missing_speedups_are_warned_once_with_a_pylog_warning_class():
    out = _import_pylog("import sys; sys.modules['pylog._speedups'] = None\n"
                        "import pylog, importlib; importlib.import_module('pylog.log')\n"
                        "print(pylog.SPEEDUPS)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert out.stderr.count(SpeedupsMissingWarning.__name__) == 1, out.stderr
    assert "pure Python" in out.stderr


def test_built_speedups_import_silently():
    pytest.importorskip("pylog._speedups", reason="the C speedups are not built here")
    out = _import_pylog("import pylog; print(pylog.SPEEDUPS)")
    assert out.returncode == 0 and out.stdout.strip() == "True"
    assert "SpeedupsMissingWarning" not in out.stderr
