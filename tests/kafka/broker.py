"""Apache Kafka's own broker and tools, run from the jars interop/kafka resolves.

``KafkaBroker`` is one KRaft node (broker and controller in one JVM) on free loopback ports:
``StorageTool format`` writes its log dir's meta.properties once, ``kafka.Kafka`` serves it,
and ``stop`` ends it with SIGTERM (Kafka's clean shutdown) or SIGKILL (a crash).
``run_java`` runs any other main class (Kafka's tools, the drivers in interop/kafka/src).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import signal
import socket
import subprocess
import uuid
from pathlib import Path

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / "interop" / "kafka"
LIB = INTEROP / "target" / "lib"
DRIVERS_JAR = INTEROP / "target" / "kafka-judge-1.jar"
BROKER_LOG4J = INTEROP / "broker-log4j2.properties"

# JVMs start faster with the C1 compiler only and the serial collector: the broker in half the
# time on a busy two-core machine (16 s instead of 36 s), and tests give it little data.
TOOL_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")
BROKER_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms128m", "-Xmx512m")

# Kafka's command-line tools by the name of their kafka-*.sh script.
TOOLS = {
    "topics": "org.apache.kafka.tools.TopicCommand",
    "configs": "kafka.admin.ConfigCommand",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
}
# interop/kafka/src/main/java/io/pylog/interop/clients/Clients.java: Kafka's producer,
# consumer and admin client, driven by JSON lines.
CLIENTS_DRIVER = "io.pylog.interop.clients.Clients"
# .../Tools.java: several of Kafka's tools in one JVM.
TOOLS_DRIVER = "io.pylog.interop.clients.Tools"

# Small, fast, deterministic defaults for one node; a test passes its own to override any.
DEFAULT_SERVER_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    # Records keep their (fixed, often years old) timestamps: time retention only where a topic sets it.
    "log.retention.ms": "-1",
    "log.retention.check.interval.ms": "500",
    "log.cleaner.backoff.ms": "500",
    "log.initial.task.delay.ms": "0",
    # Checkpoints (high watermarks, log start offsets) follow within a second, so that a
    # SIGKILL soon after a write leaves them current.
    "replica.high.watermark.checkpoint.interval.ms": "500",
    "log.flush.start.offset.checkpoint.interval.ms": "500",
}

STARTED_LINE = "Kafka Server started"


def free_port() -> int:
    """A loopback TCP port nobody listens on at the time of asking."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def classpath() -> str:
    """Tools and drivers. The broker runs with Kafka's jars alone: a rebuild of the drivers'
    jar (prepare, in another test run) cannot pull it from under a running broker."""
    return f"{DRIVERS_JAR}{os.pathsep}{LIB}{os.sep}*"


def _newest_mtime_s(paths) -> float:
    return max((p.stat().st_mtime for p in paths), default=0.0)


def jars_are_stale() -> bool:
    """True when target/lib or the drivers' jar is missing or older than the pom or a source."""
    if not LIB.is_dir() or not DRIVERS_JAR.is_file():
        return True
    sources = [INTEROP / "pom.xml", *(INTEROP / "src").rglob("*")]
    return _newest_mtime_s(p for p in sources if p.is_file()) > DRIVERS_JAR.stat().st_mtime


def prepare() -> None:
    """Run interop/kafka/prepare when the jars are stale, one process at a time (a file lock)."""
    (INTEROP / "target").mkdir(exist_ok=True)
    with open(INTEROP / "target" / ".prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jars_are_stale():
            done = subprocess.run([str(INTEROP / "prepare")], capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise RuntimeError(f"interop/kafka/prepare failed ({done.returncode}):\n"
                                   f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
            DRIVERS_JAR.touch()  # Maven keeps an unchanged jar's old time


def run_java(main_class: str, *args: str, check: bool = True, timeout_s: float = 120,
             input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``main_class`` with Kafka's jars and the drivers on the classpath; text output."""
    cmd = ["java", *TOOL_JVM_FLAGS, "-cp", classpath(), main_class, *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, input=input)
    if check and done.returncode != 0:
        raise AssertionError(f"{main_class} {' '.join(map(str, args))} exited {done.returncode}\n"
                             f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}")
    return done


def run_tools(calls: list[tuple[str, ...]], timeout_s: float = 300) -> list[subprocess.CompletedProcess]:
    """Run several tools, ``(main_class, *args)`` each, in one JVM (a JVM start costs seconds);
    each answers as ``run_java(..., check=False)`` would. Only for tools whose main returns or
    exits last (kafka-transactions, kafka-consumer-groups, kafka-get-offsets: see Tools.java)."""
    lines = "".join(json.dumps([str(a) for a in call]) + "\n" for call in calls)
    done = run_java(TOOLS_DRIVER, input=lines, timeout_s=timeout_s)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(calls), f"{len(answers)} answers to {len(calls)} calls:\n{done.stderr[-4000:]}"
    return [subprocess.CompletedProcess(list(call), a["returncode"], a["stdout"], a["stderr"])
            for call, a in zip(calls, answers)]


def kafka_uuid() -> str:
    """A random Kafka Uuid as Kafka prints one: URL-safe base64 of 16 bytes, unpadded, and (as
    Kafka's Uuid.randomUuid draws again) not starting with "-", which a command line would take
    for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaBroker:
    """One KRaft node, broker and controller, serving ``root/data`` on 127.0.0.1.

    ``start`` formats the log dir the first time; ``stop``, ``start`` and ``restart`` keep it,
    so a restart is a new broker epoch (and new leader epochs) over the same data.
    """

    def __init__(self, root: Path, **server_properties: str):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.root / "data"
        self.server_log = self.root / "server.log"
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.properties = {**DEFAULT_SERVER_PROPERTIES,
                           **{k.replace("_", "."): str(v) for k, v in server_properties.items()},
                           **self._node_properties()}
        self.properties_file = self.root / "server.properties"
        self.properties_file.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        self.cluster_id = kafka_uuid()
        self._process: subprocess.Popen | None = None
        self._formatted = False

    def _node_properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
        }

    # -- life cycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def format(self) -> None:
        """StorageTool format: the log dir's meta.properties for ``cluster_id``; ``start`` does it once."""
        run_java("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}", "--config",
                 self.properties_file)
        self._formatted = True

    def start(self, timeout_s: float = 180) -> None:
        """Start the broker and return once it has logged that it started and takes connections."""
        if self.running:
            return
        if not self._formatted:
            self.format()
        log_offset = self.server_log.stat().st_size if self.server_log.exists() else 0
        with open(self.server_log, "ab") as out:
            self._process = subprocess.Popen(
                ["java", *BROKER_JVM_FLAGS, f"-Dlog4j2.configurationFile={BROKER_LOG4J}",
                 f"-Dkafka.logs.dir={self.root}", "-cp", f"{LIB}{os.sep}*", "kafka.Kafka",
                 str(self.properties_file)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_until(lambda: self._started_since(log_offset), f"the Kafka broker to start (log: {self.server_log})",
                   timeout_s)
        wait_until(self._accepts_connections, f"port {self.port} to accept connections", timeout_s)

    def _started_since(self, log_offset: int) -> bool:
        if self._process.poll() is not None:
            raise AssertionError(f"the Kafka broker exited with {self._process.returncode} while starting:\n"
                                 f"{self.log_tail()}")
        with open(self.server_log, "rb") as f:
            f.seek(log_offset)
            return STARTED_LINE.encode() in f.read()

    def _accepts_connections(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self, kill: bool = False, timeout_s: float = 120) -> None:
        """SIGTERM (Kafka's clean shutdown: it writes .kafka_cleanshutdown) or SIGKILL, then wait."""
        if not self.running:
            self._process = None
            return
        self._process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            raise AssertionError(f"the Kafka broker did not stop within {timeout_s} s:\n{self.log_tail()}")
        finally:
            self._process = None

    def restart(self, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def log_tail(self, lines: int = 60) -> str:
        if not self.server_log.exists():
            return "(no server log)"
        return "\n".join(self.server_log.read_text(errors="replace").splitlines()[-lines:])

    # -- data -------------------------------------------------------------------------------

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.log_dir / f"{topic}-{partition}"

    # -- Kafka's tools and clients against this broker -------------------------------------

    def admin(self, tool: str, *args: str, check: bool = True, timeout_s: float = 120,
              input: str | None = None) -> subprocess.CompletedProcess:
        """Run one of Kafka's tools (a ``TOOLS`` name such as ``"topics"``, or a main class)
        with ``--bootstrap-server`` this broker, e.g. ``admin("consumer-groups", "--describe",
        "--group", "g")``."""
        main_class = TOOLS.get(tool, tool)
        return run_java(main_class, "--bootstrap-server", self.bootstrap, *args, check=check,
                        timeout_s=timeout_s, input=input)

    def admin_many(self, calls: list[tuple[str, ...]], timeout_s: float = 300) -> list[subprocess.CompletedProcess]:
        """``admin(tool, *args)`` for each ``(tool, *args)`` of ``calls``, all in one JVM."""
        return run_tools([(TOOLS.get(tool, tool), "--bootstrap-server", self.bootstrap, *args)
                          for tool, *args in calls], timeout_s=timeout_s)

    def create_topic(self, topic: str, partitions: int = 1, configs: dict[str, object] | None = None) -> None:
        """kafka-topics --create with replication factor 1 and the given topic configs."""
        config_args = [a for k, v in (configs or {}).items() for a in ("--config", f"{k}={v}")]
        self.admin("topics", "--create", "--topic", topic, "--partitions", str(partitions),
                   "--replication-factor", "1", *config_args)

    def create_topics(self, specs: list[dict]) -> None:
        """Create several topics in one request: ``{"topic": T, "partitions": N, "configs": {...}}`` each."""
        self.clients("create-topics", lines=specs)

    def clients(self, *args: str, lines: list[dict] | None = None, check: bool = True,
                timeout_s: float = 120) -> list[dict]:
        """Run the clients driver (``produce``, ``consume``, ``offsets``, ...) against this broker,
        feeding it ``lines`` as JSON lines; return the JSON lines it printed."""
        stdin = "".join(json.dumps(line) + "\n" for line in lines or [])
        done = self.admin(CLIENTS_DRIVER, *args, check=check, timeout_s=timeout_s, input=stdin)
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
