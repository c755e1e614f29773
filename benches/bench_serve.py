"""``pylog serve`` beside Apache Kafka's broker, on this machine, in one run: the same client
(librdkafka, through confluent-kafka), the same load, each server in a process of its own.

- start: seconds from launching the server process to its first answered request (ApiVersions),
  pylog's bytecode compiled first, as an install compiles it (an environment with
  PYTHONDONTWRITEBYTECODE would otherwise compile every module at each start)
- produce: records/s of 1 KiB records, ``acks=1``, one producer, to one partition (best of two)
- latency: produce latency p50/p99 (send to acknowledgement) at 10% of the slower server's peak rate
- fetch: MB/s of one consumer reading the topic from the start (both send it with sendfile; best of two)

The topic holds 256 MiB (``PYLOG_BENCH_LARGE=1``: 1 GiB, the issue's size). Needs Kafka's jars
(``interop/kafka/prepare``) and confluent-kafka. Run:

    PYTHONPATH=. python benches/bench_serve.py
"""

from __future__ import annotations

import compileall
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.metadata import ApiVersionsRequest  # noqa: E402

from tests.kafka.broker import KafkaBroker, free_port, prepare  # noqa: E402
from tests.serve.conftest import read_frame, request_frame  # noqa: E402

LARGE = os.environ.get("PYLOG_BENCH_LARGE") == "1"
VALUE_BYTES = 1024
RECORDS = (1 << 30 if LARGE else 1 << 28) // VALUE_BYTES
TOPIC = "bench"
LATENCY_SECONDS = 3.0
GOALS = {"fetch": 1.0, "produce": 0.5}  # pylog / Kafka, higher is better
START_GOAL_S = 0.3


def answers_api_versions(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(request_frame(ApiVersionsRequest(client_software_name="bench", client_software_version="1"),
                                       3))
            return read_frame(sock) is not None
    except OSError:
        return False


def until_answered(port: int, started: float, what: str, timeout_s: float = 180) -> float:
    """Seconds from ``started`` (perf_counter) until the server on ``port`` answers ApiVersions."""
    while not answers_api_versions(port):
        if time.perf_counter() - started > timeout_s:
            raise RuntimeError(f"{what} did not answer within {timeout_s} s")
        time.sleep(0.002)
    return time.perf_counter() - started


class PylogServer:
    name = "pylog serve"

    def __init__(self, root: Path):
        self.root, self.port, self.process = root, free_port(), None
        root.mkdir(parents=True, exist_ok=True)

    def start(self) -> float:
        checkout = Path(__file__).resolve().parent.parent
        compileall.compile_dir(checkout / "pylog", quiet=2)
        env = dict(os.environ, PYTHONPATH=str(checkout))
        started = time.perf_counter()
        self.process = subprocess.Popen([sys.executable, "-m", "pylog", "serve", str(self.root / "data"),
                                         "--listen", f"127.0.0.1:{self.port}"], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return until_answered(self.port, started, self.name)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=120)


class TunedKafkaBroker(KafkaBroker):
    """The broker as ``kafka-server-start.sh`` runs it (its heap and collector settings), not
    as the tests start theirs (fast to start, small)."""

    jvm_flags = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                 "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                 "-Djava.awt.headless=true")


class KafkaServer:
    name = "Kafka broker"

    def __init__(self, root: Path):
        self.broker = TunedKafkaBroker(root)
        self.broker.format()  # a one-time step of a new cluster, not part of a start

    def start(self) -> float:
        started = time.perf_counter()
        self.broker.start()
        return until_answered(self.broker.port, started, self.name)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def stop(self) -> None:
        self.broker.stop()


def _producer(bootstrap: str, **settings):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, "acks": 1, "compression.type": "none", **settings})


def produce_rate(bootstrap: str, records: int) -> float:
    """Records/s of ``records`` 1 KiB values sent as fast as the client queues them, to the
    last acknowledgement."""
    producer = _producer(bootstrap, **{"linger.ms": 5, "queue.buffering.max.messages": 200_000})
    producer.produce(TOPIC, b"warm-up", partition=0)  # the topic is created, the connection made
    producer.flush(60)
    value = b"v" * VALUE_BYTES
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(300):
        raise RuntimeError("records left unacknowledged after 300 s")
    return records / (time.perf_counter() - started)


def produce_latencies_ms(bootstrap: str, rate: float, seconds: float = LATENCY_SECONDS) -> tuple[float, float]:
    """p50 and p99 (ms) from send to acknowledgement, one record at a time at ``rate`` records/s
    (the client's default ``linger.ms``, 5 ms)."""
    producer = _producer(bootstrap)
    producer.produce(TOPIC, b"warm-up", partition=0)  # metadata fetched, the connection made
    producer.flush(60)
    latencies = []

    def acked(err, _msg, sent=None):
        if err is None:
            latencies.append(time.perf_counter() - sent)
    value = b"l" * VALUE_BYTES
    count = int(rate * seconds)
    started = time.perf_counter()
    for i in range(count):
        due = started + i / rate
        while time.perf_counter() < due:
            producer.poll(0)
        now = time.perf_counter()
        producer.produce(TOPIC, value, partition=0, on_delivery=lambda err, msg, sent=now: acked(err, msg, sent))
        producer.poll(0)
    producer.flush(60)
    qs = statistics.quantiles(latencies, n=100)
    return qs[49] * 1e3, qs[98] * 1e3


def fetch_rate_mb(bootstrap: str, records: int) -> float:
    """MB/s of one consumer reading ``records`` from the start of the partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                         "fetch.queue.backoff.ms": 1})  # not a second's pause when the queue is full
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    seen = size = 0
    started = time.perf_counter()
    while seen < records:
        for msg in consumer.consume(num_messages=min(10_000, records - seen), timeout=10):
            if msg.error() is None:
                seen += 1
                size += len(msg.value())
    seconds = time.perf_counter() - started
    consumer.close()
    return size / seconds / 1e6


def run(root: Path) -> dict:
    """Both servers up side by side; each measure taken on both in turn, best of two rounds
    (the first warms the broker's JIT and both page caches), latency after a warm-up second."""
    prepare()
    servers = [PylogServer(root / "pylog"), KafkaServer(root / "kafka")]
    figures = {s.name: {"start_s": s.start(), "produce": 0.0, "fetch_mb": 0.0} for s in servers}
    try:
        for _ in range(2):
            for s in servers:
                figures[s.name]["produce"] = max(figures[s.name]["produce"], produce_rate(s.bootstrap, RECORDS))
        for _ in range(2):
            for s in servers:
                figures[s.name]["fetch_mb"] = max(figures[s.name]["fetch_mb"], fetch_rate_mb(s.bootstrap, RECORDS))
        rate = 0.1 * min(f["produce"] for f in figures.values())
        for s in servers:
            produce_latencies_ms(s.bootstrap, rate, seconds=1.0)  # warm-up
            figures[s.name]["latency_ms"] = produce_latencies_ms(s.bootstrap, rate)
    finally:
        for s in servers:
            s.stop()
    figures["latency_rate"] = rate
    return figures


def report(figures: dict) -> str:
    pylog, kafka = figures["pylog serve"], figures["Kafka broker"]
    lines = [f"{RECORDS:,} records of {VALUE_BYTES} B ({RECORDS * VALUE_BYTES >> 20} MiB), one partition, "
             f"confluent-kafka {_client_version()}, load average {os.getloadavg()[0]:.1f} at the end", "",
             "| | pylog serve | Kafka broker | pylog / Kafka | goal |", "|---|---|---|---|---|"]
    ratio = {"produce": pylog["produce"] / kafka["produce"], "fetch": pylog["fetch_mb"] / kafka["fetch_mb"]}
    lines += [
        f"| start to first answer (s) | {pylog['start_s']:.2f} | {kafka['start_s']:.2f} | "
        f"{pylog['start_s'] / kafka['start_s']:.2f}x | pylog <= {START_GOAL_S} s: "
        f"{'met' if pylog['start_s'] <= START_GOAL_S else 'MISSED'} |",
        f"| produce, acks=1 (records/s) | {pylog['produce']:,.0f} | {kafka['produce']:,.0f} | "
        f"{ratio['produce']:.2f}x | >= {GOALS['produce']}: {'met' if ratio['produce'] >= GOALS['produce'] else 'MISSED'} |",
        f"| fetch, one consumer (MB/s) | {pylog['fetch_mb']:.0f} | {kafka['fetch_mb']:.0f} | "
        f"{ratio['fetch']:.2f}x | >= {GOALS['fetch']}: {'met' if ratio['fetch'] >= GOALS['fetch'] else 'MISSED'} |",
        f"| produce latency p50 / p99 at {figures['latency_rate']:,.0f} records/s (ms) | "
        f"{pylog['latency_ms'][0]:.2f} / {pylog['latency_ms'][1]:.2f} | "
        f"{kafka['latency_ms'][0]:.2f} / {kafka['latency_ms'][1]:.2f} | "
        f"{pylog['latency_ms'][0] / kafka['latency_ms'][0]:.2f}x / {pylog['latency_ms'][1] / kafka['latency_ms'][1]:.2f}x | |",
    ]
    return "\n".join(lines)


def _client_version() -> str:
    import confluent_kafka
    return f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"


def test_serve_beside_kafka(benchmark, tmp_path):
    from benches.conftest import record_figure, record_ratio
    figures = benchmark.pedantic(run, args=(tmp_path,), rounds=1)
    pylog, kafka = figures["pylog serve"], figures["Kafka broker"]
    record_ratio("pylog serve produce vs Kafka broker", pylog["produce"] / kafka["produce"], GOALS["produce"])
    record_ratio("pylog serve fetch vs Kafka broker", pylog["fetch_mb"] / kafka["fetch_mb"], GOALS["fetch"])
    record_ratio("pylog serve start to first answer (s)", pylog["start_s"], START_GOAL_S, higher_is_better=False)
    for name in ("pylog serve", "Kafka broker"):
        record_figure(f"serve {name}", **{k: v for k, v in figures[name].items() if k != "latency_ms"},
                      latency_p50_ms=figures[name]["latency_ms"][0], latency_p99_ms=figures[name]["latency_ms"][1])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        print(report(run(Path(d))))
