"""Client processes the tests start (and SIGKILL): ``python -m tests.clients.workers
group ROOT GROUP OUT`` consumes in a group, appending ``partition offset`` lines to OUT
for each poll and then committing; ``committer ROOT GROUP MAX_POLL_INTERVAL_MS`` is a
member that answers commands on stdin, one line each (``join N``, ``commit OFFSET
ROUNDS``, ``committed``, ``stats``); ``eos(root)`` (run in a forked child) is a
consume-transform-produce loop printing ``committed N`` after each transaction until the
input is consumed; ``produce ROOT TOPIC KEYS`` sends ``v<i>`` (key ``k<i mod KEYS>``) one
acknowledged record at a time, printing ``offset i`` for each, until its stdin closes;
``commit ROOT GROUP`` commits ever higher offsets of ``input-0`` until its stdin closes."""

from __future__ import annotations

import json
import sys
import threading

from pylog.clients import Consumer, Producer, TopicPartition
from pylog.logdir.writers import WriterPool
from pylog.coordinator.group_membership import read_group_file
from pylog.errors import GroupCoordinatorError


def group(root: str, group_id: str, out: str) -> None:
    c = Consumer(root, group_id, auto_offset_reset="earliest", enable_auto_commit=False,
                 heartbeat_interval_ms=50, session_timeout_ms=3000, max_poll_interval_ms=3000)
    c.subscribe(["input"])
    with open(out, "a") as f:
        while True:
            got = c.poll(timeout_ms=200, max_records=10)
            for tp, records in got.items():
                for r in records:
                    f.write(f"{tp.partition} {r.offset}\n")
            f.flush()
            if got:
                c.commit()


def committer(root: str, group_id: str, max_poll_interval_ms: str) -> None:
    """A member of ``group_id`` on topic "input" (6 partitions) that polls only when told:
    ``join N`` polls until the group is stable with N members and answers its partitions;
    ``commit OFFSET ROUNDS`` commits OFFSET for each of them ROUNDS times and answers
    ``committed`` (acknowledged) or ``refused <error>``; ``committed`` answers the group's
    committed offsets of all 6 partitions as read here (JSON); ``stats`` answers this
    process's hand-offs and appends served for other processes (JSON)."""
    c = Consumer(root, group_id, enable_auto_commit=False, heartbeat_interval_ms=50, session_timeout_ms=3000,
                 max_poll_interval_ms=int(max_poll_interval_ms))
    c.subscribe(["input"])
    pool = WriterPool.for_root(root)
    everything = [TopicPartition("input", p) for p in range(6)]

    def stable_with(members: int) -> bool:
        state = read_group_file(root, group_id)
        return bool(state and state["state"] == "Stable" and len(state["members"]) == members
                    and state["generation"] == c.group_metadata().generation_id and c.assignment())

    for line in sys.stdin:
        command, *args = line.split()
        if command == "join":
            while not stable_with(int(args[0])):
                c.poll(timeout_ms=20)
            answer = " ".join(str(tp.partition) for tp in sorted(c.assignment()))
        elif command == "commit":
            try:
                for _ in range(int(args[1])):
                    c.commit({tp: int(args[0]) for tp in c.assignment()})
                answer = "committed"
            except GroupCoordinatorError as e:
                answer = f"refused {type(e).__name__}"
        elif command == "committed":
            answer = json.dumps({tp.partition: c.committed(tp) for tp in everything})
        else:
            answer = json.dumps({"hand_offs": pool.hand_offs, "served": pool.served_appends})
        print(answer, flush=True)


def eos(root: str) -> None:
    producer = Producer(root, transactional_id="eos-loop")
    consumer = Consumer(root, "eos-group", auto_offset_reset="earliest", enable_auto_commit=False,
                        isolation_level="read_committed")
    parts = [TopicPartition("input", p) for p in range(3)]
    consumer.assign(parts)
    ends = consumer.end_offsets(parts)
    done = 0
    while any(consumer.position(tp) < ends[tp] for tp in parts):
        got = consumer.poll(timeout_ms=1000, max_records=7)
        if not got:
            continue
        producer.begin_transaction()
        for records in got.values():
            for r in records:
                producer.send("output", r.value.upper(), key=r.key)
        producer.send_offsets_to_transaction({tp: consumer.position(tp) for tp in parts}, "eos-group")
        producer.commit_transaction()
        done += 1
        print("committed", done, flush=True)
    producer.close()
    consumer.close()
    print("finished", flush=True)


def _until_stdin_closes() -> threading.Event:
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    return closed


def produce(root: str, topic: str, keys: str) -> None:
    closed = _until_stdin_closes()
    with Producer(root) as producer:
        i = 0
        while not closed.is_set():
            meta = producer.send(topic, f"v{i}".encode(), key=f"k{i % int(keys)}".encode()).get()
            print(meta.offset, i, flush=True)
            i += 1


def commit(root: str, group_id: str) -> None:
    closed = _until_stdin_closes()
    with Consumer(root, group_id, enable_auto_commit=False) as consumer:
        i = 0
        while not closed.is_set():
            consumer.commit({TopicPartition("input", 0): i})
            print("committed", i, flush=True)
            i += 1


if __name__ == "__main__":
    {"group": group, "eos": eos, "committer": committer, "produce": produce, "commit": commit}[sys.argv[1]](*sys.argv[2:])
