"""The appends a partition's holder serves for other processes, at the socket level: a
request its caller gave up on is dropped, and the holder's error reaches the caller."""

from __future__ import annotations

import threading
import time

import pytest

from pylog.logdir.append_service import SUPPORTED, AppendClient, AppendServer
from pylog.errors import LogLockedError, RecordTooLargeError
from tests.waiting import wait_until

pytestmark = pytest.mark.skipif(not SUPPORTED, reason="appends are served only on Linux")
KEY = ("t", 0)


@pytest.fixture
def server(root):
    appended, first_started, release_first = [], threading.Event(), threading.Event()

    def append(key, records):
        if records == [(b"k", b"first")]:
            first_started.set()
            release_first.wait()
        if records == [(b"k", b"too big")]:
            raise RecordTooLargeError("a record of 7 bytes is too large")
        appended.append(records)
        return True
    s = AppendServer(root, append)
    s.listen(KEY)
    s.appended, s.first_started, s.release_first = appended, first_started, release_first
    yield s
    release_first.set()
    s.close()


def test_a_request_whose_caller_gave_up_is_not_appended(root, server):
    first = threading.Thread(target=lambda: AppendClient(root).append(KEY, [(b"k", b"first")], time.monotonic() + 60))
    first.start()
    wait_until(server.first_started.is_set, "the holder busy with a first append")
    late = AppendClient(root)
    with pytest.raises(LogLockedError, match="did not answer in time"):
        late.append(KEY, [(b"k", b"late")], time.monotonic() + 0.05)
    server.release_first.set()
    first.join()
    assert late.append(KEY, [(b"k", b"next")], time.monotonic() + 60)  # a new connection, served
    assert server.appended == [[(b"k", b"first")], [(b"k", b"next")]]  # "late" was dropped


def test_the_holders_error_reaches_the_caller_as_its_class(root, server):
    with pytest.raises(RecordTooLargeError, match="7 bytes"):
        AppendClient(root).append(KEY, [(b"k", b"too big")], time.monotonic() + 60)
    assert AppendClient(root).append(KEY, [(b"k", None)], time.monotonic() + 60)
    assert server.appended == [[(b"k", None)]]


def test_nobody_listening_leaves_the_append_to_the_caller(root):
    assert not AppendClient(root).append(KEY, [(b"k", b"v")], time.monotonic() + 60)
