"""Exactly once: a consume-transform-produce loop SIGKILLed at random points and
restarted; the output, read with read_committed, holds each input's transform once."""

from __future__ import annotations

import os
import random
import signal
import sys

from pylog import Log
from tests.clients import workers
from tests.clients.conftest import make_topic


INPUT_PER_PARTITION = 40


def fork_worker(root):
    """A forked loop process (no interpreter start-up: fast enough for many trials), its
    progress lines on a pipe."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the loop, report on the pipe, never return to pytest
        status = 1
        try:
            os.close(read_fd)
            sys.stdout = os.fdopen(write_fd, "w")
            workers.eos(root)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    return pid, os.fdopen(read_fd)


def committed_values(root):
    out = []
    for p in range(2):
        with Log.open(os.path.join(root, f"output-{p}"), read_only=True) as log:
            out += [r.value for r in log.records(isolation="committed")]
    return out


def test_loop_killed_at_random_points_outputs_each_record_exactly_once(root, soak):
    values = [b"r%d-%d" % (p, i) for p in range(3) for i in range(INPUT_PER_PARTITION)]
    make_topic(root, "input", 3, [(p, [v for v in values if v.startswith(b"r%d-" % p)]) for p in range(3)])
    make_topic(root, "output", 2)
    rng = random.Random(7)
    trials = 300 if soak else 50
    for _ in range(trials):
        pid, progress = fork_worker(root)
        kill_after = rng.randrange(0, 3)
        for lines, line in enumerate(progress):  # a kill after some transactions, within the next
            if line.startswith("finished") or lines >= kill_after:
                break
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        progress.close()
    pid, progress = fork_worker(root)
    assert progress.read().strip().endswith("finished")
    os.waitpid(pid, 0)
    progress.close()
    out = committed_values(root)
    assert sorted(out) == sorted(v.upper() for v in values)


def test_a_dead_producers_transaction_is_aborted_after_its_timeout(root):
    from pylog.clients import Consumer, Producer, TopicPartition
    make_topic(root, "t", 1)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # a producer that opens a transaction and dies in it
        try:
            p = Producer(root, transactional_id="doomed", transaction_timeout_ms=300)
            p.begin_transaction()
            p.send("t", b"never", partition=0).get(5)
            os.write(write_fd, b"sent")
        finally:
            os._exit(0)
    os.close(write_fd)
    assert os.read(read_fd, 4) == b"sent"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read_fd)
    with Producer(root) as p:
        p.send("t", b"after", partition=0).get(5)
    tp = TopicPartition("t", 0)
    with Consumer(root, auto_offset_reset="earliest", isolation_level="read_committed") as c:
        c.assign([tp])
        got = []
        for _ in range(100):
            got += [r.value for r in c.poll(100).get(tp, [])]
            if got:
                break
    assert got == [b"after"]
