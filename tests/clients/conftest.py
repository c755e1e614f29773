from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pylog import LogManager

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def root(tmp_path):
    return str(tmp_path)


def make_topic(root: str, name: str, partitions: int, records=()) -> None:
    with LogManager(root) as m:
        topic = m.create_topic(name, partitions)
        for p, values in records:
            topic.append(values, partition=p)


def start_worker(*args, **popen) -> subprocess.Popen:
    """``python -m tests.clients.workers ARGS`` (stdout to /dev/null unless ``popen`` says)."""
    env = dict(os.environ, PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "tests.clients.workers", *args], cwd=_REPO, env=env,
                            **{"stdout": subprocess.DEVNULL, **popen})
