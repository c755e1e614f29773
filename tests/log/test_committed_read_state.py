"""A read-only log's knowledge of transactions (``CommittedReadState``): its last stable
offset starts from the writer's newest producer snapshot, and its committed reads still
know every aborted transaction of the log."""

from __future__ import annotations

import random

import pytest

from pylog import Log
from pylog.producer_state import ProducerStateManager

TXN = dict(producer_epoch=0, is_transactional=True)


@pytest.fixture
def batches_replayed(monkeypatch):
    """How many batches producer states took in since the fixture was asked for."""
    applied = []
    apply = ProducerStateManager.apply

    def counting(self, batch):
        applied.append(batch.base_offset)
        return apply(self, batch)
    monkeypatch.setattr(ProducerStateManager, "apply", counting)
    return applied


def test_last_stable_offset_replays_only_the_batches_after_the_newest_snapshot(tmp_path, batches_replayed):
    """A transaction opened at offset 1 and 300 batches after it, in many segments: the
    writer's snapshot at its last roll knows the transaction, so a reader finds the last
    stable offset from there; it used to replay all 301 batches (O(log bytes) for
    ``pylog describe`` or a query's planning)."""
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=2000) as w:
        w.append([b"before"])
        w.append([b"open"], producer_id=7, base_sequence=0, **TXN)
        for i in range(300):
            w.append([b"v%d" % i])
        assert len(w.segments) > 10
        after_last_roll = w.log_end_offset - w.active_segment.base_offset
        batches_replayed.clear()
        with Log.open(path, read_only=True) as r:
            assert r.last_stable_offset == w.last_stable_offset == 1
            assert len(batches_replayed) <= after_last_roll


def test_a_committed_read_after_the_last_stable_offset_leaves_out_aborts_before_the_snapshot(tmp_path):
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=2000) as w:
        w.append([b"aborted"], producer_id=7, base_sequence=0, **TXN)
        w.append_txn_marker(7, 0, commit=False)
        for i in range(100):
            w.append([b"v%d" % i])
    with Log.open(path, read_only=True) as r:
        assert r.last_stable_offset == r.log_end_offset
        values = [x.value for x in r.records(isolation="committed")]
    assert values == [b"v%d" % i for i in range(100)]


@pytest.mark.parametrize("seed", range(5))
def test_last_stable_offset_from_a_snapshot_agrees_with_a_whole_replay(tmp_path, seed):
    """Seeded: three producers open, commit and abort transactions between plain appends
    while the log rolls. After every step a fresh reader's last stable offset (from the
    newest snapshot) is the writer's, and so is that of a reader that replayed the whole
    log for a committed read."""
    rng = random.Random(seed)
    path = tmp_path / "t-0"
    sequences = {}
    with Log.open(path, segment_bytes=rng.choice([400, 1500])) as w:
        for _ in range(60):
            pid = rng.choice([1, 2, 3])
            kind = rng.random()
            if kind < 0.4:
                w.append([b"t%d" % pid], producer_id=pid, base_sequence=sequences.get(pid, 0), **TXN)
                sequences[pid] = sequences.get(pid, 0) + 1
            elif kind < 0.6 and pid in sequences:
                w.append_txn_marker(pid, 0, commit=rng.random() < 0.5)
            else:
                w.append([b"plain"])
            with Log.open(path, read_only=True) as fresh, Log.open(path, read_only=True) as whole:
                list(whole.records(isolation="committed"))
                assert fresh.last_stable_offset == whole.last_stable_offset == w.last_stable_offset
