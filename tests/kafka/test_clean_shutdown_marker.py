"""A broker's clean-shutdown marker survives pylog: opening a partition of a stopped broker's log
dir for writing, and closing it, keeps the broker epoch Kafka wrote in ``.kafka_cleanshutdown``,
so that the broker's next start counts as clean (Kafka 3.7+ registers with that epoch; -1 or a
wrong one makes the controller treat the broker as shut down uncleanly)."""

from __future__ import annotations

import json
import subprocess
import sys

from pylog import Log

# The controller's line on a broker's registration: a clean restart cleans up nothing.
CLEAN_REGISTRATION = "Generated 0 record(s) to clean up previous incarnations"


def test_a_writable_open_keeps_the_brokers_epoch_in_the_clean_shutdown_marker(kafka_broker):
    kafka_broker.create_topic("clean-marker")
    kafka_broker.clients("produce", lines=[{"topic": "clean-marker", "partition": 0, "value": "v"}])
    kafka_broker.stop()
    marker = kafka_broker.log_dir / ".kafka_cleanshutdown"
    written_by_kafka = json.loads(marker.read_text())
    assert written_by_kafka["brokerEpoch"] > 0

    try:
        with Log.open(kafka_broker.partition_dir("clean-marker", 0)) as log:
            assert log.log_end_offset == 1
        assert json.loads(marker.read_text()) == written_by_kafka
    finally:
        log_offset = kafka_broker.server_log.stat().st_size
        kafka_broker.start()

    started = kafka_broker.server_log.read_bytes()[log_offset:].decode(errors="replace")
    registration = next(line for line in started.splitlines() if "incarnation of broker 1" in line)
    assert CLEAN_REGISTRATION in registration
    assert "since clean shutdown file was found" in started


# -- without a broker: the epoch through pylog's writing generations --------------------------------

BROKER_MARKER = {"version": 0, "brokerEpoch": 42}


def _broker_log_dir(root):
    """A log dir with partitions a-0 and b-0, as a broker with epoch 42 leaves it."""
    for name in ("a-0", "b-0"):
        with Log.open(root / name) as log:
            log.append([b"x"])
    (root / ".kafka_cleanshutdown").write_text(json.dumps(BROKER_MARKER, separators=(",", ":")))
    return root / ".kafka_cleanshutdown"


def test_two_writers_in_one_process_write_back_the_epoch_of_the_marker_the_first_took(tmp_path):
    marker = _broker_log_dir(tmp_path)
    a = Log.open(tmp_path / "a-0")
    b = Log.open(tmp_path / "b-0")
    a.close()
    assert not marker.exists()
    b.close()
    assert json.loads(marker.read_text()) == BROKER_MARKER


JOINING_WRITER = """
import sys
from pylog import Log
with Log.open(sys.argv[1]):
    print("open", flush=True)
    sys.stdin.readline()
"""


def test_a_writer_of_another_process_leaving_last_writes_back_the_epoch_it_did_not_take(tmp_path):
    marker = _broker_log_dir(tmp_path)
    a = Log.open(tmp_path / "a-0")  # takes the marker: the generation holds epoch 42
    joining = subprocess.Popen([sys.executable, "-c", JOINING_WRITER, str(tmp_path / "b-0")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert joining.stdout.readline() == "open\n"
        a.close()
        assert not marker.exists()
    finally:
        joining.communicate("\n", timeout=60)
    assert joining.returncode == 0
    assert json.loads(marker.read_text()) == BROKER_MARKER
