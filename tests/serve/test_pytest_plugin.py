"""The fixture recipe of docs/serve.md, run by pytest in a child process as a user's
project would: ``pytest_plugins = ["pylog.testing"]`` and a test taking ``pylog_server``."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.serve.conftest import ROOT_DIR

CONFTEST = 'pytest_plugins = ["pylog.testing"]\n'
TEST = '''
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from pylog import LogManager


def test_my_app(pylog_server):
    producer = KafkaProducer(bootstrap_servers=pylog_server.bootstrap_servers)
    producer.send("greetings", key=b"k", value=b"hello").get(timeout=60)
    producer.close()
    with LogManager(pylog_server.root, read_only=True) as logs:
        assert [r.value for r in logs.log("greetings", 0).records()] == [b"hello"]
'''


def test_a_user_s_project_gets_the_fixture_from_the_plugin(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_app.py").write_text(TEST)
    env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stdout.decode()[-3000:]
    assert b"1 passed" in result.stdout
