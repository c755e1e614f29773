"""Idempotent and transactional appends: dedup, fencing, sequences, transactions, snapshots."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from pylog import Log, OutOfOrderSequenceError, ProducerFencedError, Record
from pylog.errors import CorruptSnapshotError, InvalidArgumentError, InvalidTxnStateError
from pylog.producer_state import ProducerStateManager, encode_snapshot, read_snapshot
from pylog.record.batch import decode_batches
from pylog.record.encode import encode_batch, encode_control_batch
from tests.conftest import SAMPLES, needs_samples

PID, EPOCH = 1000, 0


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "t-0", segment_bytes=1024) as lg:
        yield lg


def send(log, seq, n=2, epoch=EPOCH, pid=PID, txn=False):
    return log.append([b"s%d-%d" % (seq, i) for i in range(n)], producer_id=pid, producer_epoch=epoch,
                      base_sequence=seq, is_transactional=txn)


def test_retry_of_each_of_the_last_five_batches_returns_original_offsets(log):
    infos = [send(log, seq) for seq in range(0, 12, 2)]  # six batches
    end = log.log_end_offset
    for original in infos[1:]:
        again = send(log, original.first_offset)  # same sequence as offsets here
        assert again.duplicate and (again.first_offset, again.last_offset) == \
            (original.first_offset, original.last_offset)
    assert log.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 0)  # the sixth batch back is no longer remembered


def test_sequence_gap_is_refused_and_nothing_written(log):
    send(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 5)
    assert log.log_end_offset == 2


def test_older_epoch_is_fenced(log):
    send(log, 0, epoch=3)
    with pytest.raises(ProducerFencedError):
        send(log, 2, epoch=2)


def test_new_epoch_must_start_at_sequence_zero(log):
    send(log, 0, epoch=1)
    with pytest.raises(OutOfOrderSequenceError):
        send(log, 7, epoch=2)
    assert not send(log, 0, epoch=2).duplicate


def test_sequences_wrap_after_int32_max(log):
    send(log, 2**31 - 2, n=2)  # sequences 2^31-2 and 2^31-1
    assert send(log, 0, n=1).first_offset == 2


def test_producer_without_sequence_is_refused(log):
    with pytest.raises(InvalidArgumentError):
        log.append([b"x"], producer_id=5, producer_epoch=0)


def test_duplicates_are_detected_after_reopen(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d, segment_bytes=1024) as log:
        first = send(log, 0)
        for seq in range(2, 40, 2):
            send(log, seq)
    assert any(n.endswith(".snapshot") for n in os.listdir(d))
    with Log.open(d, segment_bytes=1024) as log:
        again = send(log, 38)
        assert again.duplicate
        with pytest.raises(OutOfOrderSequenceError):
            send(log, 100)
        assert not send(log, 40).duplicate
    assert first.first_offset == 0


@pytest.mark.parametrize("segment_bytes", [1 << 20, 1024])
def test_each_of_the_last_five_batches_is_a_duplicate_after_a_clean_restart(tmp_path, segment_bytes):
    """Kafka's snapshot keeps only each producer's last batch; the four before it are read
    back from the log on open, so the window stays five batches, as before the restart.
    With 1 KiB segments the five batches span segments (and earlier snapshots)."""
    d = tmp_path / "t-0"
    other = PID + 1
    with Log.open(d, segment_bytes=segment_bytes) as log:
        infos = []
        for seq in range(0, 16, 2):  # eight batches of two producers, interleaved
            infos.append(send(log, seq))
            send(log, seq, pid=other)
    snapshots = sorted(n for n in os.listdir(d) if n.endswith(".snapshot"))
    assert len(read_snapshot(d / snapshots[-1])) == 2  # Kafka's format: one entry per producer
    with Log.open(d, segment_bytes=segment_bytes) as log:
        end = log.log_end_offset
        for original in infos[-5:]:
            again = send(log, original.first_offset // 2)  # the sequence it was sent with
            assert again.duplicate, original
            assert (again.first_offset, again.last_offset) == (original.first_offset, original.last_offset)
        with pytest.raises(OutOfOrderSequenceError):
            send(log, infos[-6].first_offset // 2)  # the sixth back is out of the window, as in Kafka
        assert send(log, 14, pid=other).duplicate
        assert log.log_end_offset == end
        assert not send(log, 16).duplicate


def test_the_read_back_window_keeps_only_batches_that_chain_into_the_snapshot(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d) as log:
        send(log, 0)
        send(log, 2)
        send(log, 0, epoch=EPOCH + 1)  # a new epoch starts over at sequence 0
        last = send(log, 2, epoch=EPOCH + 1)
    with Log.open(d) as log:
        assert send(log, 0, epoch=EPOCH + 1).duplicate
        assert send(log, 2, epoch=EPOCH + 1).first_offset == last.first_offset
        with pytest.raises(ProducerFencedError):
            send(log, 2, epoch=EPOCH)


def test_the_window_stays_five_batches_when_a_truncation_reloads_a_snapshot(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d) as log:
        infos = [send(log, seq) for seq in range(0, 12, 2)]  # the close snapshot is at offset 12
    with Log.open(d) as log:
        send(log, 12)
        log.truncate_to(12)  # producer state reloads from the snapshot at 12
        for original in infos[-5:]:
            assert send(log, original.first_offset).first_offset == original.first_offset
        assert log.log_end_offset == 12


def test_the_read_back_reads_a_bounded_tail_of_the_log(tmp_path, monkeypatch):
    import pylog.producer_state as producer_state
    d = tmp_path / "t-0"
    with Log.open(d, index_interval_bytes=1) as log:  # an index entry per batch: the read-back starts at one
        infos = [send(log, seq) for seq in range(0, 16, 2)]
    batch_bytes = log.size_bytes // len(infos)
    monkeypatch.setattr(producer_state, "READ_BACK_BYTES", 3 * batch_bytes)  # from two batches before the last
    with Log.open(d) as log:
        for original in infos[-3:]:
            assert send(log, original.first_offset).first_offset == original.first_offset
        with pytest.raises(OutOfOrderSequenceError):
            send(log, infos[-4].first_offset)


def test_duplicates_are_detected_after_a_crash_from_snapshot_and_replay(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, segment_bytes=1024)
    for seq in range(0, 60, 2):
        send(log, seq)
    log.flush()
    log._dir.unlock()  # the process dies: no close, no clean marker
    with Log.open(d, segment_bytes=1024) as log:
        assert send(log, 58).duplicate


def test_aborted_transaction_spanning_segments_is_hidden_from_committed_reads(log):
    log.append([b"plain"])
    for seq in range(0, 40, 2):
        send(log, seq, txn=True)
    assert len(log.segments) >= 2
    assert log.last_stable_offset == 1  # the open transaction pins it
    log.append_txn_marker(PID, EPOCH, commit=False)
    log.append([b"after"])
    assert log.last_stable_offset == log.log_end_offset
    committed = [r.value for r in log.records(isolation="committed")]
    assert committed == [b"plain", b"after"]
    assert len(list(log.records())) == 42  # uncommitted reads see everything but markers
    fetch = log.read(1, isolation="committed")
    assert [(t.producer_id, t.first_offset) for t in fetch.aborted_transactions] == [(PID, 1)]


def test_committed_transaction_is_visible_after_its_marker(log):
    send(log, 0, txn=True)
    assert log.read(0, isolation="committed").records() == []
    log.append_txn_marker(PID, EPOCH, commit=True, coordinator_epoch=4)
    assert [r.value for r in log.records(isolation="committed")] == [b"s0-0", b"s0-1"]


def test_non_transactional_batch_inside_open_transaction_is_refused(log):
    send(log, 0, txn=True)
    with pytest.raises(InvalidTxnStateError):
        send(log, 2, txn=False)


def test_marker_from_fenced_epoch_is_refused(log):
    send(log, 0, epoch=5, txn=True)
    with pytest.raises(ProducerFencedError):
        log.append_txn_marker(PID, 4, commit=True)


def test_transaction_index_is_rebuilt_by_recovery(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d)
    send(log, 0, txn=True)
    log.append_txn_marker(PID, EPOCH, commit=False)
    log.append([b"ok"])
    log.flush()
    log._dir.unlock()
    os.remove(d / "00000000000000000000.txnindex")
    with Log.open(d) as log:
        assert [r.value for r in log.records(isolation="committed")] == [b"ok"]
        assert os.path.exists(d / "00000000000000000000.txnindex")


def test_snapshot_round_trip_and_corrupt_snapshot_is_skipped(tmp_path):
    d = tmp_path / "t-0"
    with Log.open(d) as log:
        send(log, 0)
        send(log, 2)
    snap = d / "00000000000000000004.snapshot"
    entries = read_snapshot(snap)
    assert encode_snapshot(entries) == snap.read_bytes()
    data = bytearray(snap.read_bytes())
    data[-1] ^= 1
    snap.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(snap)
    with Log.open(d) as log:  # falls back to replaying the log
        assert send(log, 2).duplicate


@needs_samples
def test_kafka_snapshots_read_and_rewrite_byte_for_byte():
    found = list((SAMPLES / "real").rglob("*.snapshot"))
    assert found
    for path in found:
        assert encode_snapshot(read_snapshot(path)) == path.read_bytes()


@needs_samples
@pytest.mark.parametrize("read_only", [True, False])
def test_kafka_transactional_sample_reads_committed(tmp_path, read_only):
    src = SAMPLES / "reference" / "v2-txn"
    d = tmp_path / "txn-0"
    shutil.copytree(src, d)
    with Log.open(d, read_only=read_only) as log:
        assert [r.offset for r in log.records(isolation="committed")] == [0, 1, 2, 7, 8]
        assert [r.offset for r in log.records()] == [0, 1, 2, 4, 5, 7, 8]


def test_uncommitted_reads_of_a_read_only_log_skip_the_transaction_replay(tmp_path, monkeypatch):
    """Only committed reads need open transactions; a plain read of a read-only log stays
    O(fetch) instead of replaying every producer batch of the log first."""
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=2_000) as w:
        for i in range(30):
            w.append([b"v%d" % i] * 5)
    import pylog.producer_state

    def no_replay(*args, **kwargs):
        raise AssertionError("an uncommitted read replayed the log's transactions")

    with Log.open(path, read_only=True) as log:
        with monkeypatch.context() as m:
            m.setattr(pylog.producer_state, "ProducerStateManager", no_replay)
            assert log.read(0, 1 << 20).records()[0].value == b"v0"
            assert [r.offset for r in log.records(140)] == list(range(140, 150))
        assert len(log.read(0, isolation="committed").records()) > 0


def test_idle_producers_expire_unless_a_transaction_is_open(tmp_path):
    now = 1_700_000_000_000
    with Log.open(tmp_path / "t-0", producer_id_expiration_ms=60_000) as log:
        def send_at(pid, ts, seq, txn=False):
            return log.append([Record(b"v", timestamp=ts)], producer_id=pid, producer_epoch=0, base_sequence=seq,
                              is_transactional=txn)

        first = send_at(1, now, 0)
        send_at(2, now, 0, txn=True)  # left open
        send_at(3, now + 50_000, 0)
        assert log.cleaner_view.expire_producers(now + 59_999) == []
        assert log.cleaner_view.expire_producers(now + 60_000) == [1]
        assert sorted(log._producers.entries()) == [2, 3]
        retry = send_at(1, now, 0)  # no longer recognised as a duplicate: written again
        assert retry.first_offset > first.first_offset
        assert sorted(log.cleaner_view.expire_producers(now + 10**9)) == [1, 3]  # the open transaction keeps producer 2


def test_the_cleaner_round_expires_idle_producers(tmp_path):
    from pylog import LogManager
    with LogManager(tmp_path, producer_id_expiration_ms=1000) as m:
        log = m.create_topic("t", 1).log(0)
        log.append([Record(b"v", timestamp=1000)], producer_id=5, producer_epoch=0, base_sequence=0)
        m.start_cleaner(interval_ms=3_600_000)  # one round now, the next in an hour
        deadline = time.time() + 10
        while log._producers.entries() and time.time() < deadline:
            time.sleep(0.01)
        assert log._producers.entries() == {}


# -- ProducerStateManager on its own: validate an append, apply its batches ----------------------------
def _batch(base_offset, seq, *, pid=PID, epoch=EPOCH, txn=False, n=2):
    raw = encode_batch([b"v%d" % i for i in range(n)], base_offset=base_offset, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=txn, timestamp=0)
    return list(decode_batches(raw))[0]


def _marker(base_offset, *, abort, pid=PID, epoch=EPOCH):
    raw = encode_control_batch(0 if abort else 1, producer_id=pid, producer_epoch=epoch, base_offset=base_offset)
    return list(decode_batches(raw))[0]


def _manager(tmp_path):
    return ProducerStateManager(tmp_path, producer_id_expiration_ms=3_600_000)


def test_validate_returns_the_original_offsets_of_a_single_duplicate_batch_and_changes_nothing(tmp_path):
    producers = _manager(tmp_path)
    first = _batch(0, 0)
    assert producers.validate([first], from_client=True) is None
    producers.apply(first)
    retry = _batch(7, 0)  # the same sequence numbers written again, at another offset
    batch, original = producers.validate([retry], from_client=True)
    assert batch is retry and original == (0, 1)
    assert producers.validate([retry, _batch(9, 2)], from_client=True) is None  # not alone: no duplicate
    with pytest.raises(OutOfOrderSequenceError):
        producers.validate([_batch(2, 5)], from_client=True)
    assert producers.entries()[PID].last_sequence == 1


def test_apply_ignores_batches_without_a_producer_and_returns_the_aborted_transaction(tmp_path):
    producers = _manager(tmp_path)
    plain = list(decode_batches(encode_batch([b"x"], base_offset=0, timestamp=0)))[0]
    assert producers.apply(plain) is None and producers.entries() == {}
    assert producers.apply(_batch(1, 0, txn=True)) is None
    assert producers.first_unstable_offset() == 1
    aborted = producers.apply(_marker(3, abort=True))
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (PID, 1, 3)
    assert producers.first_unstable_offset() is None


def test_replay_applies_batches_in_order_and_reports_aborts_and_the_first_unstable_offset(tmp_path):
    """``replay`` feeds the batches to the state; ``first_unstable_offset`` is the one source
    of the last stable offset, at least the log start when one is given."""
    from pylog.producer_state import ProducerStateManager
    from pylog.record.batch import decode_batches
    from pylog.record.encode import encode_batch, encode_control_batch
    raw = (encode_batch([b"a"], base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
           + encode_batch([b"b"], base_offset=1, producer_id=8, producer_epoch=0, base_sequence=0,
                          is_transactional=True)
           + encode_control_batch(0, producer_id=7, producer_epoch=0, base_offset=2))
    state = ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000, read_only=True)
    aborted = []
    state.replay(decode_batches(raw), aborted.append)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(7, 0, 2)]
    assert state.first_unstable_offset() == 1  # producer 8's transaction is still open
    assert state.first_unstable_offset(None, 5) == 5
