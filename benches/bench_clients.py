"""Clients: end-to-end latency producer process -> consumer process (``poll``), an idle
consumer's CPU, consumer and producer throughput against ``Log.read``/``Log.append`` on
the same data, the cost of a ``commit()`` of 100 partitions, and commits of a group whose
members are processes (``group_commits``).

    PYTHONPATH=. python benches/bench_clients.py [group]   # group: only the group commits
"""

from __future__ import annotations

import json
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


def _log_end(root: str, topic: str) -> int:
    with Log.open(os.path.join(root, f"{topic}-0"), read_only=True) as log:
        return log.log_end_offset


def _appended(root: str, topic: str, n: int, run, *, untimed: int = 0) -> float:
    """``n / seconds`` of ``run()`` (which returns its seconds), once the log is seen to
    hold ``n`` more records (and the ``untimed`` ones it sent first): a failing append is
    never timed as a fast one."""
    before = _log_end(root, topic)
    seconds = run()
    added = _log_end(root, topic) - before - untimed
    if added != n:
        raise AssertionError(f"{topic}: {added} records appended, {n} sent")
    return n / seconds


def _opened(producer: Producer, topic: str) -> None:
    """Send one record and wait for it: the producer opens the partition's log (a few
    milliseconds, once per producer), which the ``Log.append`` runs do not time either."""
    producer.send(topic, VALUE, partition=0).get()


def _append_batches(root: str) -> float:
    with Log.open(os.path.join(root, "tp-0")) as log:
        log.truncate_to(0)  # the reads below read one round's records
    def run():
        with Log.open(os.path.join(root, "tp-0")) as log:
            t = time.perf_counter()
            for _ in range(RECORDS // 1000):
                log.append([VALUE] * 1000)
            return time.perf_counter() - t
    return _appended(root, "tp", RECORDS, run)


def _append_one_by_one(root: str, n: int = 5000) -> float:
    def run():
        with Log.open(os.path.join(root, "one-0")) as log:
            t = time.perf_counter()
            for _ in range(n):
                log.append([VALUE])
            return time.perf_counter() - t
    return _appended(root, "one", n, run)


def _send(root: str) -> float:
    def run():
        with Producer(root, linger_ms=5, batch_size=1 << 20) as p:
            send = p.send
            _opened(p, "tp2")
            t = time.perf_counter()
            futures = [send("tp2", VALUE, partition=0) for _ in range(RECORDS)]
            p.flush()
            seconds = time.perf_counter() - t
        for f in futures:
            f.get(0)  # raises the append's error
        return seconds
    return _appended(root, "tp2", RECORDS, run, untimed=1)


def _send_batch(root: str) -> float:
    values = [VALUE] * 1000
    def run():
        with Producer(root, linger_ms=5, batch_size=1 << 20) as p:
            _opened(p, "tp3")
            t = time.perf_counter()
            futures = [p.send_batch("tp3", values, partition=0) for _ in range(RECORDS // 1000)]
            p.flush()
            seconds = time.perf_counter() - t
        if sum(len(f.get(0)) for f in futures) != RECORDS:  # get raises the appends' errors
            raise AssertionError("send_batch: metadata missing")
        return seconds
    return _appended(root, "tp3", RECORDS, run, untimed=1)


def _read(root: str) -> float:
    with Log.open(os.path.join(root, "tp-0"), read_only=True) as log:
        t = time.perf_counter()
        n = sum(1 for _ in log.records())
        return n / (time.perf_counter() - t)


def _poll(root: str, columnar: bool) -> float:
    c = Consumer(root, auto_offset_reset="earliest", max_poll_records=100_000)
    c.assign([TopicPartition("tp", 0)])
    got, t = 0, time.perf_counter()
    while got < RECORDS:
        res = c.poll_columns(1000) if columnar else c.poll(1000)
        got += sum((v.num_rows if columnar else len(v)) for v in res.values())
    rate = got / (time.perf_counter() - t)
    c.close()
    return rate


def throughput(root: str, rounds: int = 3) -> dict:
    """Records/s, the best of ``rounds`` rounds, the measurements of a round interleaved
    (a busy machine slows them alike)."""
    with LogManager(root) as m:
        for name in ("tp", "tp2", "tp3", "one"):
            m.create_topic(name, 1)
    runs = {"Log.append, 1,000 a call": lambda: _append_batches(root),
            "Log.append, 1 a call": lambda: _append_one_by_one(root),
            "Producer.send, linger 5 ms": lambda: _send(root),
            "Producer.send_batch, 1,000 a call, linger 5 ms": lambda: _send_batch(root),
            "Log.read records": lambda: _read(root),
            "Consumer.poll": lambda: _poll(root, False),
            "Consumer.poll_columns": lambda: _poll(root, True)}
    best = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for name, run in runs.items():
            best[name] = max(best[name], run())
    return best


def commit_cost(root: str, partitions: int = 100, rounds: int = 200) -> float:
    """Median (ms) of a commit of ``partitions`` partitions by the only process writing."""
    topic = f"many-{partitions}"
    with LogManager(root) as m:
        m.create_topic(topic, partitions)
    c = Consumer(root, f"bench-group-{partitions}", enable_auto_commit=False)
    offsets = {TopicPartition(topic, p): 1 for p in range(partitions)}
    times = []
    for i in range(rounds):
        offsets = {tp: i for tp in offsets}
        t = time.perf_counter()
        c.commit(offsets)
        times.append((time.perf_counter() - t) * 1e3)
    c.close()
    return statistics.median(times)


def _member(root: str, rounds: str, mode: str) -> None:
    """A member process of group "bench-members": joins, says ``ready`` once the group is
    stable with its three members, waits for ``go``, then commits its positions ``rounds``
    times (``mode`` "loop") or polls ten records and commits, ``rounds`` times ("poll");
    prints the latencies (ms) as JSON."""
    from pylog.coordinator.group_membership import read_group_file
    c = Consumer(root, "bench-members", enable_auto_commit=False, auto_offset_reset="earliest")
    c.subscribe(["members"])

    def stable():
        state = read_group_file(root, "bench-members")
        return state and state["state"] == "Stable" and len(state["members"]) == GROUP_MEMBERS
    while not (stable() and c.assignment()):
        c.poll(timeout_ms=50, max_records=1)
    c.seek_to_beginning()
    print("ready", flush=True)
    sys.stdin.readline()
    times = []
    for _ in range(int(rounds)):
        if mode == "poll":
            c.poll(timeout_ms=1000, max_records=10)
        t = time.perf_counter()
        c.commit()
        times.append((time.perf_counter() - t) * 1e3)
    print(json.dumps(times), flush=True)
    sys.stdin.readline()  # stays a member until every member is done
    c.close(autocommit=False)


GROUP_MEMBERS = 3


def group_commits(root: str, mode: str, rounds: int = 200) -> tuple[float, float, float]:
    """Median, p99 and mean (ms) of the commits of GROUP_MEMBERS member processes of one group
    over a 6-partition topic, all committing at once: ``mode`` "loop" commits the
    positions ``rounds`` times in a row, "poll" after each poll of ten records."""
    with LogManager(root) as m:
        if "members" not in m.topics():
            m.create_topic("members", 6)
            for p in range(6):
                m.topic("members").append([VALUE] * 10 * rounds, partition=p)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    members = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "member", root, str(rounds), mode],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
               for _ in range(GROUP_MEMBERS)]
    try:
        for p in members:
            assert p.stdout.readline().strip() == "ready"
        for p in members:
            p.stdin.write("go\n")
            p.stdin.flush()
        times = sorted(t for p in members for t in json.loads(p.stdout.readline()))
        for p in members:
            p.stdin.write("done\n")
            p.stdin.flush()
    finally:
        for p in members:
            p.wait()
    return statistics.median(times), times[int(len(times) * 0.99)], statistics.fmean(times)


def main() -> None:
    root = tempfile.mkdtemp(prefix="bench-clients-")
    if sys.argv[1:] == ["member", *sys.argv[2:]] and len(sys.argv) == 5:
        return _member(*sys.argv[2:])
    if sys.argv[1:] == ["group"]:
        return _print_group_commits(root)
    p50, p99 = latency(root)
    print(f"latency producer process -> consumer poll: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    print(f"idle consumer CPU over 10 s: {idle_cpu(root) * 100:.3f}% of a core")
    tput = throughput(root)
    for k, v in tput.items():
        print(f"{k}: {v:,.0f} records/s")
    for name in ("Producer.send, linger 5 ms", "Producer.send_batch, 1,000 a call, linger 5 ms"):
        print(f"{name.split(',')[0]} / Log.append 1,000 a call: {tput[name] / tput['Log.append, 1,000 a call']:.2f}; "
              f"/ Log.append 1 a call: {tput[name] / tput['Log.append, 1 a call']:.2f}")
    for name in ("Consumer.poll", "Consumer.poll_columns"):
        print(f"{name} / Log.read: {tput[name] / tput['Log.read records']:.2f}")
    print(f"commit() of 100 partitions: median {commit_cost(root):.3f} ms")
    _print_group_commits(root)


def _print_group_commits(root: str) -> None:
    single = commit_cost(root, partitions=2)
    print(f"commit() of 2 partitions, one process: median {single:.3f} ms")
    for mode, what in (("loop", "in a loop"), ("poll", "after each poll")):
        p50, p99, mean = group_commits(root, mode)
        print(f"commit() of 2 partitions by {GROUP_MEMBERS} member processes {what}: "
              f"median {p50:.3f} ms, p99 {p99:.3f} ms, mean {mean:.3f} ms")


if __name__ == "__main__":
    main()
