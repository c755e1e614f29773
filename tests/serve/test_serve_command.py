"""``pylog serve`` as a process: it says where it listens, Kafka's clients use it, and
SIGTERM stops it with exit code 0 and the log dir's clean-shutdown marker written."""

from __future__ import annotations

import importlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from pylog.cli.serve import defer_package_init
from pylog.layout import CLEAN_SHUTDOWN_FILE
from tests.serve.conftest import ROOT_DIR, pylog_cli


def _start(root, *options) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "pylog", "serve", str(root), "--listen", "127.0.0.1:0", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("listening on "):
        proc.kill()
        raise AssertionError(f"no 'listening on' line: {line!r} {proc.stderr.read().decode()}")
    return proc, line.split()[-1]


def _stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> int:
    proc.send_signal(sig)
    return proc.wait(timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_command_serves_clients_and_stops_cleanly_on_a_signal(tmp_path, sig):
    root = tmp_path / "data"
    proc, address = _start(root)
    try:
        producer = KafkaProducer(bootstrap_servers=address)
        for i in range(10):
            producer.send("cli", key=b"%d" % i, value=b"line %d" % i)
        producer.flush(timeout=60)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=address, enable_auto_commit=False, consumer_timeout_ms=30_000)
        consumer.assign([TopicPartition("cli", 0)])
        consumer.seek_to_beginning()
        values = [m.value for _, m in zip(range(10), consumer)]
        consumer.close()
    finally:
        code = _stop(proc, sig)
    assert values == [b"line %d" % i for i in range(10)]
    assert code == 0, proc.stderr.read().decode()
    assert os.path.exists(root / CLEAN_SHUTDOWN_FILE)
    verify = pylog_cli("verify", str(root))
    assert verify.returncode == 0, verify.stdout.decode()


def test_the_port_accepts_as_soon_as_the_listening_line_is_printed(tmp_path):
    proc, address = _start(tmp_path / "data")
    try:
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10):  # refused if not yet listening
            pass
        consumer = KafkaConsumer(bootstrap_servers=address)
        assert consumer.topics() == set()
        consumer.close()
    finally:
        assert _stop(proc) == 0


def test_a_bad_listen_address_is_a_one_line_error(tmp_path):
    result = pylog_cli("serve", str(tmp_path), "--listen", "nowhere")
    assert result.returncode == 1
    assert result.stderr.decode().strip() == ("pylog serve: error: --listen 'nowhere' is not HOST:PORT "
                                              "(such as 127.0.0.1:9092)")


def test_a_taken_port_is_a_one_line_error(tmp_path, pylog_server):
    result = pylog_cli("serve", str(tmp_path), "--listen", pylog_server.bootstrap_servers)
    assert result.returncode == 1
    assert "Address already in use" in result.stderr.decode() and "Traceback" not in result.stderr.decode()


BLOCK_KAFKA_PYTHON = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "kafka" or name.startswith("kafka."):
            raise ImportError(f"No module named {name!r}")
sys.meta_path.insert(0, Absent())
from pylog.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_kafka_python_serve_says_which_extra_to_install_in_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", BLOCK_KAFKA_PYTHON, "serve", str(tmp_path / "root")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "pylog serve: error: pylog serve needs kafka-python 3, of the extra 'serve': "
        "pip install 'pylog-kafka[serve]' (No module named 'kafka')"]
    assert not (tmp_path / "root").exists()


PACKAGE_INIT = """
import sys, threading
RUNS = getattr(threading, "pkg_init_runs", 0) + 1
threading.pkg_init_runs = RUNS
from tests.waiting import wait_until


def _in_deferred_lookup(frame):
    while frame is not None:
        if frame.f_code.co_name == "__getattr__" and frame.f_code.co_filename.endswith("serve.py"):
            return True
        frame = frame.f_back
    return False


# a slow __init__, as kafka-python's is: it ends once every thread of the test is in the lookup
wait_until(lambda: sum(map(_in_deferred_lookup, sys._current_frames().values())) >= 8,
           "the 8 threads to wait for the package's __init__")
from deferred_pkg.sub import VALUE
__all__ = ["VALUE", "RUNS"]
"""


def test_a_deferred_package_runs_its_init_once_at_the_first_use_of_a_name_it_defines(tmp_path, monkeypatch):
    package = tmp_path / "deferred_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(PACKAGE_INIT)
    (package / "sub.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(threading, "pkg_init_runs", 0, raising=False)
    for name in ("deferred_pkg", "deferred_pkg.sub"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    defer_package_init("deferred_pkg")
    import deferred_pkg.sub
    assert deferred_pkg.sub.VALUE == 42 and threading.pkg_init_runs == 0  # a submodule without the __init__
    with ThreadPoolExecutor(8) as pool:
        seen = list(pool.map(lambda _: importlib.import_module("deferred_pkg").VALUE, range(8)))
    assert seen == [42] * 8 and threading.pkg_init_runs == 1
    from deferred_pkg import RUNS
    assert RUNS == 1 and deferred_pkg.__all__ == ["VALUE", "RUNS"]
    with pytest.raises(AttributeError):
        deferred_pkg.missing


def test_deferring_a_package_imported_already_or_missing_changes_nothing(monkeypatch):
    import json as already
    defer_package_init("json")
    assert sys.modules["json"] is already
    defer_package_init("no_such_package_here")
    assert "no_such_package_here" not in sys.modules
