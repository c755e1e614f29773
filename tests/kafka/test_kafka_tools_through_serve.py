"""Kafka's own Java tools against ``pylog serve``: ``VerifiableProducer`` and
``VerifiableConsumer`` (the clients Kafka's system tests use: an idempotent acks=all producer,
a classic group member), ``kafka-topics``, ``kafka-get-offsets``, ``kafka-console-consumer``
and ``kafka-consumer-groups``; what they write is in the files, what they read and describe is
what the files hold, and ``pylog verify`` is clean after."""

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


def test_kafka_topics_verifiable_consumer_and_consumer_groups_through_the_server(kafka_tool, served):
    """kafka-topics creates and describes a topic; VerifiableConsumer (a classic group member)
    reads every record VerifiableProducer wrote and commits; kafka-consumer-groups describes
    the group's offsets at the log end, as pylog's own tool does."""
    root, server = served
    bootstrap = server.bootstrap_servers
    created = kafka_tool(kafka.TOOLS["topics"], "--bootstrap-server", bootstrap, "--create", "--topic", "grouped",
                         "--partitions", "3")
    assert "Created topic grouped." in created.stdout
    described = kafka_tool(kafka.TOOLS["topics"], "--bootstrap-server", bootstrap, "--describe", "--topic", "grouped")
    assert [line.split("\t")[2] for line in described.stdout.splitlines() if "Partition:" in line] == [
        f"Partition: {p}" for p in range(3)]
    kafka_tool("org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", bootstrap, "--topic", "grouped",
               "--max-messages", RECORDS, "--acks", "-1", timeout_s=180)

    consumed = kafka_tool("org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", bootstrap,
                          "--topic", "grouped", "--group-id", "verifiers", "--max-messages", RECORDS,
                          "--reset-policy", "earliest", timeout_s=180)
    assert sum(e["count"] for e in _events(consumed.stdout, "records_consumed")) == RECORDS
    commits = _events(consumed.stdout, "offsets_committed")
    assert commits and all(c["success"] for c in commits)

    with_data = {}
    for p in range(3):
        with Log.open(root / f"grouped-{p}", read_only=True) as log:
            if log.log_end_offset:
                with_data[p] = log.log_end_offset
    groups = kafka_tool(kafka.TOOLS["consumer-groups"], "--bootstrap-server", bootstrap, "--describe",
                        "--group", "verifiers")
    rows = [line.split() for line in groups.stdout.splitlines() if line.startswith("verifiers ")]
    assert {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows} == {
        p: (end, end, 0) for p, end in with_data.items()}
    server.stop()
    ours = pylog_cli("consumer-groups", str(root), "--describe", "--group", "verifiers")
    assert ours.returncode == 0 and sorted(ours.stdout.decode().split()) == sorted(groups.stdout.split())


def test_kafka_transactions_lists_a_transaction_written_through_the_server(kafka_tool, served):
    """A confluent-kafka transactional producer commits one transaction and aborts the next;
    kafka-transactions lists its id in the state the coordinator wrote, describes it, and
    describes the partition's producer; DumpLogSegments reads every segment the server wrote."""
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (extra 'dev')")
    root, server = served
    producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers, "transactional.id": "tools"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("txn", b"committed %d" % i, partition=0)
    producer.commit_transaction(60)
    producer.begin_transaction()
    producer.produce("txn", b"aborted", partition=0)
    assert producer.flush(60) == 0  # sent, so the abort has a partition to mark
    producer.abort_transaction(60)

    listed = kafka_tool(kafka.TOOLS["transactions"], "--bootstrap-server", server.bootstrap_servers, "list")
    rows = [line.split() for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert [(r[0], r[3]) for r in rows] == [("tools", "CompleteAbort")]
    for pattern, ids in (("too.*", ["tools"]), ("other.*", [])):
        matched = kafka_tool(kafka.TOOLS["transactions"], "--bootstrap-server", server.bootstrap_servers, "list",
                             "--transactional-id-pattern", pattern)
        assert [line.split()[0] for line in matched.stdout.splitlines()[1:] if line.strip()] == ids
    producers = kafka_tool(kafka.TOOLS["transactions"], "--bootstrap-server", server.bootstrap_servers,
                           "describe-producers", "--topic", "txn", "--partition", "0")
    described = [line.split() for line in producers.stdout.splitlines()[1:] if line.strip()]
    assert [(r[0], r[3], r[5]) for r in described] == [(rows[0][2], "5", "None")]  # 6 records: sequences 0-5
    state = kafka_tool(kafka.TOOLS["transactions"], "--bootstrap-server", server.bootstrap_servers,
                       "describe", "--transactional-id", "tools")
    header, row = [line.split("\t") for line in state.stdout.splitlines() if line.strip()]
    fields = dict(zip([h.strip() for h in header], [v.strip() for v in row]))
    assert (fields["TransactionalId"], fields["ProducerId"], fields["TransactionState"]) == (
        "tools", rows[0][2], "CompleteAbort")

    server.stop()
    segments = sorted(str(p) for p in root.glob("*/*.log"))
    dumped = kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(segments))
    assert dumped.stdout.count("Dumping ") == len(segments) and "Exception" not in dumped.stdout + dumped.stderr
    verified = pylog_cli("verify", str(root))
    assert verified.returncode == 0, verified.stdout + verified.stderr
