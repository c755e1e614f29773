"""A consumer group of three confluent-kafka processes against ``pylog serve``, one of them
killed with SIGKILL: the group splits the partitions three ways, and once the killed member's
session times out the two left take its partitions and read every record written after the
kill, resuming from the offsets the group committed (none of the killed member's committed
records is read again)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from tests.serve.conftest import ROOT_DIR

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (extra 'dev')")
import confluent_kafka.admin  # noqa: E402

TOPIC, PARTITIONS, GROUP = "shared", 6, "three"
#: the least session timeout the server allows (Kafka's group.min.session.timeout.ms)
SESSION_TIMEOUT_MS = 6_000

MEMBER = """
import json, sys
from confluent_kafka import Consumer
def say(**event):
    print(json.dumps(event), flush=True)
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": int(sys.argv[3]), "heartbeat.interval.ms": 500})
c.subscribe([sys.argv[4]], on_assign=lambda _, parts: say(assigned=sorted(p.partition for p in parts)))
while True:
    msgs = c.consume(num_messages=100, timeout=0.2)
    got = [[m.partition(), m.offset()] for m in msgs if m.error() is None]
    if got:
        c.commit(asynchronous=False)
        say(consumed=got)
"""


class Member:
    """One consumer process; its events (assignments, records consumed and committed) as they come."""

    def __init__(self, bootstrap: str):
        env = dict(os.environ, PYTHONPATH=ROOT_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, "-c", MEMBER, bootstrap, GROUP, str(SESSION_TIMEOUT_MS), TOPIC],
                                     stdout=subprocess.PIPE, env=env)
        self.assigned: list[int] = []
        self.consumed: set[tuple[int, int]] = set()

    def read_events(self) -> None:
        while select.select([self.proc.stdout], [], [], 0)[0]:
            line = self.proc.stdout.readline()
            if not line:
                return
            event = json.loads(line)
            if "assigned" in event:
                self.assigned = event["assigned"]
            self.consumed.update(map(tuple, event.get("consumed", ())))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _until(members, condition, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        for m in members:
            m.read_events()
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}: "
                                 f"{[(m.assigned, len(m.consumed)) for m in members]}")
        select.select([m.proc.stdout for m in members], [], [], 0.1)


def _produce(bootstrap: str, start: int) -> set[tuple[int, int]]:
    """10 records to each partition, acknowledged; their (partition, offset)s."""
    written = set()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def acked(err, msg):
        assert err is None, err
        written.add((msg.partition(), msg.offset()))
    for p in range(PARTITIONS):
        for i in range(10):
            producer.produce(TOPIC, b"%d-%d" % (start, i), partition=p, on_delivery=acked)
    assert producer.flush(60) == 0
    return written


def test_the_members_left_take_a_killed_members_partitions_and_read_what_came_after(pylog_server):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": pylog_server.bootstrap_servers})
    admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
    before = _produce(pylog_server.bootstrap_servers, 0)
    members = [Member(pylog_server.bootstrap_servers) for _ in range(3)]
    try:
        _until(members, lambda: sorted(p for m in members for p in m.assigned) == list(range(PARTITIONS))
               and all(len(m.assigned) == 2 for m in members), "three members with two partitions each")
        _until(members, lambda: set().union(*(m.consumed for m in members)) >= before, "the first records")
        killed, left = members[0], members[1:]
        killed_partitions = killed.assigned
        killed.proc.send_signal(signal.SIGKILL)
        killed.proc.wait()

        after = _produce(pylog_server.bootstrap_servers, 1)
        _until(left, lambda: sorted(p for m in left for p in m.assigned) == list(range(PARTITIONS)),
               "the two members left to hold every partition", SESSION_TIMEOUT_MS / 1000 + 120)
        _until(left, lambda: set().union(*(m.consumed for m in left)) >= after, "the records written after the kill")
        assert any(set(killed_partitions) & set(m.assigned) for m in left)
        # what the killed member said it read was committed first: nobody reads it again
        assert not killed.consumed & set().union(*(m.consumed for m in left))
    finally:
        for m in members:
            m.stop()
