"""A seeded model test of ``Log`` (sortedcontainers' ``test_stress_*`` shape): random
appends (plain, keyed, idempotent with exact retries, transactional with commit and abort
markers), rolls, ``truncate_to``, ``delete_records``, retention, compaction, reopens and
crash-reopens (the directory's files copied as they are, the log never closed), each
followed by a check against a plain in-memory model: the offsets, keys, values and
timestamps read uncommitted and committed, the log start, end and last stable offset,
and ``Log.check()``. Only ``Log``'s public API is used.

A few seeds run by default; ``--soak`` runs many more, longer.
"""

from __future__ import annotations

import math
import random
import shutil
from dataclasses import dataclass, field

import pytest

from pylog import Log, Record
from pylog.record.encode import now_ms

DAY_MS = 24 * 3_600_000
RETENTION_MS = 10 * DAY_MS
KEYS = [b"k%d" % i for i in range(6)]
CODECS = ("none", "gzip", "lz4", "zstd")
QUICK_SEEDS, QUICK_STEPS = range(4), 120
SOAK_SEEDS, SOAK_STEPS = range(4, 104), 400


@dataclass
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    txn: int | None = None  # the transaction holding it


@dataclass
class Model:
    """What the log must hold: every record appended and not yet removed, the
    transactions and how they ended, the log start and end."""

    records: list[Rec] = field(default_factory=list)
    marker_offsets: list[int] = field(default_factory=list)
    batch_starts: list[int] = field(default_factory=list)
    fate: dict[int, str] = field(default_factory=dict)  # transaction -> "open" | "commit" | "abort"
    txn_first: dict[int, int] = field(default_factory=dict)
    txn_producer: dict[int, int] = field(default_factory=dict)
    marker_of: dict[int, int] = field(default_factory=dict)  # transaction -> offset of its marker
    start: int = 0
    end: int = 0
    # What compaction removed may still count for a segment's largest timestamp: a
    # producer's last batch stays as an empty batch with its header (as in Kafka), and a
    # marker goes only once its horizon passed. Offset -> timestamp (None: the clock's).
    maybe_times: dict[int, int | None] = field(default_factory=dict)

    def visible(self) -> list[Rec]:
        return [r for r in self.records if r.offset >= self.start]

    def last_stable_offset(self) -> int:
        firsts = [self.txn_first[t] for t, f in self.fate.items() if f == "open"]
        return min([self.end] + firsts)

    def committed(self) -> list[Rec]:
        lso = self.last_stable_offset()
        return [r for r in self.visible() if r.offset < lso and (r.txn is None or self.fate[r.txn] == "commit")]

    def truncate(self, offset: int) -> None:
        self.drop_from(offset)
        self.batch_starts = [b for b in self.batch_starts if b < offset]
        self.marker_offsets = [m for m in self.marker_offsets if m < offset]
        for txn, first in list(self.txn_first.items()):
            if first >= offset:
                del self.fate[txn], self.txn_first[txn], self.txn_producer[txn]
            elif self.fate[txn] != "open" and self.marker_of[txn] >= offset:
                self.fate[txn] = "open"
        self.end = offset

    def drop_from(self, offset: int) -> None:
        self.records = [r for r in self.records if r.offset < offset]
        self.maybe_times = {o: t for o, t in self.maybe_times.items() if o < offset}

    def drop_below(self, offset: int) -> None:
        self.records = [r for r in self.records if r.offset >= offset]
        self.batch_starts = [b for b in self.batch_starts if b >= offset]
        self.marker_offsets = [m for m in self.marker_offsets if m >= offset]
        self.maybe_times = {o: t for o, t in self.maybe_times.items() if o >= offset}


class Run:
    """One seed: a log, its model, and the producers writing to it."""

    def __init__(self, tmp_path, seed: int):
        self.rng = rng = random.Random(seed)
        self.tmp_path = tmp_path
        self.compacted = rng.random() < 0.5
        self.config = dict(segment_bytes=rng.choice([600, 1200, 4000]), index_interval_bytes=128,
                           retention_ms=RETENTION_MS, file_delete_delay_ms=0, compression=rng.choice(CODECS),
                           producer_id_expiration_ms=1000 * DAY_MS, delete_retention_ms=DAY_MS,
                           min_cleanable_dirty_ratio=0.0,
                           cleanup_policy="compact,delete" if self.compacted else "delete")
        self.path = tmp_path / "run0" / "events-0"
        self.log = Log.open(self.path, **self.config)
        self.model = Model()
        self.clock_ms = now_ms() - 30 * DAY_MS  # record timestamps: in the past, one second per append
        self.values = 0
        self.next_pid = 1
        self.sequence: dict[int, int] = {}  # live producer -> next sequence
        self.open_txn: dict[int, int] = {}  # producer -> its open transaction
        self.txns = 0
        self.last_batch: dict[int, tuple] = {}  # idempotent producer -> (records, sequence, first, last)
        self.crashes = 0
        self.truncate_floor = 0  # compaction rewrote batches below: truncate only above

    # -- appends -------------------------------------------------------------------------------
    def _records(self) -> list[Record]:
        out = []
        for _ in range(self.rng.randint(1, 4)):
            self.values += 1
            key = self.rng.choice(KEYS) if self.compacted or self.rng.random() < 0.6 else None
            value = None if self.rng.random() < 0.08 else b"v%d" % self.values
            out.append(Record(value, key=key, timestamp=self.clock_ms))
        self.clock_ms += 1000
        return out

    def _append(self, records, txn=None, **producer):
        info = self.log.append(records, **producer)
        assert not info.duplicate
        assert info.first_offset == self.model.end and info.num_records == len(records)
        self.model.batch_starts.append(info.first_offset)
        for i, r in enumerate(records):
            self.model.records.append(Rec(info.first_offset + i, r.key, r.value, r.timestamp, txn))
        self.model.end = info.last_offset + 1
        return info

    def _new_producer(self) -> int:
        pid, self.next_pid = self.next_pid, self.next_pid + 1
        self.sequence[pid] = 0
        return pid

    def append_plain(self) -> None:
        self._append(self._records())

    def append_idempotent(self) -> None:
        idle = [p for p in self.sequence if p not in self.open_txn and p in self.last_batch]
        pid = self.rng.choice(idle) if idle and self.rng.random() < 0.8 else self._new_producer()
        records, seq = self._records(), self.sequence[pid]
        info = self._append(records, producer_id=pid, producer_epoch=0, base_sequence=seq)
        self.sequence[pid] = seq + len(records)
        self.last_batch[pid] = (records, seq, info.first_offset, info.last_offset)

    def retry_idempotent(self) -> None:
        """A producer resends its last batch: the log answers with the original offsets."""
        if not self.last_batch:
            return self.append_idempotent()
        pid = self.rng.choice(sorted(self.last_batch))
        records, seq, first, last = self.last_batch[pid]
        info = self.log.append(records, producer_id=pid, producer_epoch=0, base_sequence=seq)
        assert info.duplicate and (info.first_offset, info.last_offset) == (first, last)

    def append_transactional(self) -> None:
        if self.open_txn and (len(self.open_txn) >= 2 or self.rng.random() < 0.6):
            pid = self.rng.choice(sorted(self.open_txn))
        else:
            pid = self._new_producer()
            self.txns += 1
            self.open_txn[pid] = self.txns
            self.model.fate[self.txns] = "open"
            self.model.txn_producer[self.txns] = pid
            self.model.txn_first[self.txns] = self.model.end
        txn, records, seq = self.open_txn[pid], self._records(), self.sequence[pid]
        self._append(records, txn, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
        self.sequence[pid] = seq + len(records)

    def end_transaction(self, pid: int | None = None, commit: bool | None = None) -> None:
        if not self.open_txn:
            return
        pid = self.rng.choice(sorted(self.open_txn)) if pid is None else pid
        commit = self.rng.random() < 0.5 if commit is None else commit
        info = self.log.append_txn_marker(pid, 0, commit)
        assert info.first_offset == self.model.end
        txn = self.open_txn.pop(pid)
        self.model.fate[txn] = "commit" if commit else "abort"
        self.model.marker_of[txn] = info.first_offset
        self.model.marker_offsets.append(info.first_offset)
        self.model.batch_starts.append(info.first_offset)
        self.model.end = info.last_offset + 1

    def end_all_transactions(self) -> None:
        for pid in sorted(self.open_txn):
            self.end_transaction(pid)

    def retire_producers(self) -> None:
        """After the log lost batches (truncation, deletion, compaction) producers start over
        with new ids, as a client told its producer id is unknown would."""
        self.sequence.clear()
        self.last_batch.clear()

    # -- maintenance -------------------------------------------------------------------------------
    def roll(self) -> None:
        self.log.roll()

    def truncate(self) -> None:
        candidates = [b for b in self.model.batch_starts if b >= max(self.model.start, self.truncate_floor)]
        if not candidates:
            return
        offset = self.rng.choice(candidates + [self.model.end])
        self.log.truncate_to(offset)
        self.model.truncate(offset)
        self.open_txn = {self.model.txn_producer[t]: t for t, f in self.model.fate.items() if f == "open"}
        self.end_all_transactions()  # a coordinator ends what the truncation reopened
        self.retire_producers()

    def delete_records(self) -> None:
        self.end_all_transactions()
        before = self.rng.randint(self.model.start, self.model.end)
        assert self.log.delete_records(before) == max(before, self.model.start)
        self.model.start = max(before, self.model.start)
        self.retire_producers()

    def retention(self) -> None:
        """Expire up to a random record's time; the segments removed must be the ones the
        model's timestamps allow (``retention_ok``)."""
        self.end_all_transactions()
        times = [r.timestamp for r in self.model.records]
        cutoff = self.rng.choice(times) + 1 if times else self.clock_ms
        segments = self.log.segments
        removed = self.log.enforce_retention(now_ms=cutoff + RETENTION_MS)
        assert retention_ok(self.model, segments, removed, cutoff), \
            f"retention up to {cutoff} removed {removed} of {[s.base_offset for s in segments]}"
        if removed:
            first = self.log.segments[0].base_offset
            self.model.start = max(self.model.start, first)
            self.model.drop_below(first)
            self.retire_producers()

    def compact(self) -> None:
        if not self.compacted:
            return self.retention()
        self.end_all_transactions()
        active_base = self.log.segments[-1].base_offset
        before = self.model.visible()
        self.log.compact(now_ms=now_ms() + self.rng.choice([0, 2 * DAY_MS]), force=True)
        kept = {r.offset: (r.key, r.value, r.timestamp) for r in self.log.records()}
        check_compaction(self.model, before, kept, active_base)
        for r in self.model.records:  # below the log start it may go too, unseen
            if r.offset not in kept:
                self.model.maybe_times[r.offset] = r.timestamp
        for m in self.model.marker_offsets:
            if m < active_base:
                self.model.maybe_times[m] = None
        self.model.marker_offsets = [m for m in self.model.marker_offsets if m >= active_base]
        self.model.records = [r for r in self.model.records if r.offset in kept]
        self.truncate_floor = self.model.end
        self.retire_producers()

    def reopen(self) -> None:
        self.log.close()
        self.log = Log.open(self.path, **self.config)
        assert self.log.load_report.clean

    def crash(self) -> None:
        """Copy the log dir (partition directory and checkpoints) as it is, unflushed and
        unclosed, and go on with the copy."""
        self.crashes += 1
        copy = self.tmp_path / f"run{self.crashes}"
        shutil.copytree(self.path.parent, copy)
        self.log.close()
        self.path = copy / self.path.name
        self.log = Log.open(self.path, **self.config)
        assert not self.log.load_report.clean

    # -- the check ------------------------------------------------------------------------------------
    def check(self, deep: bool) -> None:
        log, model = self.log, self.model
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (model.start, model.end, model.end)
        assert log.last_stable_offset == model.last_stable_offset()
        assert triples(log.records()) == [(r.offset, r.key, r.value, r.timestamp) for r in model.visible()]
        assert triples(log.records(isolation="committed")) == \
            [(r.offset, r.key, r.value, r.timestamp) for r in model.committed()]
        assert log.check(deep=deep) == []

    def step(self) -> str:
        actions = {self.append_plain: 6, self.append_idempotent: 4, self.retry_idempotent: 1,
                   self.append_transactional: 5, self.end_transaction: 3, self.roll: 1, self.truncate: 1,
                   self.delete_records: 1, self.retention: 1, self.compact: 1, self.reopen: 1, self.crash: 1}
        action = self.rng.choices(list(actions), list(actions.values()))[0]
        action()
        return action.__name__


def retention_ok(model: Model, segments, removed: list[int], cutoff: int) -> bool:
    """Whether ``removed`` is what Kafka's rules remove: first the segments wholly below
    the log start, then, oldest first, each segment whose largest timestamp is below
    ``cutoff`` (markers carry the clock's time, so a segment holding one stays). Where
    compaction left it open whether a removed record still counts, either way passes."""
    bases = [s.base_offset for s in segments]
    if removed != bases[:len(removed)]:
        return False
    bounds = list(zip(bases, bases[1:] + [model.end]))
    i = 0
    while i < len(bounds) - 1 and bounds[i + 1][0] <= model.start:
        i += 1
    for n, (base, upper) in enumerate(bounds):
        if n < i:
            continue
        certain = [r.timestamp for r in model.records if base <= r.offset < upper]
        certain += [math.inf for m in model.marker_offsets if base <= m < upper]
        maybe = [math.inf if t is None else t for o, t in model.maybe_times.items() if base <= o < upper]
        must_stay = not certain + maybe or max(certain, default=-1) >= cutoff
        must_go = bool(certain) and max(certain + maybe) < cutoff
        if (n < len(removed) and must_stay) or (n == len(removed) and must_go):
            return False
    return len(removed) >= i


def triples(records) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.timestamp) for r in records]


def check_compaction(model: Model, before: list[Rec], kept: dict, active_base: int) -> None:
    """What compaction may remove: an aborted record, a record a later committed or plain
    record of its key supersedes, a tombstone with nothing older of its key left. It must
    keep everything in the active segment and the latest non-tombstone record of each key,
    unchanged and at its offset."""
    decided = [r for r in before if r.txn is None or model.fate[r.txn] == "commit"]
    latest = {}
    for r in decided:
        latest[r.key] = r
    for r in before:
        if r.offset in kept:
            assert kept[r.offset] == (r.key, r.value, r.timestamp), r
            continue
        assert r.offset < active_base, f"compaction removed {r} from the active segment"
        aborted = r.txn is not None and model.fate[r.txn] == "abort"
        superseded = latest[r.key].offset > r.offset if r.key in latest else False
        tombstone = r.value is None and latest.get(r.key) is r
        assert aborted or superseded or tombstone, f"compaction removed {r}, the latest of its key"
    assert set(kept) <= {r.offset for r in before}


def run_seed(tmp_path, seed: int, steps: int) -> None:
    run = Run(tmp_path, seed)
    done = []
    try:
        for i in range(steps):
            done.append(run.step())
            run.check(deep=i % 25 == 24)
        run.end_all_transactions()
        run.check(deep=True)
    except AssertionError as e:
        raise AssertionError(f"seed {seed}, step {len(done)} ({done[-1] if done else '-'}), "
                             f"after {done[-8:]}: {e}") from e
    finally:
        run.log.close()


@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_random_operations_match_the_model(tmp_path, seed):
    run_seed(tmp_path, seed, QUICK_STEPS)


def test_random_operations_match_the_model_soak(tmp_path, soak):
    if not soak:
        pytest.skip("long run: pass --soak")
    for seed in SOAK_SEEDS:
        run_seed(tmp_path / f"seed{seed}", seed, SOAK_STEPS)


# -- defects the model found ----------------------------------------------------------------------------
def test_delete_records_keeps_the_log_start_where_asked_after_compaction_emptied_a_segment_tail(tmp_path):
    with Log.open(tmp_path / "t-0", cleanup_policy="compact", min_cleanable_dirty_ratio=0.0, segment_bytes=400,
                  file_delete_delay_ms=0) as log:
        for key in (b"a", b"b", b"x", b"x", b"x"):  # offsets 0-4; 2-4 are superseded by offset 5
            log.append([Record(b"old-" + key, key=key)])
        log.roll()
        for key in (b"x", b"c", b"d", b"e"):  # offsets 5-8, too large to merge with the first segment
            log.append([Record(b"new-" + key * 40, key=key)])
        log.roll()
        log.compact(force=True)
        assert [r.offset for r in log.records()] == [0, 1, 5, 6, 7, 8]
        assert [s.base_offset for s in log.segments][:2] == [0, 5]
        assert log.delete_records(3) == 3
        assert log.log_start_offset == 3
        assert log.read(3).records()[0].offset == 5
