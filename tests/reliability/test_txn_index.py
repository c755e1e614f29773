"""Damaged ``.txnindex`` files and crashes while an open rebuilds them: committed reads never
return a record of an aborted transaction, nor hide a committed one, for read-only and
writable opens alike."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pylog import Log, Record
from pylog.index.txn_index import read_txn_entries
from pylog.layout import CLEAN_SHUTDOWN_FILE

SEGMENT_BYTES = 2500
PRODUCERS = (7, 8, 9)


def _make(d, transactions: int = 40) -> list[bytes]:
    """Interleaved transactions of three producers (every third aborted, several spanning
    segments) and plain records; returns the values a committed read must see, in order."""
    rng = random.Random(transactions)
    seq = dict.fromkeys(PRODUCERS, 0)
    open_txn: dict[int, list[bytes]] = {}
    committed: list[bytes] = []
    with Log.open(d, segment_bytes=SEGMENT_BYTES) as log:
        for t in range(transactions * 4):
            pid = rng.choice(PRODUCERS)
            if pid in open_txn and (len(open_txn[pid]) >= 3 or rng.random() < 0.3):
                commit = t % 3 != 0
                log.append_txn_marker(pid, 0, commit)
                values = open_txn.pop(pid)
                if commit:
                    committed += values
                continue
            value = b"txn-%d-%d" % (pid, t)
            log.append([Record(value)], producer_id=pid, producer_epoch=0, base_sequence=seq[pid],
                       is_transactional=True)
            seq[pid] += 1
            open_txn.setdefault(pid, []).append(value)
            log.append([Record(b"plain-%d" % t)])
            committed.append(b"plain-%d" % t)
        for pid in list(open_txn):
            log.append_txn_marker(pid, 0, True)
            committed += open_txn.pop(pid)
    with Log.open(d, read_only=True) as log:
        offsets = {r.value: r.offset for r in log.records()}
    return sorted(committed, key=offsets.__getitem__)


def _committed_values(d, *, read_only: bool) -> list[bytes]:
    with Log.open(d, read_only=read_only, segment_bytes=SEGMENT_BYTES) as log:
        return [r.value for r in log.records(isolation="committed")]


def _txn_indexes(d) -> list:
    return sorted(p for p in d.iterdir() if p.name.endswith(".txnindex"))


def _flip(path, bit: int) -> None:
    data = bytearray(path.read_bytes())
    data[bit // 8 % len(data)] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


DAMAGE = {
    "deleted": lambda p: p.unlink(),
    "emptied": lambda p: p.write_bytes(b""),
    "zeroed": lambda p: p.write_bytes(b"\0" * p.stat().st_size),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:40]),
    **{f"bit-{bit}": (lambda p, bit=bit: _flip(p, bit))
       for bit in (3, 2 * 8 + 7, 10 * 8 + 7, 18 * 8 + 6, 26 * 8 + 7, 34 * 8 + 19, 34 * 8 + 26 * 8 + 7)},
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writable"])
def test_damaged_txn_index_never_lets_aborted_records_through(tmp_path, damage, read_only):
    d = tmp_path / "t-0"
    expected = _make(d)
    victims = [p for p in _txn_indexes(d) if p.stat().st_size]
    assert len(victims) >= 3
    for p in victims[:-1]:  # closed segments, below the recovery point
        DAMAGE[damage](p)
    assert _committed_values(d, read_only=read_only) == expected
    assert _committed_values(d, read_only=True) == expected
    assert _committed_values(d, read_only=False) == expected


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writable"])
def test_swap_leftover_without_its_txn_index(tmp_path, read_only):
    """A crash during a swap can leave a ``.swap`` segment whose ``.txnindex`` did not follow;
    the open completes the swap and deletes the old segment's files, its index among them."""
    d = tmp_path / "t-0"
    expected = _make(d)
    victim = next(p for p in _txn_indexes(d) if p.stat().st_size)
    prefix = victim.name[: -len(".txnindex")]
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copy(d / (prefix + suffix), d / (prefix + suffix + ".swap"))
    assert _committed_values(d, read_only=read_only) == expected
    assert _committed_values(d, read_only=False) == expected
    assert not (d / (prefix + ".log.swap")).exists()


def test_a_rebuilt_txn_index_is_written_and_agrees_with_the_markers(tmp_path):
    d = tmp_path / "t-0"
    expected = _make(d)
    originals = {p.name: list(read_txn_entries(str(p))) for p in _txn_indexes(d)}
    for p in _txn_indexes(d):
        p.write_bytes(b"\0" * p.stat().st_size)
    with Log.open(d, segment_bytes=SEGMENT_BYTES) as log:
        assert [r.value for r in log.records(isolation="committed")] == expected
        assert all(s.txn_index.trusted for s in log.segments)
    rebuilt = {p.name: list(read_txn_entries(str(p))) for p in _txn_indexes(d) if p.stat().st_size}
    assert rebuilt.keys() == originals.keys()
    for name, entries in rebuilt.items():  # the last stable offset: as if the high watermark had passed
        assert [t[:3] for t in entries] == [t[:3] for t in originals[name]]
        assert all(o.last_stable_offset <= t.last_stable_offset <= t.last_offset + 1
                   for o, t in zip(originals[name], entries))


def test_killed_after_recovering_one_segment(tmp_path):
    """The open dies once it re-validated the first segment, before any ``.txnindex`` was
    rebuilt: whatever that left on disk, committed reads stay right."""
    d = tmp_path / "t-0"
    expected = _make(d)
    (d.parent / CLEAN_SHUTDOWN_FILE).unlink()  # the log dir's marker: the next open recovers
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "PYLOG_FAILPOINTS": "recover.segment-recovered"}
    opener = "import sys; from pylog import Log; Log.open(sys.argv[1], segment_bytes=int(sys.argv[2]))"
    proc = subprocess.run([sys.executable, "-c", opener, str(d), str(SEGMENT_BYTES)], env=env)
    assert proc.returncode == -signal.SIGKILL
    assert _committed_values(d, read_only=True) == expected
    assert _committed_values(d, read_only=False) == expected


OPENER = textwrap.dedent("""
    import os, sys, time
    from pylog import Log
    path, warm_up, segment_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
    Log.open(warm_up, segment_bytes=segment_bytes).close()  # every module an open needs is loaded now
    os.write(1, b"opening\\n")
    started = time.monotonic()
    log = Log.open(path, segment_bytes=segment_bytes)
    os.write(1, b"opened %f\\n" % (time.monotonic() - started))
    sys.stdin.read()  # killed here, or earlier
""")


def _unclean_copy(src, dst) -> None:
    """``src`` as a writer would leave it after dying with everything unflushed: no
    clean-shutdown marker and no recovery-point checkpoint: the next open recovers every segment."""
    shutil.copytree(src, dst)  # the marker and the checkpoints stay behind, in src's log dir
    assert not (dst.parent / CLEAN_SHUTDOWN_FILE).exists()


class _Opener:
    """Child processes that open a copy of ``pristine`` (recovering it) and are killed."""

    def __init__(self, tmp_path, pristine, warm_pristine):
        self.tmp_path, self.pristine, self.warm_pristine = tmp_path, pristine, warm_pristine
        self.script = tmp_path / "opener.py"
        self.script.write_text(OPENER)
        self.env = {**os.environ, "PYTHONPATH": os.getcwd()}
        self.recovery_s = None  # how long the last uninterrupted open took, as the machine is loaded now

    def run(self, name: str, kill_after_fraction: float | None):
        """Start an open of a fresh copy; SIGKILL it ``kill_after_fraction`` of a recovery
        after it began (when it is done if None). Returns the copy's path."""
        d, warm_up = self.tmp_path / name / "t-0", self.tmp_path / f"{name}-warm-up" / "t-0"
        _unclean_copy(self.pristine, d)
        _unclean_copy(self.warm_pristine, warm_up)
        proc = subprocess.Popen([sys.executable, str(self.script), str(d), str(warm_up), str(SEGMENT_BYTES)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env)
        assert proc.stdout.readline() == b"opening\n"  # imports done: the open starts now
        out = proc.stdout.readline() if kill_after_fraction is None else b""  # "opened <seconds>"
        if kill_after_fraction is not None:
            time.sleep(kill_after_fraction * self.recovery_s)
        proc.send_signal(signal.SIGKILL)
        out += proc.communicate()[0]
        for line in out.splitlines():
            if line.startswith(b"opened "):
                self.recovery_s = float(line.split()[1])
        return d


def test_kill_while_recovering_leaves_no_index_that_lets_aborted_records_through(tmp_path, soak):
    pristine, warm_pristine = tmp_path / "pristine" / "t-0", tmp_path / "warm-pristine" / "t-0"
    expected = _make(pristine, transactions=200)
    _make(warm_pristine, transactions=5)
    opener = _Opener(tmp_path, pristine, warm_pristine)
    opener.run("timing", None)
    rng = random.Random(5)
    trials = 100 if soak else 6
    for trial in range(trials):
        d = opener.run(f"trial-{trial}", rng.uniform(trial, trial + 1) / trials * 1.1)  # spread over a recovery
        assert _committed_values(d, read_only=True) == expected, f"trial {trial}"
        with Log.open(d, segment_bytes=SEGMENT_BYTES) as log:
            assert [r.value for r in log.records(isolation="committed")] == expected, f"trial {trial}"
            assert log.check() == []
        assert _committed_values(d, read_only=True) == expected, f"trial {trial}"


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "deleted"])
def test_aborting_into_an_active_segment_whose_index_was_damaged(tmp_path, damage):
    d = tmp_path / "t-0"
    expected = _make(d)

    def aborted_transaction(log, value: bytes, sequence: int) -> None:
        log.append([Record(value)], producer_id=11, producer_epoch=0, base_sequence=sequence, is_transactional=True)
        log.append_txn_marker(11, 0, False)

    with Log.open(d, segment_bytes=SEGMENT_BYTES) as log:
        aborted_transaction(log, b"aborted-1", 0)
        active = log.active_segment.txn_index.path
    DAMAGE[damage](Path(active))
    with Log.open(d, segment_bytes=SEGMENT_BYTES) as log:
        aborted_transaction(log, b"aborted-2", 1)
        log.append([Record(b"after")])
        assert [r.value for r in log.records(isolation="committed")] == expected + [b"after"]
    for read_only in (True, False):
        assert _committed_values(d, read_only=read_only) == expected + [b"after"]
