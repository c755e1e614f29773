"""Kafka's own Java tools against ``pylog serve``: ``VerifiableProducer`` (the producer Kafka's
system tests use: idempotent, acks=all) writes, each acknowledged offset holds its record in
the files, ``kafka-get-offsets`` reads the end offset and ``kafka-console-consumer`` reads
every record back in order; ``pylog verify`` is clean after."""

from __future__ import annotations

import json

import pytest

from pylog.log import Log
from tests.kafka import broker as kafka

pytest.importorskip("kafka.protocol.api_message", reason="pylog serve needs kafka-python 3")

from pylog.serve import Server  # noqa: E402
from tests.serve.conftest import pylog_cli  # noqa: E402

RECORDS = 300


@pytest.fixture
def served(tmp_path):
    with Server(str(tmp_path / "root"), listen=("127.0.0.1", 0)) as server:
        yield tmp_path / "root", server


def _events(stdout: str, name: str) -> list[dict]:
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [e for e in events if e["name"] == name]


def test_verifiable_producer_acks_are_in_the_files_and_kafkas_tools_read_them_back(kafka_tool, served):
    root, server = served
    produced = kafka_tool("org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", server.bootstrap_servers,
                          "--topic", "verified", "--max-messages", RECORDS, "--acks", "-1", timeout_s=180)
    acked = _events(produced.stdout, "producer_send_success")
    assert len(acked) == RECORDS and not _events(produced.stdout, "producer_send_error")
    with Log.open(root / "verified-0", read_only=True) as log:
        in_files = {r.offset: r.value.decode() for r in log.records()}
    assert {e["offset"]: e["value"] for e in acked} == in_files

    end = kafka_tool(kafka.TOOLS["get-offsets"], "--bootstrap-server", server.bootstrap_servers,
                     "--topic", "verified", "--time", "-1")
    assert end.stdout.split() == [f"verified:0:{RECORDS}"]

    consumed = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                          server.bootstrap_servers, "--topic", "verified", "--partition", "0", "--offset", "earliest",
                          "--max-messages", RECORDS, "--property", "print.offset=true", timeout_s=180)
    lines = [line.split("\t") for line in consumed.stdout.splitlines() if line.startswith("Offset:")]
    assert [(int(o.removeprefix("Offset:")), v) for o, v in lines] == sorted(in_files.items())

    server.stop()
    verified = pylog_cli("verify", str(root))
    assert verified.returncode == 0, verified.stdout + verified.stderr
