"""Apache Kafka's own broker and tools, run from the jars interop/kafka resolves.

``KafkaBroker`` is one KRaft node (broker and controller in one JVM) on free loopback ports:
``StorageTool format`` writes its log dir's meta.properties once, ``kafka.Kafka`` serves it,
and ``stop`` ends it with SIGTERM (Kafka's clean shutdown) or SIGKILL (a crash).
``run_java`` runs any other main class (Kafka's tools, the drivers in interop/kafka/src): those
of ``IN_PROCESS_MAINS`` in one long-lived JVM (``ToolServer``), the others in a JVM each.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
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
# Main classes that read no stdin, close the clients they open and return (or call Kafka's
# Exit.exit last), so that a run inside the Tools driver answers as a JVM of its own would:
# run_java runs them in the one ToolServer JVM (a JVM start costs 1-2 s of CPU, a run
# milliseconds). Not TopicCommand (it catches the exit it calls), nor the clients driver's
# produce and create-topics (they read stdin; produce's halt stops the JVM).
IN_PROCESS_MAINS = frozenset({
    "org.apache.kafka.tools.DumpLogSegments",
    "kafka.tools.StorageTool",
    TOOLS["transactions"],
    TOOLS["consumer-groups"],
    TOOLS["get-offsets"],
    "io.pylog.interop.encode.EncodeBatches",
    "io.pylog.interop.encode.RemoteLogMetadataLog",
    "io.pylog.interop.writes.ReadBack",
})
IN_PROCESS_CLIENTS_COMMANDS = frozenset({"consume", "offsets", "commit"})

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


class ToolServer:
    """The Tools driver kept running: each ``run`` is one JSON line in and one answer out, so
    that many short tool runs share one JVM start. Calls from several threads take turns. A
    run past its timeout kills the JVM (the next run starts another) and raises
    ``subprocess.TimeoutExpired``, as ``subprocess.run`` does. The drivers' jar is copied
    first, so that a rebuild by another test run cannot change classes under the JVM."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._answers: queue.Queue = queue.Queue()
        self._dir: str | None = None

    def _start(self) -> None:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="kafka-tool-server-")
            atexit.register(self.close)
        jar = shutil.copy(DRIVERS_JAR, Path(self._dir) / DRIVERS_JAR.name)
        self._answers = queue.Queue()
        with open(self._stderr_path(), "ab") as stderr:
            self._process = subprocess.Popen(
                ["java", *TOOL_JVM_FLAGS, TOOL_SERVER_HEAP, "-cp", f"{jar}{os.pathsep}{LIB}{os.sep}*", TOOLS_DRIVER],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, encoding="utf-8")
        threading.Thread(target=self._read, args=(self._process.stdout, self._answers), daemon=True).start()

    def _stderr_path(self) -> Path:
        """What the JVM itself prints on stderr (a tool's stderr is in its answer)."""
        return Path(self._dir) / "stderr"

    @staticmethod
    def _read(stdout, answers: queue.Queue) -> None:
        for line in stdout:
            if line.startswith("{"):
                answers.put(json.loads(line))
        answers.put(None)  # the JVM ended

    def run(self, call: list[str], timeout_s: float) -> subprocess.CompletedProcess:
        """Run ``call``, ``[main_class, *args]``; its answer as ``subprocess.run`` gives one."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            self._process.stdin.write(json.dumps(call) + "\n")
            self._process.stdin.flush()
            try:
                answer = self._answers.get(timeout=timeout_s)
            except queue.Empty:
                self._stop(kill=True)
                raise subprocess.TimeoutExpired(call, timeout_s) from None
            if answer is None:
                self._stop(kill=True)
                raise AssertionError(f"the tool JVM ended while running {' '.join(call)}:\n"
                                     f"{self._stderr_path().read_text(errors='replace')[-4000:]}")
            return subprocess.CompletedProcess(call, answer["returncode"], answer["stdout"], answer["stderr"])

    def _stop(self, kill: bool) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if kill:
            process.kill()
        else:
            process.stdin.close()  # the driver ends at the end of its input
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        with self._lock:
            self._stop(kill=False)
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None


TOOL_SERVER = ToolServer()
# The last -Xmx wins: the server holds a whole dump's output in memory (a --soak dump of the
# samples with --print-data-log runs to tens of MB, three copies of it).
TOOL_SERVER_HEAP = "-Xmx768m"


def _clients_command(args) -> str | None:
    """The command of a clients driver's command line (Clients.java's Args)."""
    args = iter(args)
    for arg in args:
        if arg in ("--base64", "--subscribe"):
            continue
        if arg.startswith("--"):
            next(args, None)
            continue
        return arg
    return None


def runs_in_process(main_class: str, args) -> bool:
    """Whether ``run_java`` runs this call in ``TOOL_SERVER``'s JVM (given no stdin)."""
    if main_class == CLIENTS_DRIVER:
        return _clients_command(args) in IN_PROCESS_CLIENTS_COMMANDS
    return main_class in IN_PROCESS_MAINS


def run_java(main_class: str, *args: str, check: bool = True, timeout_s: float = 120,
             input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``main_class`` with Kafka's jars and the drivers on the classpath; text output.
    Calls that ``runs_in_process`` allows, without ``input``, run in ``TOOL_SERVER``'s JVM,
    the rest in a new one."""
    args = tuple(map(str, args))
    if not input and runs_in_process(main_class, args):
        done = TOOL_SERVER.run([main_class, *args], timeout_s)
    else:
        cmd = ["java", *TOOL_JVM_FLAGS, "-cp", classpath(), main_class, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, input=input)
    if check and done.returncode != 0:
        raise AssertionError(f"{main_class} {' '.join(args)} exited {done.returncode}\n"
                             f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}")
    return done


def run_tools(calls: list[tuple[str, ...]], timeout_s: float = 300) -> list[subprocess.CompletedProcess]:
    """Run several tools, ``(main_class, *args)`` each, in ``TOOL_SERVER``'s JVM (a JVM start
    costs seconds); each answers as ``run_java(..., check=False)`` would. Only for tools whose
    main returns or exits last and reads no stdin (kafka-transactions, kafka-consumer-groups,
    kafka-get-offsets, kafka-delete-records, the clients driver's consume, offsets and commit:
    see Tools.java), ``timeout_s`` for them all."""
    deadline_s = time.monotonic() + timeout_s
    return [TOOL_SERVER.run([str(a) for a in call], max(deadline_s - time.monotonic(), 1)) for call in calls]


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

    #: the broker JVM's flags: fast to start, small (tests give it little data)
    jvm_flags = BROKER_JVM_FLAGS

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
                ["java", *self.jvm_flags, f"-Dlog4j2.configurationFile={BROKER_LOG4J}",
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
