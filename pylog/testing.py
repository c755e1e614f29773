"""A pytest plugin for testing Kafka applications against ``pylog serve``: no broker, no
JVM, no Docker. Enable it in a ``conftest.py``::

    pytest_plugins = ["pylog.testing"]

then take the ``pylog_server`` fixture, a :class:`~pylog.serve.Server` on a free loopback
port over a fresh log dir, stopped (its logs closed) after the test::

    def test_my_app(pylog_server):
        producer = KafkaProducer(bootstrap_servers=pylog_server.bootstrap_servers)

``pylog_server.root`` is the log dir (read it with ``pylog.LogManager`` to check what the
application wrote). Needs ``pip install 'pylog-kafka[serve]'`` (docs/serve.md).
"""

from __future__ import annotations

import pytest

from pylog.serve import Server


@pytest.fixture
def pylog_server(tmp_path):
    """A running :class:`~pylog.serve.Server` on ``127.0.0.1`` (a free port) over a new log
    dir under the test's ``tmp_path``; stopped after the test."""
    with Server(str(tmp_path / "pylog-serve"), listen=("127.0.0.1", 0)) as server:
        yield server
