"""A log dir written by Kafka's own clients through every feature of the format, and what Kafka
answered about it while it ran.

Phase 1 (leader epoch 0): five codecs with headers and null keys and values, transactions
committed and aborted across two partitions, a LogAppendTime topic, a compacted topic with
tombstones, time and size retention, ``kafka-delete-records``, two consumer groups committing.
A clean restart moves the leader epochs. Phase 2: more of the same, a third group (the consumer
protocol), and a transaction left open (its producer halts). Once the broker's cleaner and
retention have run and its checkpoints are current, the broker is SIGKILLed (the log dir is
copied as it was left), started again, asked everything (``KafkaViews``), then stopped cleanly
(the log dir copied again).
"""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.kafka.broker import CLIENTS_DRIVER, KafkaBroker
from tests.waiting import wait_until

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BASE_MS = 1_700_000_000_000
ROLL_MS = 1_000        # segment.ms: a record 10 s younger than its segment's first starts a new segment
STEP_MS = 10_000
DAY_MS = 86_400_000
OPEN_TXN_TIMEOUT_MS = 900_000  # the broker's maximum: the open transaction outlives the test
GROUPS = ("classic-group", "simple-group", "consumer-group")
TRANSACTIONAL_IDS = ("txn-a", "txn-open")
DELETED_BEFORE = 4

TOPICS = [
    {"topic": "codecs", "partitions": len(CODECS)},
    {"topic": "txn", "partitions": 2},
    {"topic": "append-time", "configs": {"message.timestamp.type": "LogAppendTime"}},
    {"topic": "compacted", "configs": {"cleanup.policy": "compact", "segment.ms": ROLL_MS,
                                       "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": 0}},
    {"topic": "time-retention", "configs": {"retention.ms": DAY_MS, "segment.ms": ROLL_MS}},
    {"topic": "size-retention", "configs": {"retention.bytes": 1, "segment.ms": ROLL_MS}},
    {"topic": "deleted"},
]
INTERNAL = [("__consumer_offsets", p) for p in range(3)] + [("__transaction_state", p) for p in range(3)]
PARTITIONS = [(t["topic"], p) for t in TOPICS for p in range(t.get("partitions", 1))] + INTERNAL


def _rec(topic, partition, key, value, ts=None, headers=(), by=None) -> dict:
    line = {"topic": topic, "partition": partition, "key": key, "value": value, "timestamp": ts,
            "headers": [list(h) for h in headers]}
    return {**line, "by": by} if by else line


def _codec_records(phase: int) -> list[dict]:
    lines = []
    for p, codec in enumerate(CODECS):
        lines.append({"producer": {"compression.type": codec, "linger.ms": "100"}, "as": codec})
        for i in range(6):
            n = phase * 10 + i
            lines.append(_rec("codecs", p, None if i == 0 else f"key-{n}",
                              None if i == 5 else f"{codec} value {n} " + "abc" * i,
                              BASE_MS + n, headers=[("n", str(n)), ("empty", None)] if i % 2 else ()))
        lines.append({"op": "flush"})
    return lines


def _rolled(topic: str, keys_values, first_step: int) -> list[dict]:
    """One batch, and so (timestamps STEP_MS apart) one segment, a record."""
    lines = []
    for i, (key, value) in enumerate(keys_values):
        lines += [_rec(topic, 0, key, value, BASE_MS + (first_step + i) * STEP_MS, by="plain"), {"op": "flush"}]
    return lines


def _transactions(phase: int) -> list[dict]:
    """Committed, aborted and committed again, each across both partitions of ``txn``, with a
    plain (idempotent) record between them."""
    lines = []
    for outcome in ("commit", "abort", "commit"):
        lines.append({"by": "txn-a", "op": "begin"})
        lines += [_rec("txn", i % 2, f"t{phase}", f"{outcome} {phase}.{i}", BASE_MS + i, by="txn-a") for i in range(3)]
        lines.append(_rec("txn", 0, "plain", f"between {outcome}", by="plain"))
        lines.append({"by": "txn-a", "op": outcome})
    return lines


PRODUCERS = [{"producer": {}, "as": "plain"}, {"producer": {"transactional.id": "txn-a"}, "as": "txn-a"}]


def phase_1() -> list[dict]:
    return [
        *PRODUCERS,
        *_codec_records(1),
        *_transactions(1),
        *[_rec("append-time", 0, f"k{i}", f"v{i}", BASE_MS + i, by="plain") for i in range(3)],
        *_rolled("compacted", [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1"), ("b", None), ("a", "a3")], 0),
        *_rolled("time-retention", [(f"old{i}", f"v{i}") for i in range(4)], 0),
        *_rolled("size-retention", [(f"s{i}", f"v{i}") for i in range(5)], 0),
        *[_rec("deleted", 0, f"d{i}", f"v{i}", BASE_MS + i, by="plain") for i in range(6)],
    ]


def phase_2() -> list[dict]:
    return [
        *PRODUCERS,
        *_codec_records(2),
        *_transactions(2),
        *[_rec("append-time", 0, f"k{i}", f"v{i}", BASE_MS + i, by="plain") for i in range(3, 5)],
        *_rolled("compacted", [("c", None), ("d", "d1"), ("b", "b2"), ("a", "a4")], 6),
        # recent records: these stay while the old ones fall out of the day's retention
        *[_rec("time-retention", 0, f"new{i}", f"v{i}", None, by="plain") for i in range(2)],
        *[_rec("deleted", 0, f"d{i}", f"v{i}", BASE_MS + i, by="plain") for i in range(6, 8)],
        {"producer": {"transactional.id": "txn-open", "transaction.timeout.ms": str(OPEN_TXN_TIMEOUT_MS)},
         "as": "txn-open"},
        {"by": "txn-open", "op": "begin"},
        _rec("txn", 0, "open", "open 0", by="txn-open"),
        _rec("txn", 1, "open", "open 1", by="txn-open"),
        {"by": "txn-open", "op": "halt"},
    ]


def _commit(group: str, offsets: dict[tuple[str, int], int], *extra: str) -> tuple[str, ...]:
    """The clients driver's call committing ``offsets`` for ``group`` (for ``admin_many``)."""
    tps = [a for (t, p), o in offsets.items() for a in ("--tp", f"{t}:{p}:{o}")]
    return (CLIENTS_DRIVER, "commit", "--group", group, "--metadata", f"{group} metadata", *tps, *extra)


def _all_succeed(answers) -> None:
    failed = [a for a in answers if a.returncode != 0]
    assert not failed, "\n".join(f"{a.args[:3]} exited {a.returncode}:\n{a.stderr[-2000:]}" for a in failed)


def _checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """A Kafka offset checkpoint file (version, count, then ``topic partition offset`` lines)."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()[2:]
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines)}


# -- what Kafka answers --------------------------------------------------------------------------

def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@dataclass
class KafkaViews:
    """What Kafka's consumer, admin client and tools answered, by partition where it applies."""
    records: dict            # (topic, partition) -> [consumed record dicts, bytes decoded], read_uncommitted
    committed: dict          # the same, read_committed
    offsets: dict            # (topic, partition) -> {"earliest", "latest", "lso", "maxTimestamp", "forTimestamp"}
    consumer_groups: object  # CompletedProcess of kafka-consumer-groups --describe
    transactions: dict       # argument tuple -> CompletedProcess of kafka-transactions
    get_offsets: dict        # --time value -> CompletedProcess of kafka-get-offsets


TPS = [a for t, p in PARTITIONS for a in ("--tp", f"{t}:{p}")]


def _consumed(lines: list[dict]) -> dict:
    """The clients driver's consumed records by partition, keys, values and headers as bytes."""
    out = {tp: [] for tp in PARTITIONS}
    for r in lines:
        r["key"], r["value"] = _bytes(r["key"]), _bytes(r["value"])
        r["headers"] = [(k, _bytes(v)) for k, v in r["headers"]]
        out[(r["topic"], r["partition"])].append(r)
    return out


def probe_timestamps(records: dict) -> list[int]:
    """Every record timestamp, one below and one above, and 0."""
    stamps = {r["timestamp"] for rs in records.values() for r in rs}
    return sorted({0} | stamps | {s - 1 for s in stamps} | {s + 1 for s in stamps})


GET_OFFSETS_TIMES = ("-1", "-2", "-3", str(BASE_MS + 3))
TRANSACTION_QUERIES = [("list",), *[("describe", "--transactional-id", t) for t in TRANSACTIONAL_IDS],
                       *[("describe-producers", "--topic", "txn", "--partition", str(p)) for p in (0, 1)],
                       ("find-hanging", "--broker-id", "1")]


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def kafka_views(broker: KafkaBroker) -> KafkaViews:
    """Two JVMs: the records first, whose timestamps the ListOffsets probes take."""
    records = _consumed(broker.clients("consume", "--base64", *TPS))
    stamps = [a for ts in probe_timestamps(records) for a in ("--timestamp", str(ts))]
    committed, offsets, groups, *transactions = broker.admin_many(
        [(CLIENTS_DRIVER, "consume", "--base64", "--isolation", "read_committed", *TPS),
         (CLIENTS_DRIVER, "offsets", *TPS, *stamps),
         ("consumer-groups", "--describe", *[a for g in GROUPS for a in ("--group", g)]),
         *[("get-offsets", "--time", t) for t in GET_OFFSETS_TIMES],
         *[("transactions", *q) for q in TRANSACTION_QUERIES]])
    get_offsets, transactions = transactions[:len(GET_OFFSETS_TIMES)], transactions[len(GET_OFFSETS_TIMES):]
    _all_succeed([committed, offsets])
    return KafkaViews(records, _consumed(_json_lines(committed.stdout)),
                      {(o["topic"], o["partition"]): o for o in _json_lines(offsets.stdout)},
                      groups, dict(zip(TRANSACTION_QUERIES, transactions)), dict(zip(GET_OFFSETS_TIMES, get_offsets)))


# -- the scenario ----------------------------------------------------------------------------------

@dataclass
class WrittenByKafka:
    views: KafkaViews
    killed_copy: Path    # the log dir as SIGKILL left it
    stopped_copy: Path   # the log dir as a clean shutdown left it
    broker: KafkaBroker


def _wait_for_the_broker(broker: KafkaBroker) -> None:
    """The cleaner has cleaned up to the active segment, retention has deleted what it will, and
    the high watermark and log start checkpoints hold the broker's current offsets."""
    def settled() -> bool:
        offsets = {(o["topic"], o["partition"]): o for o in broker.clients("offsets", *TPS)}
        hw = _checkpoint(broker.log_dir / "replication-offset-checkpoint")
        starts = _checkpoint(broker.log_dir / "log-start-offset-checkpoint")
        cleaned = _checkpoint(broker.log_dir / "cleaner-offset-checkpoint")
        return (cleaned.get(("compacted", 0)) == offsets[("compacted", 0)]["latest"] - 1
                and offsets[("time-retention", 0)]["earliest"] == 4
                and offsets[("size-retention", 0)]["earliest"] == 4
                and starts.get(("deleted", 0)) == DELETED_BEFORE
                and all(hw.get(tp) == o["latest"] for tp, o in offsets.items()))

    wait_until(settled, "the cleaner, retention and checkpoints to catch up", timeout_s=180)


def write(broker: KafkaBroker, copies: Path) -> WrittenByKafka:
    broker.create_topics(TOPICS)
    broker.clients("produce", lines=phase_1())
    _all_succeed(broker.admin_many([
        ("delete-records", "--offset-json-file", _delete_records_json(copies)),
        _commit("classic-group", {("codecs", p): 2 + p for p in range(len(CODECS))}, "--subscribe"),
        _commit("simple-group", {("txn", 0): 3, ("deleted", 0): 5})]))
    broker.restart()
    broker.clients("produce", lines=phase_2())
    _all_succeed(broker.admin_many([_commit("consumer-group", {("codecs", p): 7 for p in range(len(CODECS))},
                                            "--subscribe", "--config", "group.protocol=consumer")]))
    _wait_for_the_broker(broker)
    broker.stop(kill=True)
    killed = shutil.copytree(broker.log_dir, copies / "killed")
    broker.start()
    views = kafka_views(broker)
    broker.stop()
    stopped = shutil.copytree(broker.log_dir, copies / "stopped")
    return WrittenByKafka(views, Path(killed), Path(stopped), broker)


def _delete_records_json(where: Path) -> str:
    path = where / "delete-records.json"
    path.write_text('{"version": 1, "partitions": [{"topic": "deleted", "partition": 0, "offset": %d}]}'
                    % DELETED_BEFORE)
    return str(path)
