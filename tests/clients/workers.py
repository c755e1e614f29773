"""Client processes the tests start (and SIGKILL): ``python -m tests.clients.workers
group ROOT GROUP OUT`` consumes in a group, appending ``partition offset`` lines to OUT
for each poll and then committing; ``eos(root)`` (run in a forked child) is a
consume-transform-produce loop printing ``committed N`` after each transaction until the
input is consumed; ``produce ROOT TOPIC KEYS`` sends ``v<i>`` (key ``k<i mod KEYS>``) one
acknowledged record at a time, printing ``offset i`` for each, until its stdin closes;
``commit ROOT GROUP`` commits ever higher offsets of ``input-0`` until its stdin closes."""

from __future__ import annotations

import sys
import threading

from pylog.clients import Consumer, Producer, TopicPartition


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
    {"group": group, "eos": eos, "produce": produce, "commit": commit}[sys.argv[1]](*sys.argv[2:])
