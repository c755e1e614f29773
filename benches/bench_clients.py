"""Clients: end-to-end latency producer process -> consumer process (``poll``), an idle
consumer's CPU, consumer and producer throughput against ``Log.read``/``Log.append`` on
the same data, and the cost of a ``commit()`` of 100 partitions.

    PYTHONPATH=. python benches/bench_clients.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from pylog import Log, LogManager
from pylog.clients import Consumer, Producer, TopicPartition

RECORDS = 200_000
VALUE = b"x" * 100


def latency(root: str, n: int = 2000) -> tuple[float, float]:
    """The consumer (this process) polls; a child producer sends one record at a time,
    each carrying its send time (time.time_ns is shared across processes)."""
    with LogManager(root) as m:
        m.create_topic("lat", 1)
    tp = TopicPartition("lat", 0)
    c = Consumer(root, auto_offset_reset="latest")
    c.assign([tp])
    c.position(tp)
    code = (f"import time,sys\nfrom pylog.clients import Producer\np=Producer({root!r})\n"
            f"sys.stdin.readline()\nfor i in range({n}):\n"
            f"    p.send('lat', str(time.time_ns()).encode()).get()\n    time.sleep(0.001)\np.close()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, env=dict(os.environ))
    child.stdin.write(b"go\n")
    child.stdin.flush()
    delays = []
    while len(delays) < n:
        for records in c.poll(timeout_ms=5000).values():
            now = time.time_ns()
            delays += [(now - int(r.value)) / 1e6 for r in records]
    child.wait()
    c.close()
    delays.sort()
    return delays[len(delays) // 2], delays[int(len(delays) * 0.99)]


def idle_cpu(root: str, seconds: float = 10.0) -> float:
    tp = TopicPartition("lat", 0)
    c = Consumer(root, auto_offset_reset="latest")
    c.assign([tp])
    start_cpu, start = time.process_time(), time.monotonic()
    while time.monotonic() - start < seconds:
        c.poll(timeout_ms=int((seconds - (time.monotonic() - start)) * 1000) + 1)
    used = time.process_time() - start_cpu
    c.close()
    return used / seconds


def throughput(root: str) -> dict:
    with LogManager(root) as m:
        m.create_topic("tp", 1)
        m.create_topic("tp2", 1)
    batch = [VALUE] * 1000
    t = time.perf_counter()
    with Log.open(os.path.join(root, "tp-0")) as log:
        for _ in range(RECORDS // 1000):
            log.append(batch)
    append_s = time.perf_counter() - t
    t = time.perf_counter()
    with Producer(root, linger_ms=5, batch_size=1 << 20, enable_idempotence=True) as p:
        for _ in range(RECORDS):
            p.send("tp2", VALUE, partition=0)
        p.flush()
    send_s = time.perf_counter() - t
    with Log.open(os.path.join(root, "tp-0"), read_only=True) as log:
        t = time.perf_counter()
        n = sum(1 for _ in log.records())
        read_s = time.perf_counter() - t
    out = {"Log.append rec/s": RECORDS / append_s, "Producer.send rec/s": RECORDS / send_s,
           "Log.read rec/s": n / read_s}
    for name, columnar in (("poll", False), ("poll_columns", True)):
        c = Consumer(root, auto_offset_reset="earliest", max_poll_records=100_000)
        c.assign([TopicPartition("tp", 0)])
        got, t = 0, time.perf_counter()
        while got < n:
            res = c.poll_columns(1000) if columnar else c.poll(1000)
            got += sum((v.num_rows if columnar else len(v)) for v in res.values())
        out[f"Consumer.{name} rec/s"] = got / (time.perf_counter() - t)
        c.close()
    return out


def commit_cost(root: str, partitions: int = 100, rounds: int = 200) -> float:
    with LogManager(root) as m:
        m.create_topic("many", partitions)
    c = Consumer(root, "bench-group", enable_auto_commit=False)
    offsets = {TopicPartition("many", p): 1 for p in range(partitions)}
    times = []
    for i in range(rounds):
        offsets = {tp: i for tp in offsets}
        t = time.perf_counter()
        c.commit(offsets)
        times.append((time.perf_counter() - t) * 1e3)
    c.close()
    return statistics.median(times)


def main() -> None:
    root = tempfile.mkdtemp(prefix="bench-clients-")
    p50, p99 = latency(root)
    print(f"latency producer process -> consumer poll: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    print(f"idle consumer CPU over 10 s: {idle_cpu(root) * 100:.3f}% of a core")
    tput = throughput(root)
    for k, v in tput.items():
        print(f"{k}: {v:,.0f}")
    print(f"Producer.send / Log.append: {tput['Producer.send rec/s'] / tput['Log.append rec/s']:.2f}")
    for name in ("poll", "poll_columns"):
        print(f"Consumer.{name} / Log.read: {tput[f'Consumer.{name} rec/s'] / tput['Log.read rec/s']:.2f}")
    print(f"commit() of 100 partitions: median {commit_cost(root):.3f} ms")


if __name__ == "__main__":
    main()
