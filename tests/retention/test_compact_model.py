"""Compaction of random transactional logs with keys, against a small model of Kafka's
cleaner: several producers, interleaved open, committed and aborted transactions,
tombstones, non-transactional records and rolls; compacted, reopened and compacted again.
A few seeds by default, many with ``--soak``."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch

from pylog import Log, Record
from pylog.errors import OutOfOrderSequenceError
from pylog.layout import SNAPSHOT_SUFFIX
from pylog.record import decode_batches
from pylog.record.encode import now_ms

DELETE_RETENTION_MS = 1000
CFG = dict(segment_bytes=1 << 20, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
           file_delete_delay_ms=0, delete_retention_ms=DELETE_RETENTION_MS,
           producer_id_expiration_ms=10 * 365 * 24 * 3600 * 1000)  # producers never expire during a run
NOW = now_ms()
KEYS = [b"k%d" % i for i in range(8)]
TXN_PRODUCERS = (1, 2, 3)  # transactional
IDEMPOTENT_PRODUCER = 4  # sequences, no transactions
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass
class Written:
    offset: int
    key: bytes
    value: bytes | None
    txn: int | None  # the transaction holding it, None for a non-transactional record


class Writer:
    """Appends random batches to a log and remembers what it wrote and how each
    transaction ended."""

    def __init__(self, log, rng):
        self.log, self.rng = log, rng
        self.records: list[Written] = []
        self.fate: dict[int, str] = {}  # transaction -> "open", "commit" or "abort"
        self.first_offset: dict[int, int] = {}  # transaction -> its first offset
        self.open: dict[int, int] = {}  # producer -> its open transaction
        self.sequence = {pid: 0 for pid in (*TXN_PRODUCERS, IDEMPOTENT_PRODUCER)}

    def step(self) -> None:
        action = self.rng.choices(["plain", "idempotent", "txn", "end", "roll"], [3, 2, 5, 2, 1])[0]
        if action == "plain":
            self.append(None)
        elif action == "idempotent":
            self.append(IDEMPOTENT_PRODUCER)
        elif action == "txn":
            self.append(self.rng.choice(TXN_PRODUCERS))
        elif action == "end" and self.open:
            self.end(self.rng.choice(sorted(self.open)), self.rng.random() < 0.5)
        elif action == "roll" and self.log.active_segment.size_bytes:
            self.log.roll()

    def append(self, pid: int | None) -> None:
        n = self.rng.randint(1, 4)
        batch = [(self.rng.choice(KEYS), None if self.rng.random() < 0.15 else b"v%d" % self.rng.randrange(10**6))
                 for _ in range(n)]
        txn = None
        if pid in TXN_PRODUCERS:
            txn = self.open.get(pid)
            if txn is None:
                txn = self.open[pid] = len(self.fate)
                self.fate[txn] = "open"
                self.first_offset[txn] = self.log.log_end_offset
        kwargs = {}
        if pid is not None:
            kwargs = dict(producer_id=pid, producer_epoch=0, base_sequence=self.sequence[pid],
                          is_transactional=txn is not None)
            self.sequence[pid] += n
        first = self.log.append([Record(v, key=k, timestamp=NOW) for k, v in batch], **kwargs).first_offset
        self.records += [Written(first + i, k, v, txn) for i, (k, v) in enumerate(batch)]

    def end(self, pid: int, commit: bool) -> None:
        self.log.append_txn_marker(pid, 0, commit=commit)
        self.fate[self.open.pop(pid)] = "commit" if commit else "abort"

    def last_stable_offset(self) -> int:
        open_firsts = [self.first_offset[t] for t in self.open.values()]
        return min(open_firsts) if open_firsts else self.log.log_end_offset


class CleanerModel:
    """Kafka's cleaner, record by record. A pass covers [0, bound), the bound being the
    first uncleanable offset (the base offset of the segment holding the least of the active
    segment's base and the last stable offset):

    - its offset map holds the latest offset of each key among the records in
      [first dirty, bound) that are not of an aborted transaction;
    - below the bound a record goes if its transaction aborted, if the map holds a later
      offset for its key, or if it is a tombstone whose delete horizon has passed; a
      tombstone kept for the first time gets the horizon now + delete_retention_ms;
    - from the bound on nothing changes.

    The next pass's first dirty offset is this pass's bound."""

    def __init__(self):
        self.first_dirty = 0
        self.horizon: dict[int, int] = {}  # offset of a kept tombstone -> its delete horizon

    def clean(self, records: list[Written], fate: dict, bound: int, now: int) -> list[Written]:
        aborted = {t for t, f in fate.items() if f == "abort"}
        first_dirty = min(self.first_dirty, bound)
        latest = {}
        for r in records:
            if first_dirty <= r.offset < bound and r.txn not in aborted:
                assert r.txn is None or fate[r.txn] == "commit"  # everything below the bound is decided
                latest[r.key] = r.offset
        kept = []
        for r in records:
            if r.offset < bound:
                if r.txn in aborted or latest.get(r.key, -1) > r.offset:
                    continue
                if r.value is None:
                    if r.offset in self.horizon and now >= self.horizon[r.offset]:
                        continue
                    self.horizon.setdefault(r.offset, now + DELETE_RETENTION_MS)
            kept.append(r)
        self.first_dirty = bound
        return kept


def _triples(records) -> list:
    return [(r.offset, r.key, r.value) for r in records]


def check_batches(log) -> None:
    """Every batch decodes with kafka-python, and an emptied batch is Kafka's 61-byte header."""
    for seg in log.segments:
        with open(seg.log_path, "rb") as f:
            data = f.read()
        ours = list(decode_batches(data))
        theirs = MemoryRecords(data)
        for batch in ours:
            kb = theirs.next_batch()
            assert isinstance(kb, DefaultRecordBatch) and kb.validate_crc()
            assert [r.offset for r in kb] == [r.offset for r in batch.records()]
            assert (kb.base_offset, kb.last_offset_delta) == (batch.base_offset, batch.last_offset_delta)
            if len(batch) == 0:
                assert (batch.size, batch.compression_id, batch.base_timestamp) == (61, 0, -1)
        assert theirs.next_batch() is None


def check_against_model(log, writer: Writer, expected: list[Written]) -> None:
    assert _triples(log.records()) == _triples(expected)
    lso = writer.last_stable_offset()
    assert log.last_stable_offset == lso
    committed = [r for r in expected if r.offset < lso and (r.txn is None or writer.fate[r.txn] == "commit")]
    assert _triples(log.records(isolation="committed")) == _triples(committed)
    newest = {}
    for r in writer.records:  # every key's newest committed value, by offset
        if r.txn is None or writer.fate[r.txn] == "commit":
            newest[r.key] = r
    survivors = {r.offset for r in log.records()}
    for r in newest.values():
        assert r.offset in survivors or r.value is None, f"the newest committed value of {r.key!r} was lost"
    assert log.check() == []
    check_batches(log)


def run_seed(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / f"s{seed}-0"
    config = dict(CFG, compression=rng.choice(CODECS))
    model = CleanerModel()
    log = Log.open(path, **config)
    writer = Writer(log, rng)
    expected, written = [], 0
    try:
        later = NOW + 5 * DELETE_RETENTION_MS  # the first pass's tombstones have passed their horizon
        for last, now in ((False, NOW), (False, later), (True, later)):
            for _ in range(rng.randint(20, 80)):
                writer.step()
            if last:  # decide every transaction; then everything but the active segment is cleanable
                for pid in sorted(writer.open):
                    writer.end(pid, rng.random() < 0.5)
                writer.append(None)
                log.roll()
            before, written = expected + writer.records[written:], len(writer.records)
            unstable = min(log.active_segment.base_offset, writer.last_stable_offset())
            bound = max(s.base_offset for s in log.segments if s.base_offset <= unstable)
            log.compact(now_ms=now, force=True)
            expected = model.clean(before, writer.fate, bound, now)
            check_against_model(log, writer, expected)
            log.close()
            log = writer.log = Log.open(path, **config)
            check_against_model(log, writer, expected)
        aborted = {r.offset for r in writer.records if r.txn is not None and writer.fate[r.txn] == "abort"}
        assert not aborted & {r.offset for r in log.records()}  # all decided and cleanable: none left
        log.close()
        for name in os.listdir(path):  # rebuild producer state from the compacted log alone
            if name.endswith(SNAPSHOT_SUFFIX):
                os.remove(path / name)
        log = Log.open(path, **config)
        assert log.last_stable_offset == log.log_end_offset
        for pid, seq in writer.sequence.items():
            if seq:
                with pytest.raises(OutOfOrderSequenceError):
                    log.append([Record(b"gap", key=b"g")], producer_id=pid, producer_epoch=0, base_sequence=seq + 1)
                log.append([Record(b"next", key=b"g")], producer_id=pid, producer_epoch=0, base_sequence=seq)
    finally:
        log.close()


@pytest.mark.parametrize("seed", range(6))
def test_compaction_matches_kafkas_cleaner_on_random_transactional_logs(tmp_path, seed):
    run_seed(tmp_path, seed)


def test_compaction_matches_kafkas_cleaner_soak(tmp_path, soak):
    if not soak:
        pytest.skip("long run: pass --soak")
    for seed in range(100, 400):
        run_seed(tmp_path, seed)
