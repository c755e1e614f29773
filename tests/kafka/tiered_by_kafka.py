"""A topic that Apache Kafka itself tiers: a broker with remote storage on, Kafka's reference
``LocalTieredStorage`` (kafka-storage's test jar) as its RemoteStorageManager and the default
``TopicBasedRemoteLogMetadataManager`` writing ``__remote_log_metadata``, and what Kafka's
consumer and admin client answered once the closed segments were copied and deleted locally.

Each step of ``tiered`` is its own batch (a flush after each). In partition 0 each has a
timestamp ``STEP_MS`` after the last, so that ``segment.ms`` rolls a segment at each one
(``segment.bytes`` cannot go below 1 MiB): keyed records with headers, one gzip batch of three,
an aborted and a committed transaction. Partition 1 has six batches ``BATCH_STEP_MS`` apart in
one segment, whose offset and time indexes (``index.interval.bytes=1``) have an entry a batch.
``local.retention.bytes=1`` then deletes every copied segment from the broker's disk, leaving
the active one.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path

from tests.kafka.broker import CLIENTS_DRIVER, KafkaBroker
from tests.waiting import wait_until

TOPIC = "tiered"
PARTITIONS = (0, 1)
TPS = [a for p in PARTITIONS for a in ("--tp", f"{TOPIC}:{p}")]
METADATA_TOPIC = "__remote_log_metadata"
METADATA_PARTITIONS = 1
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
#: LocalTieredStorage keeps its files in this directory below the configured ``dir``.
STORAGE_DIR_NAME = "kafka-tiered-storage"
ROLL_MS = 1_000
STEP_MS = 10_000
BATCH_STEP_MS = 100  # ROLL_MS / 10: batches in one segment
#: How far back the records' timestamps start (the broker takes them up to an hour ahead, so the
#: last records, stamped a minute and more ahead of the transaction markers, roll past those).
HISTORY_MS = 600_000
AHEAD_MS = 60_000
TIER_TIMEOUT_S = 120
#: kafka-get-offsets --time: earliest-local, latest-tiered
TIERED_SPECS = ("-4", "-5")


def server_properties(storage_root: Path) -> dict[str, str]:
    """The broker's remote storage settings (Kafka's names; KafkaBroker takes them as given)."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": str(storage_root),
        "rsm.config.delete.on.close": "false",
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.min.isr": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": str(METADATA_PARTITIONS),
        "remote.log.manager.task.interval.ms": "200",
        "log.segment.delete.delay.ms": "0",
        "log.retention.check.interval.ms": "200",
    }


TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.ms": ROLL_MS, "local.retention.bytes": 1,
                 "file.delete.delay.ms": 0, "index.interval.bytes": 1}


def _rec(partition: int, key, value, ts: int | None, headers=(), by: str = "plain") -> dict:
    return {"topic": TOPIC, "partition": partition, "key": key, "value": value, "timestamp": ts,
            "headers": [list(h) for h in headers], "by": by}


def _flushed(*lines: dict) -> list[dict]:
    """The lines, then a flush of the producer of the last: one batch."""
    return [*lines, {"by": lines[-1]["by"], "op": "flush"}]


def produce_lines(base_ms: int, now_ms: int) -> list[dict]:
    """Every step of the clients driver's ``produce`` (see the module's docstring for the segments)."""
    ts = iter(range(base_ms, now_ms, STEP_MS))
    lines = [{"producer": {}, "as": "plain"},
             {"producer": {"compression.type": "gzip", "linger.ms": "100"}, "as": "gzip"},
             {"producer": {"transactional.id": "tiered-txn"}, "as": "txn"}]
    for i in range(4):
        headers = [("n", str(i)), ("empty", None)] if i % 2 else ()
        lines += _flushed(_rec(0, None if i == 0 else f"key-{i}", f"value {i} " + "x" * i, next(ts), headers))
    gzip_ms = next(ts)
    lines += _flushed(*[_rec(0, f"gz-{i}", f"gzip value {i}", gzip_ms + i, [("codec", "gzip")], by="gzip")
                        for i in range(3)])
    for outcome in ("abort", "commit"):
        txn_ms = next(ts)
        lines += [{"by": "txn", "op": "begin"},
                  *[_rec(0, f"t-{outcome}", f"{outcome} {i}", txn_ms + i, by="txn") for i in range(2)],
                  {"by": "txn", "op": outcome}]
    # the markers are stamped with the broker's time: a record ROLL_MS later rolls past their segment
    lines += _flushed(_rec(0, "last", "after the transactions", now_ms + AHEAD_MS))
    lines += _flushed(_rec(0, "active", "stays local", now_ms + 2 * AHEAD_MS))
    for i in range(6):
        lines += _flushed(_rec(1, f"p1-{i}", f"partition 1 value {i}", base_ms + i * BATCH_STEP_MS))
    lines += _flushed(_rec(1, "p1-active", "stays local", base_ms + STEP_MS))
    return lines


# -- waiting for Kafka ------------------------------------------------------------------------------

def local_logs(broker: KafkaBroker, partition: int) -> list[Path]:
    return sorted(broker.partition_dir(TOPIC, partition).glob("*.log"))


def _tiered(broker: KafkaBroker) -> bool:
    """Every partition's closed segments copied and deleted locally: one local segment left,
    not the first."""
    for p in PARTITIONS:
        logs = local_logs(broker, p)
        if len(logs) != 1 or int(logs[0].stem) == 0:
            return False
    return True


# -- what Kafka answers ------------------------------------------------------------------------------

def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _consumed(lines: list[dict]) -> dict[int, list[dict]]:
    """The clients driver's consumed records by partition, keys, values and headers as bytes."""
    out: dict[int, list[dict]] = {p: [] for p in PARTITIONS}
    for r in lines:
        r["key"], r["value"] = _bytes(r["key"]), _bytes(r["value"])
        r["headers"] = [(k, _bytes(v)) for k, v in r["headers"]]
        out[r["partition"]].append(r)
    return out


def _probe_timestamps(lines: list[dict]) -> list[int]:
    """Every record timestamp produced, one below and one above, and 0."""
    stamps = {line["timestamp"] for line in lines if "topic" in line}
    return sorted({0} | stamps | {s - 1 for s in stamps} | {s + 1 for s in stamps})


@dataclass
class TieredByKafka:
    broker: KafkaBroker
    storage_dir: Path        # LocalTieredStorage's root: <rsm.config.dir>/kafka-tiered-storage
    records: dict            # partition -> Kafka's consumer from offset 0, read_uncommitted
    committed: dict          # the same, read_committed
    offsets: dict            # partition -> {"earliest", "latest", "lso", "maxTimestamp", "forTimestamp"}
    earliest_local: dict     # partition -> ListOffsets earliest-local (-4): the broker's first local offset
    latest_tiered: dict      # partition -> ListOffsets latest-tiered (-5): the last offset in remote storage


def tier(broker: KafkaBroker) -> TieredByKafka:
    """Create and fill ``tiered``, wait until Kafka has tiered it, ask Kafka's consumer and
    admin client for every record and offset, then stop the broker cleanly so that its files
    stay as they are while pylog reads them."""
    broker.create_topics([{"topic": TOPIC, "partitions": len(PARTITIONS), "configs": TOPIC_CONFIGS}])
    now_ms = int(time.time() * 1000)
    lines = produce_lines(now_ms - HISTORY_MS, now_ms)
    broker.clients("produce", lines=lines)
    wait_until(lambda: _tiered(broker), "Kafka to copy the closed segments and delete them locally",
               TIER_TIMEOUT_S)
    stamps = [a for ts in _probe_timestamps(lines) for a in ("--timestamp", str(ts))]
    answers = broker.admin_many([(CLIENTS_DRIVER, "consume", "--base64", *TPS),
                                 (CLIENTS_DRIVER, "consume", "--base64", "--isolation", "read_committed", *TPS),
                                 (CLIENTS_DRIVER, "offsets", *TPS, *stamps),
                                 *[("get-offsets", "--topic", TOPIC, "--time", spec) for spec in TIERED_SPECS]])
    for answer in answers:
        assert answer.returncode == 0, answer.stderr[-4000:]
    records, committed, offsets = (_json_lines(a.stdout) for a in answers[:3])
    broker.stop()
    return TieredByKafka(broker, Path(broker.properties["rsm.config.dir"]) / STORAGE_DIR_NAME, _consumed(records),
                         _consumed(committed), {o["partition"]: o for o in offsets},
                         *(_get_offsets(a.stdout) for a in answers[3:]))


def _get_offsets(stdout: str) -> dict[int, int]:
    """kafka-get-offsets' ``topic:partition:offset`` lines, by partition."""
    return {int(p): int(o) for p, o in (line.split(":")[1:] for line in stdout.splitlines() if line.startswith(TOPIC))}
