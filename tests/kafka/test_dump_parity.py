"""``pylog dump`` against Kafka's own ``kafka-dump-log`` (DumpLogSegments, run from the jars),
line for line, on every file of the Kafka samples and on files pylog writes itself: segments
of every codec, transactions with aborts (.txnindex), producer snapshots, a compacted log,
and the ``__consumer_offsets`` / ``__transaction_state`` partitions pylog's coordinators write.

One DumpLogSegments run covers many files (a JVM start costs seconds). The only normalisation
is the one docs/cli.md documents: DumpLogSegments prints each stderr summary (index
mismatches, time index errors, non-consecutive offsets) for the files in the order of a Java
HashMap, pylog in the order the files were given, so those per-file blocks are compared
in sorted order within each summary.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import time
from pathlib import Path

import pytest

from pylog import Log, LogManager, Record
from pylog.cli.main import main as pylog_main
from pylog.clients import Consumer, Producer, TopicPartition
from tests.conftest import SAMPLES
from tests.kafka.broker import kafka_uuid

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
DUMPED_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".checkpoint")
#: A segment larger than this is dumped up to --max-bytes in the default run (every byte with
#: --soak), and its time index is cut to its first entries: for each entry DumpLogSegments
#: reads every batch header from the entry's batch to the end of the log (a minute for orders-0).
LARGE_LOG_BYTES = 200_000
LARGE_LOG_CUT_BYTES = 65_536
LARGE_TIME_INDEX_CUT_ENTRIES = 64
TIME_INDEX_ENTRY_BYTES = 12
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: The headings of DumpLogSegments' stderr summaries; each is followed by its file's lines.
SUMMARY_HEADINGS = re.compile(r"^(Mismatches in :|Found timestamp mismatch in :|Found out of order timestamp in :|"
                              r"The following indexed offsets are not found in :|Non-consecutive offsets in )")
#: pylog's payload for a cluster metadata record type it does not decode (docs/cli.md)
METADATA_NOT_DECODED = re.compile(r" payload: Error at \d+, skipping\. pylog does not decode metadata record type \d+$")
#: What the JVM's logging prints on stderr, not the tool.
JVM_LOGGING = re.compile(r"^(SLF4J: |WARNING: |Picked up )")


# --- running the two tools ----------------------------------------------------------------

def kafka_dump(kafka_tool, files, *options) -> tuple[list[str], list[str]]:
    done = kafka_tool(DUMP_LOG_SEGMENTS, "--files", ",".join(map(str, files)), *options)
    return done.stdout.splitlines(), [line for line in done.stderr.splitlines() if not JVM_LOGGING.match(line)]


def pylog_dump(files, *options) -> tuple[list[str], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = pylog_main(["dump", "--files", ",".join(map(str, files)), *options])
    assert status == 0, err.getvalue()
    return out.getvalue().splitlines(), err.getvalue().splitlines()


def summary_blocks(stderr: list[str]) -> list[tuple[str, list[str]]]:
    """stderr as (heading kind, [heading and its lines] sorted by file within each kind), the
    kinds in the order printed: the one documented normalisation (see the module docstring)."""
    blocks: list[list[str]] = []
    for line in stderr:
        if SUMMARY_HEADINGS.match(line) or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    kinds: list[tuple[str, list[list[str]]]] = []
    for block in blocks:
        m = SUMMARY_HEADINGS.match(block[0])
        kind = m.group(1) if m else block[0]
        if not kinds or kinds[-1][0] != kind:
            kinds.append((kind, []))
        kinds[-1][1].append(block)
    return [(kind, sorted(group)) for kind, group in kinds]


def without_undecoded_metadata(pylog_lines: list[str], kafka_lines: list[str]) -> tuple[list[str], list[str]]:
    """The documented difference of --cluster-metadata-decoder: where pylog prints that it does
    not decode a record's type, both lines are compared up to their payload."""
    pairs = [(METADATA_NOT_DECODED.sub("", p), k[:k.find(" payload: ")] if METADATA_NOT_DECODED.search(p) else k)
             for p, k in zip(pylog_lines, kafka_lines)]
    return [p for p, _ in pairs] + pylog_lines[len(pairs):], [k for _, k in pairs] + kafka_lines[len(pairs):]


def assert_same_dump(kafka_tool, files, *options) -> list[str]:
    """Both tools' stdout equal line for line, their stderr equal up to the summaries' file
    order. Returns Kafka's stdout."""
    k_out, k_err = kafka_dump(kafka_tool, files, *options)
    p_out, p_err = pylog_dump(files, *options)
    if "--cluster-metadata-decoder" in options:
        p_out, k_out = without_undecoded_metadata(p_out, k_out)
    first = next((i for i, (p, k) in enumerate(zip(p_out, k_out)) if p != k), min(len(p_out), len(k_out)))
    assert p_out == k_out, f"line {first}:\npylog: {p_out[first:first + 1]}\nkafka: {k_out[first:first + 1]}"
    assert summary_blocks(p_err) == summary_blocks(k_err)
    return k_out


# --- the files ---------------------------------------------------------------------------

def dumpable(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.suffix in DUMPED_SUFFIXES and p.is_file())


def kafka_can_dump(path: Path) -> bool:
    """DumpLogSegments stops with ``IllegalArgumentException: Invalid max index size: -1`` on
    a .timeindex whose .index is missing (it opens that index to find each entry's batch), and
    with ``NoSuchElementException`` on an .index with entries (a preallocated one) beside an
    empty .log; pylog dumps both (docs/cli.md), so they are left out of the comparison."""
    if path.suffix == ".timeindex":
        return path.with_suffix(".index").exists()
    if path.suffix == ".index":
        log = path.with_suffix(".log")
        return not log.exists() or log.stat().st_size > 0 or path.stat().st_size == 0
    return True


def sample_files() -> list[Path]:
    if SAMPLES is None:
        return []
    return [p for p in dumpable(SAMPLES / "real") + dumpable(SAMPLES / "reference") + dumpable(SAMPLES / "fixtures")
            if kafka_can_dump(p)]


def needs_samples_here():
    if SAMPLES is None:
        pytest.skip("Kafka samples not found: set PYLOG_KAFKA_SAMPLES or put shared/kafka-samples beside the checkout")


def is_large(path: Path) -> bool:
    log = path.with_suffix(".log")
    return path.suffix in (".log", ".timeindex") and log.exists() and log.stat().st_size > LARGE_LOG_BYTES


def split_by_size(files: list[Path]) -> tuple[list[Path], list[Path]]:
    return [p for p in files if not is_large(p)], [p for p in files if is_large(p)]


def cut_time_index(path: Path, into: Path) -> Path:
    """A partition directory in ``into`` with ``path``'s log and offset index (links) and
    its time index's first entries."""
    directory = into / "-".join(path.parts[-3:-1])
    directory.mkdir(parents=True, exist_ok=True)
    for suffix in (".log", ".index"):
        if path.with_suffix(suffix).exists():
            (directory / path.with_suffix(suffix).name).symlink_to(path.with_suffix(suffix))
    cut = directory / path.name
    cut.write_bytes(path.read_bytes()[:LARGE_TIME_INDEX_CUT_ENTRIES * TIME_INDEX_ENTRY_BYTES])
    return cut


def mixed_records(n: int, base_ms: int, tag: str) -> list[Record]:
    """Keys, null keys, null values, empty values, headers (one with a null value), UTF-8
    text beyond ASCII and bytes that are not UTF-8."""
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else f"k{i % 7}-{tag}".encode()
        text = f"v{i} {tag} é€😀".encode() + bytes([0xED, 0xA0, 0x80, i % 256])  # and bytes that are not UTF-8
        value = None if i % 9 == 8 else (b"" if i % 9 == 7 else text)
        headers = [] if i % 3 else [("h1", b"x"), ("ĥ2", None)]
        out.append(Record(value, key=key, timestamp=base_ms + (i * 37) % 1000, headers=headers))
    return out


def write_codec_partitions(root: Path, base_ms: int) -> None:
    for codec in CODECS:
        with Log.open(root / f"codec-{codec}-0", segment_bytes=4000, index_interval_bytes=300) as log:
            for i in range(8):
                log.append(mixed_records(6, base_ms + i * 1000, f"{codec}{i}"), compression=codec)


def write_transactions(root: Path) -> None:
    """Committed and aborted transactions of a transactional producer (its coordinator writes
    __transaction_state), an idempotent producer, and a consumer group's commits
    (__consumer_offsets)."""
    with LogManager(root) as m:
        m.create_topic("orders", 1, {"segment_bytes": 2000})
    producer = Producer(root, transactional_id="tx-1")
    try:
        producer.init_transactions()
        for i in range(6):
            producer.begin_transaction()
            for j in range(3):
                producer.send("orders", f"o{i}-{j}".encode(), key=b"k%d" % j, partition=0).get(10)
            producer.commit_transaction() if i % 2 == 0 else producer.abort_transaction()
    finally:
        producer.close()
    with Producer(root) as plain:
        for i in range(5):
            plain.send("orders", b"plain-%d" % i, partition=0).get(10)
    consumer = Consumer(root, group_id="group-1", enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.poll(timeout_ms=1000)
        consumer.commit({TopicPartition("orders", 0): 7})
        consumer.commit()
    finally:
        consumer.close()


def write_compacted(root: Path, base_ms: int) -> None:
    settings = dict(segment_bytes=1500, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                    file_delete_delay_ms=0, delete_retention_ms=1000)
    with Log.open(root / "compacted-0", **settings) as log:
        for i in range(60):
            log.append([Record(None if i % 11 == 10 else b"v%d" % i, key=b"key-%d" % (i % 5), timestamp=base_ms + i)])
        log.roll()
        log.compact(now_ms=base_ms + 100, force=True)


@pytest.fixture(scope="module")
def pylog_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pylog-written")
    base_ms = int(time.time() * 1000) - 60_000
    write_codec_partitions(root, base_ms)
    write_transactions(root)
    write_compacted(root, base_ms)
    return root


def pylog_files(root: Path) -> list[Path]:
    return dumpable(root)


# --- the tests ---------------------------------------------------------------------------

def test_pylog_written_files_every_codec_transactions_snapshots_compaction(kafka_tool, pylog_root):
    files = pylog_files(pylog_root)
    suffixes = {p.suffix for p in files}
    assert {".log", ".index", ".timeindex", ".snapshot", ".txnindex"} <= suffixes
    out = assert_same_dump(kafka_tool, files)
    assert any("compresscodec: zstd" in line for line in out)


def test_pylog_written_logs_deep_and_with_data(kafka_tool, pylog_root):
    logs = [p for p in pylog_files(pylog_root) if p.suffix == ".log"]
    assert_same_dump(kafka_tool, logs, "--deep-iteration")
    out = assert_same_dump(kafka_tool, logs, "--print-data-log")
    assert any("endTxnMarker: ABORT" in line for line in out)


def test_consumer_offsets_of_pylog_and_the_samples_and_pylogs_transaction_state(kafka_tool, pylog_root):
    offsets = [p for d in pylog_root.glob("__consumer_offsets-*") for p in dumpable(d) if p.suffix == ".log"]
    txn_state = [p for d in pylog_root.glob("__transaction_state-*") for p in dumpable(d) if p.suffix == ".log"]
    assert offsets and txn_state
    samples = [p for p in sample_files()
               if p.suffix == ".log" and ("__consumer_offsets" in p.parent.name or p.parent.name == "multi-segment-0")]
    assert SAMPLES is None or len(samples) >= 3
    out = assert_same_dump(kafka_tool, offsets + samples, "--offsets-decoder")
    assert any('"group":"group-1"' in line for line in out)
    out = assert_same_dump(kafka_tool, txn_state, "--transaction-log-decoder")
    assert any('"transactionalId":"tx-1"' in line for line in out)


def test_samples_every_file_batches_records_indexes_snapshots(kafka_tool, soak, tmp_path):
    """Every sample file plain and every log with --print-data-log (which iterates deep too);
    the large logs up to --max-bytes and their time indexes cut, unless --soak."""
    needs_samples_here()
    files = sample_files()
    logs = [p for p in files if p.suffix == ".log"]
    if soak:
        assert_same_dump(kafka_tool, files)
        for option in ("--deep-iteration", "--print-data-log"):
            assert_same_dump(kafka_tool, logs, option)
        return
    small, large = split_by_size(files)
    cut_indexes = [cut_time_index(p, tmp_path) for p in large if p.suffix == ".timeindex"]
    assert_same_dump(kafka_tool, small + cut_indexes)
    assert_same_dump(kafka_tool, [p for p in small if p.suffix == ".log"], "--print-data-log")
    assert_same_dump(kafka_tool, [p for p in large if p.suffix == ".log"], "--print-data-log",
                     "--max-bytes", str(LARGE_LOG_CUT_BYTES))


@pytest.mark.parametrize("suffixes, options", [
    ((".log",), ("--print-data-log", "--skip-record-metadata", "--max-bytes", "5000")),
    ((".index", ".timeindex"), ("--verify-index-only",)),
    ((".index", ".timeindex"), ("--index-sanity-check",)),
], ids=lambda value: " ".join(value))
def test_kafkas_other_options_on_samples_and_pylog_written_files(kafka_tool, pylog_root, suffixes, options):
    files = pylog_files(pylog_root) + (split_by_size(sample_files())[0] if SAMPLES is not None else [])
    assert_same_dump(kafka_tool, [p for p in files if p.suffix in suffixes], *options)


def test_remote_log_metadata_records_with_the_remote_log_metadata_decoder(kafka_tool, tmp_path):
    """Neither the samples nor pylog hold a __remote_log_metadata partition: Kafka's serde writes
    one (io.pylog.interop.encode.RemoteLogMetadataLog) with a remote segment's every state."""
    log = tmp_path / "__remote_log_metadata-0" / "00000000000000000000.log"
    log.parent.mkdir()
    kafka_tool("io.pylog.interop.encode.RemoteLogMetadataLog", log)
    out = assert_same_dump(kafka_tool, [log], "--remote-log-metadata-decoder")
    assert sum("payload: RemoteLogSegmentMetadataUpdate{" in line for line in out) == 3
    assert any("customMetadata=Optional[CustomMetadata{3 bytes}]" in line for line in out)
    assert any("state=DELETE_PARTITION_FINISHED" in line for line in out)


# --- KRaft ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kraft_checkpoints(kafka_tool, tmp_path_factory) -> list[Path]:
    """The bootstrap snapshot and the 0-0 snapshot Kafka's StorageTool writes when it formats a
    standalone controller's log dir (with a SCRAM credential)."""
    root = tmp_path_factory.mktemp("kraft")
    properties = root / "server.properties"
    properties.write_text("\n".join([
        "process.roles=broker,controller", "node.id=1", "controller.listener.names=CONTROLLER",
        "listeners=PLAINTEXT://127.0.0.1:9,CONTROLLER://127.0.0.1:10",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers=127.0.0.1:10", f"log.dirs={root / 'data'}"]) + "\n")
    kafka_tool("kafka.tools.StorageTool", "format", "--standalone", "--cluster-id", kafka_uuid(),
               "--config", properties, "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    return sorted((root / "data").rglob("*.checkpoint"))


def test_kraft_snapshots_plain_and_with_the_cluster_metadata_decoder(kafka_tool, kraft_checkpoints):
    assert {p.name for p in kraft_checkpoints} == {"bootstrap.checkpoint", "00000000000000000000-0000000000.checkpoint"}
    assert_same_dump(kafka_tool, kraft_checkpoints)
    out = assert_same_dump(kafka_tool, kraft_checkpoints, "--cluster-metadata-decoder")
    assert any('"type":"FEATURE_LEVEL_RECORD"' in line for line in out)
    assert any('"type":"USER_SCRAM_CREDENTIAL_RECORD"' in line for line in out)


BROKER_TOPIC_PREFIX = "dump-parity-"


def write_through_the_broker(broker) -> list[str]:
    """Through Kafka's own clients: a topic per codec, committed and aborted transactions
    (the broker writes __transaction_state and markers), a compacted topic, a group's commits
    (__consumer_offsets). Returns the topics' names."""
    codec_topics = [f"{BROKER_TOPIC_PREFIX}{codec}" for codec in CODECS]
    txn_topic, compacted = f"{BROKER_TOPIC_PREFIX}txn", f"{BROKER_TOPIC_PREFIX}compacted"
    broker.create_topics([{"topic": t, "partitions": 1} for t in codec_topics]
                         + [{"topic": txn_topic, "partitions": 1},
                            {"topic": compacted, "partitions": 1, "configs": {"cleanup.policy": "compact"}},
                            {"topic": f"{BROKER_TOPIC_PREFIX}deleted", "partitions": 1}])
    steps = []
    for codec, topic in zip(CODECS, codec_topics):
        steps.append({"producer": {"compression.type": codec, "linger.ms": "5"}, "as": codec})
        steps += [{"topic": topic, "partition": 0, "key": None if i % 3 == 0 else f"k{i % 4}", "value": f"v{i} é€",
                   "headers": [["h", "x"]] if i % 2 else []} for i in range(40)]
        steps.append({"op": "flush"})
    steps.append({"producer": {"transactional.id": f"{BROKER_TOPIC_PREFIX}tx"}, "as": "tx"})
    for i in range(4):
        steps += [{"op": "begin"}, {"topic": txn_topic, "partition": 0, "key": "k", "value": f"t{i}"},
                  {"op": "commit" if i % 2 == 0 else "abort"}]
    steps.append({"producer": {}, "as": "plain"})
    steps += [{"topic": compacted, "partition": 0, "key": f"key-{i % 3}", "value": None if i == 7 else f"c{i}"}
              for i in range(12)]
    broker.clients("produce", lines=steps)
    broker.clients("commit", "--group", f"{BROKER_TOPIC_PREFIX}group", "--tp", f"{txn_topic}:0:2")
    broker.admin("topics", "--delete", "--topic", f"{BROKER_TOPIC_PREFIX}deleted")  # a REMOVE_TOPIC_RECORD
    return [*codec_topics, txn_topic, compacted]


@pytest.fixture(scope="module")
def kafka_written(kafka_broker, tmp_path_factory) -> list[Path]:
    """Copies (the broker keeps appending) of the partitions the session broker wrote for this
    module, its __transaction_state partitions, the __consumer_offsets partitions holding
    records (of its 50, each with 20 MiB of preallocated indexes; __transaction_state has empty
    ones) and __cluster_metadata-0: their files both tools can dump."""
    topics = write_through_the_broker(kafka_broker)
    root = tmp_path_factory.mktemp("kafka-written")
    for directory in kafka_broker.log_dir.iterdir():
        name = directory.name.rsplit("-", 1)[0]
        if name == "__consumer_offsets" and not any(log.stat().st_size for log in directory.glob("*.log")):
            continue
        if name in (*topics, "__consumer_offsets", "__transaction_state", "__cluster_metadata"):
            copy_live_partition(directory, root / directory.name)
    return [p for p in dumpable(root) if kafka_can_dump(p)]


def copy_live_partition(source: Path, target: Path) -> None:
    """Time indexes first, then offset indexes, then the rest: an index entry is written after
    the batch it points to, so no copied entry points past the copied log's end."""
    target.mkdir()
    order = {".timeindex": 0, ".index": 1}
    for path in sorted((p for p in source.iterdir() if p.is_file()), key=lambda p: order.get(p.suffix, 2)):
        shutil.copyfile(path, target / path.name)


def logs_of(files: list[Path], partition_prefix: str) -> list[Path]:
    return [p for p in files if p.suffix == ".log" and p.parent.name.startswith(partition_prefix)]


def test_partitions_kafka_wrote_plain_and_with_data(kafka_tool, kafka_written):
    assert {".log", ".index", ".timeindex", ".txnindex"} <= {p.suffix for p in kafka_written}  # no roll: no .snapshot
    assert_same_dump(kafka_tool, kafka_written)
    out = assert_same_dump(kafka_tool, [p for p in kafka_written if p.suffix == ".log"], "--print-data-log")
    assert any("endTxnMarker: ABORT" in line for line in out)


def test_kafkas_transaction_state_and_metadata_log_with_the_decoders(kafka_tool, kafka_written):
    out = assert_same_dump(kafka_tool, logs_of(kafka_written, "__transaction_state"), "--transaction-log-decoder")
    assert any(f'"transactionalId":"{BROKER_TOPIC_PREFIX}tx"' in line for line in out)
    out = assert_same_dump(kafka_tool, logs_of(kafka_written, "__cluster_metadata"), "--cluster-metadata-decoder")
    printed = {m.group(1) for line in out for m in [re.search(r'payload: \{"type":"(\w+)"', line)] if m}
    assert {"REGISTER_BROKER_RECORD", "REGISTER_CONTROLLER_RECORD", "FEATURE_LEVEL_RECORD", "TOPIC_RECORD",
            "PARTITION_RECORD", "CONFIG_RECORD", "REMOVE_TOPIC_RECORD", "PRODUCER_IDS_RECORD",
            "BROKER_REGISTRATION_CHANGE_RECORD", "BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD",
            "NO_OP_RECORD"} <= printed


def test_kafkas_consumer_offsets_with_the_offsets_decoder(kafka_tool, kafka_written):
    out = assert_same_dump(kafka_tool, logs_of(kafka_written, "__consumer_offsets"), "--offsets-decoder")
    assert any(f'"group":"{BROKER_TOPIC_PREFIX}group"' in line for line in out)
