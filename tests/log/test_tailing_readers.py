"""Long-lived readers follow a writer: every record exactly once, in order, across rolls,
retention, truncation and compaction, for uncommitted and committed reads.

"Exactly once" is meant as Kafka means it. A reader prints each record it fetched once,
in offset order, and a reader that keeps up loses nothing. Truncation removes records
above a point; a reader bounded by what truncation may not remove (committed reads,
whose open transaction is the part truncated here) never sees them, while an
uncommitted reader sees whatever is in the log when it reads, so the writer truncates
only what it appended while that reader was paused. A position below a new log start
(retention passed a reader that fell behind) is ``OffsetOutOfRangeError``, as in Kafka;
the readers here keep up before retention runs, so they lose nothing.

The reader runs in another process (already reading when the writer starts), in this
process as a read-only ``Log``, or is the writer's own ``Log``. Synchronisation is by
acknowledgements over pipes, never by sleeping.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pylog import Log, LogManager, OffsetOutOfRangeError
from pylog.log.local import LocalLog
from pylog.segment.segment import Segment

ISOLATIONS = ["uncommitted", "committed"]
WAIT_S = 60  # deadline for any one acknowledgement


class Model:
    """The records a reader with ``isolation`` must print, as the writer made them."""

    def __init__(self, isolation: str):
        self.isolation = isolation
        self.visible: dict[int, bytes] = {}
        self.open: dict[int, list[tuple[int, bytes]]] = {}

    def appended(self, first_offset: int, values: list[bytes], producer_id: int | None = None) -> None:
        records = list(zip(range(first_offset, first_offset + len(values)), values))
        if producer_id is not None and self.isolation == "committed":
            self.open.setdefault(producer_id, []).extend(records)
        else:
            self.visible.update(records)

    def ended(self, producer_id: int, commit: bool) -> None:
        records = self.open.pop(producer_id, [])
        if commit:
            self.visible.update(records)

    def truncated(self, offset: int) -> None:
        self.visible = {o: v for o, v in self.visible.items() if o < offset}
        for pid in list(self.open):
            self.open[pid] = [(o, v) for o, v in self.open[pid] if o < offset]

    def expected(self, start_offset: int = 0) -> list[tuple[int, bytes]]:
        return sorted((o, v) for o, v in self.visible.items() if o >= start_offset)


class Writer:
    """Drives a writable log through rolls, transactions, retention, truncation and
    compaction, telling the reader harness when to catch up or pause."""

    def __init__(self, log: Log, model: Model, harness, rounds: int):
        self.log, self.model, self.harness, self.rounds = log, model, harness, rounds
        self.seq: dict[int, int] = {}
        self.n = 0

    def put(self, count: int = 3, producer_id: int | None = None):
        values = [b"v%d" % (self.n + i) for i in range(count)]
        self.n += count
        records = [(v, v) for v in values]  # unique keys: compaction removes no record
        if producer_id is None:
            info = self.log.append(records)
        else:
            seq = self.seq.get(producer_id, 0)
            info = self.log.append(records, producer_id=producer_id, producer_epoch=0, base_sequence=seq,
                                   is_transactional=True)
            self.seq[producer_id] = seq + count
        self.model.appended(info.first_offset, values, producer_id)
        self.harness.tick()
        return info

    def end(self, producer_id: int, commit: bool) -> None:
        self.log.append_txn_marker(producer_id, 0, commit)
        self.model.ended(producer_id, commit)
        self.harness.tick()

    def catch_up(self) -> None:
        log = self.log
        self.harness.sync(log.last_stable_offset if self.model.isolation == "committed" else log.log_end_offset)

    def run(self) -> None:
        for _ in range(self.rounds):
            self.rolls()
            self.transactions()
            self.retention()
            self.truncation(appends=1)   # inside the active segment
            self.truncation(appends=12)  # across rolls: segments go
            self.compaction()
        self.catch_up()

    def rolls(self) -> None:
        for _ in range(20):
            self.put()
        self.catch_up()

    def transactions(self) -> None:
        self.put(2, producer_id=7)
        self.put()
        self.put(2, producer_id=8)
        self.put(2, producer_id=7)
        self.end(7, commit=True)
        self.put(2, producer_id=9)  # stays open for a while: committed reads stop before it
        self.put(2, producer_id=8)
        self.end(8, commit=False)
        for _ in range(6):
            self.put()
        self.catch_up()
        self.end(9, commit=False)
        self.put(2, producer_id=9)
        self.end(9, commit=True)
        self.catch_up()

    def retention(self) -> None:
        self.catch_up()
        log = self.log
        removed = log.delete_records(min(log.high_watermark, log.last_stable_offset))
        assert removed > 0 and len(log.segments) >= 1
        self.put()
        self.catch_up()

    def truncation(self, appends: int) -> None:
        committed = self.model.isolation == "committed"
        self.catch_up()
        with contextlib.nullcontext() if committed else self.harness.paused():
            doomed = None
            for _ in range(appends):  # committed: an open transaction, so never readable
                info = self.put(producer_id=11 if committed else None)
                doomed = info.first_offset if doomed is None else doomed
            self.log.truncate_to(doomed)
            self.model.truncated(doomed)
            self.seq.pop(11, None)
            self.model.open.pop(11, None)
            for _ in range(appends + 1):
                self.put()
        self.catch_up()

    def compaction(self) -> None:
        self.log.roll()
        result = self.log.compact(force=True)
        assert result.cleaned_segments
        self.harness.tick()
        self.put()
        self.catch_up()


# -- harnesses: how the reader runs ------------------------------------------------------------

class InProcess:
    """A reader in this process: a read-only ``Log`` of the same directory, or the
    writer's own ``Log``. It polls once on every tick (a small fetch), so it holds stale
    state across each of the writer's steps."""

    def __init__(self, log: Log, isolation: str):
        self.log, self.isolation = log, isolation
        self.offset = log.log_start_offset
        self.out: list[tuple[int, bytes]] = []
        self._paused = False

    def poll(self, max_bytes: int = 300) -> bool:
        fetch = self.log.read(self.offset, max_bytes, isolation=self.isolation)
        self.out += [(r.offset, r.value) for r in fetch.records()]
        if not fetch.size_bytes:
            return False
        self.offset = fetch.next_offset
        return True

    def tick(self) -> None:
        if not self._paused:
            self.poll()

    def sync(self, target: int) -> None:
        while self.poll(1 << 20):
            pass
        assert self.offset >= target, f"reader stopped at {self.offset}, below {target}"

    @contextlib.contextmanager
    def paused(self):
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def finish(self) -> list[tuple[int, bytes]]:
        return self.out


READER = textwrap.dedent("""
    import select, sys
    from pylog import Log, OffsetOutOfRangeError
    path, isolation = sys.argv[1], sys.argv[2]
    log = Log.open(path, read_only=True)
    offset, reported = log.log_start_offset, None
    print("E", offset, flush=True)
    while True:
        try:
            fetch = log.read(offset, 4096, isolation=isolation)
        except OffsetOutOfRangeError as e:
            print("X", offset, e, flush=True)
            sys.exit(3)
        for r in fetch.records():
            print("R", r.offset, r.value.decode(), flush=True)
        if fetch.size_bytes:
            offset = fetch.next_offset
            continue
        if offset != reported:
            print("E", offset, flush=True)
            reported = offset
        if select.select([sys.stdin], [], [], 0.005)[0]:
            command = sys.stdin.readline().strip()
            if command == "pause":
                print("P", offset, flush=True)
                command = sys.stdin.readline().strip()
            if command == "state":  # what the reader knows, for a failure message
                with Log.open(path, read_only=True) as fresh:
                    print("S", offset, "end", log.log_end_offset, "lso", log.last_stable_offset,
                          "open", log._producers.ongoing_transactions() if log._producers else None,
                          "segments", [s.base_offset for s in log.segments][-4:], "fresh end",
                          fresh.log_end_offset, "lso", fresh.last_stable_offset,
                          "open", fresh._producers.ongoing_transactions(), flush=True)
            if command in ("stop", ""):
                break
            reported = None
""")


class OtherProcess:
    """A reader in another process, already reading when the writer starts: it prints
    ``R offset value`` per record, ``E offset`` when it reached the end, ``P offset``
    when it paused; commands on stdin: ``pause``, ``go``, ``stop``."""

    def __init__(self, path, isolation: str, tmp_path):
        script = tmp_path / "reader.py"
        script.write_text(READER)
        self.proc = subprocess.Popen([sys.executable, str(script), str(path), isolation], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "PYTHONPATH": os.getcwd()})
        self.lines = _line_queue(self.proc.stdout)
        self.out: list[tuple[int, bytes]] = []
        self.at_end = self._expect("E")  # where the reader last reported reaching the end

    def _expect(self, kind: str, at_least: int = 0) -> int:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                line = _next_line(self.lines, deadline, f"reader sent no {kind} >= {at_least} within {WAIT_S} s")
            except AssertionError as e:
                raise AssertionError(f"{e}; reader state: {self._state()}") from None
            if line is None:
                raise AssertionError(f"reader exited: {self.proc.wait()} {self.proc.stderr.read().decode()}")
            tag, offset, *rest = line.split(" ", 2)
            if tag == "R":
                self.out.append((int(offset), rest[0].encode()))
            elif tag == "X":
                raise AssertionError(f"reader was out of range: {line}")
            elif tag == "E":
                self.at_end = int(offset)
            if tag == kind and int(offset) >= at_least:
                return int(offset)

    def _state(self) -> str:
        self._send("state")
        deadline = time.monotonic() + WAIT_S
        while (line := _next_line(self.lines, deadline, "no state")) is not None and not line.startswith("S "):
            pass
        return line

    def _send(self, command: str) -> None:
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def tick(self) -> None:
        pass

    def sync(self, target: int) -> None:
        if self.at_end < target:
            self._expect("E", target)

    @contextlib.contextmanager
    def paused(self):
        self._send("pause")
        self._expect("P")
        try:
            yield
        finally:
            self._send("go")

    def finish(self) -> list[tuple[int, bytes]]:
        self._send("stop")
        assert self.proc.wait(timeout=WAIT_S) == 0, self.proc.stderr.read().decode()
        while (line := self.lines.get(timeout=WAIT_S)) is not None:
            tag, offset, *rest = line.split(" ", 2)
            if tag == "R":
                self.out.append((int(offset), rest[0].encode()))
        return self.out


def _line_queue(pipe) -> queue.Queue:
    """The lines of ``pipe`` as they come (None at its end), read by a thread."""
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in pipe:
            lines.put(line.decode().rstrip("\n"))
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return lines


def _next_line(lines: queue.Queue, deadline: float, failure: str):
    try:
        return lines.get(timeout=max(deadline - time.monotonic(), 0.001))
    except queue.Empty:
        raise AssertionError(failure) from None


# -- the tests ------------------------------------------------------------------------------------

def _writer_log(path) -> Log:
    return Log.open(path, segment_bytes=1024, cleanup_policy="compact,delete", file_delete_delay_ms=0,
                    min_cleanable_dirty_ratio=0.0)


def _check(out, model: Model, log: Log, isolation: str) -> None:
    offsets = [o for o, _ in out]
    assert offsets == sorted(set(offsets)), "a record came twice or out of order"
    assert out == model.expected(), "the reader's records differ from what the writer left readable"
    if isolation == "committed":
        with Log.open(log.path, read_only=True) as fresh:
            now = [(r.offset, r.value) for r in fresh.records(isolation="committed")]
        assert [(o, v) for o, v in out if o >= fresh.log_start_offset] == now


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_reader_process_sees_every_record_once_across_rolls_retention_truncation_compaction(
        tmp_path, isolation, soak):
    path = tmp_path / "t-0"
    with _writer_log(path) as log:
        log.append([(b"k", b"first")])
        model = Model(isolation)
        model.appended(0, [b"first"])
        reader = OtherProcess(path, isolation, tmp_path)
        Writer(log, model, reader, rounds=200 if soak else 1).run()
        out = reader.finish()
        _check(out, model, log, isolation)


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("own_log", [False, True], ids=["read_only", "writers_log"])
def test_reader_in_this_process_sees_every_record_once(tmp_path, isolation, own_log):
    path = tmp_path / "t-0"
    with _writer_log(path) as log:
        model = Model(isolation)
        log.append([(b"k", b"first")])
        model.appended(0, [b"first"])
        with contextlib.nullcontext(log) if own_log else Log.open(path, read_only=True) as view:
            reader = InProcess(view, isolation)
            Writer(log, model, reader, rounds=2).run()
            _check(reader.finish(), model, log, isolation)


def test_read_only_reader_sees_a_segment_it_measured_grow_after_a_roll(tmp_path):
    """The regression at the heart of it: the segment a reader saw as active kept its
    old size after the writer rolled, so its unseen part was skipped."""
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=400) as w, Log.open(path, read_only=True) as r:
        w.append([b"a"])
        assert [x.offset for x in r.read(0).records()] == [0]
        for i in range(30):
            w.append([b"v%d" % i])
        assert len(w.segments) > 2
        assert [x.offset for x in r.records(1)] == list(range(1, 31))


@pytest.mark.parametrize("answer", ["last_stable_offset", "offset_for_timestamp"])
def test_a_reader_caught_in_a_compaction_s_renames_lists_again(tmp_path, monkeypatch, answer):
    """The reader listed segments 4 and 8, then the writer's compaction began replacing them
    with one cleaned segment: its ``.swap`` written, segment 4's indexes already renamed
    ``.deleted``, its ``.log`` not yet. The reader's last stable offset (a replay of the
    producer batches) and timestamp lookup meet the missing index: they list again (by
    then the writer finished) and answer as the writer does, where they used to fail with
    FileNotFoundError."""
    from pylog import Record
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=300) as w:
        for i in range(40):
            w.append([Record(b"v%d" % i, timestamp=1000 + i)])
        bases = [s.base_offset for s in w.segments]
        expected = getattr(w, answer) if answer == "last_stable_offset" else w.offset_for_timestamp(1006)
    assert bases[1:3] == [4, 8]
    name = lambda base, suffix: path / f"{base:020d}{suffix}"  # noqa: E731
    with Log.open(path, read_only=True) as r:
        name(4, ".log.swap").write_bytes(name(4, ".log").read_bytes() + name(8, ".log").read_bytes())
        for suffix in (".index", ".timeindex"):
            name(4, suffix).rename(str(name(4, suffix)) + ".deleted")
        refresh = r.refresh

        def writer_finished_meanwhile(**kwargs):
            if name(4, ".log.swap").exists():
                for base, suffix in [(4, ".log"), (8, ".log"), (8, ".index"), (8, ".timeindex")]:
                    name(base, suffix).rename(str(name(base, suffix)) + ".deleted")
                name(4, ".log.swap").rename(name(4, ".log"))
            return refresh(**kwargs)
        monkeypatch.setattr(r, "refresh", writer_finished_meanwhile)
        found = r.last_stable_offset if answer == "last_stable_offset" else r.offset_for_timestamp(1006)
        assert found == expected
        assert [x.value for x in r.records()] == [b"v%d" % i for i in range(40)]


@pytest.mark.parametrize("answer", ["last_stable_offset", "offset_for_timestamp"])
def test_a_file_gone_between_a_reader_s_look_and_its_read_is_listed_again(tmp_path, monkeypatch, answer):
    """The race the test above cannot time: a file the reader found is gone when it reads
    it (FileNotFoundError, as from a writer's rename in between). The reader lists again
    and answers; it used to fail."""
    import errno
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=300) as w:
        for i in range(40):
            w.append([b"v%d" % i], timestamp=1000 + i)
    with Log.open(path, read_only=True) as r:
        gone = []
        read_file = LocalLog.batches_between if answer == "last_stable_offset" else LocalLog.offset_for_timestamp

        def vanishes_once(self, *args):
            if not gone:
                gone.append(True)
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", "00000000000000000004.timeindex")
            return read_file(self, *args)
        monkeypatch.setattr(LocalLog, read_file.__name__, vanishes_once)
        found = r.last_stable_offset if answer == "last_stable_offset" else r.offset_for_timestamp(1006)
        assert gone and found == (40 if answer == "last_stable_offset" else 6)


def test_read_only_reader_notices_truncation_and_regrowth_between_two_polls(tmp_path):
    """Truncated and grown past the old size before the reader looked again: the
    directory did not change, only the active segment's bytes."""
    path = tmp_path / "t-0"
    with Log.open(path) as w, Log.open(path, read_only=True) as r:
        for value in (b"keep", b"old-1", b"old-2"):
            w.append([value])
        assert [x.value for x in r.read(0).records()] == [b"keep", b"old-1", b"old-2"]
        size = w.active_segment.size_bytes
        w.truncate_to(1)  # the last batch the reader saw now lies inside the new one
        new = [b"new-1 " + b"x" * 80, b"new-2 " + b"y" * 80]
        w.append(new)
        assert w.active_segment.size_bytes > size
        assert [x.value for x in r.records(1)] == new


def test_read_only_reader_notices_a_truncation_rewritten_to_the_same_size(tmp_path):
    """An open transaction's batch truncated and replaced by a plain batch of the same
    size: the file's size is as before, yet the transaction is gone."""
    path = tmp_path / "t-0"
    with Log.open(path) as w, Log.open(path, read_only=True) as r:
        w.append([b"a"])
        w.append([b"x1"], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True)
        assert [x.value for x in r.read(0, isolation="committed").records()] == [b"a"]
        size = w.active_segment.size_bytes
        w.truncate_to(1)
        w.append([b"y1"])
        assert w.active_segment.size_bytes == size
        assert [x.value for x in r.read(1, isolation="committed").records()] == [b"y1"]


def test_read_only_committed_reads_follow_an_open_then_aborted_transaction(tmp_path):
    path = tmp_path / "t-0"
    with Log.open(path) as w, Log.open(path, read_only=True) as r:
        w.append([b"plain"])
        assert [x.value for x in r.read(0, isolation="committed").records()] == [b"plain"]
        w.append([b"open"], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
        w.append([b"after"])
        assert r.read(1, isolation="committed").records() == []
        assert r.last_stable_offset == 1
        w.append_txn_marker(5, 0, commit=False)
        w.append([b"later"])
        assert [x.value for x in r.records(1, isolation="committed")] == [b"after", b"later"]
        with Log.open(path, read_only=True) as fresh:
            assert ([x.value for x in fresh.records(isolation="committed")] ==
                    [x.value for x in r.records(isolation="committed")])


def test_committed_reads_replay_only_the_new_batches(tmp_path, monkeypatch):
    """A poll costs O(new bytes) of producer-state replay, not a replay of the log."""
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=2000) as w, Log.open(path, read_only=True) as r:
        for i in range(50):
            w.append([b"v%d" % i])
        r.read(0, isolation="committed")
        replayed = []
        original = LocalLog.batches_between

        def counting(self, start, end):
            for b in original(self, start, end):
                replayed.append(b.base_offset)
                yield b
        monkeypatch.setattr(LocalLog, "batches_between", counting)
        w.append([b"new"])
        assert [x.value for x in r.read(50, isolation="committed").records()] == [b"new"]
        assert replayed == [50]


def test_reader_behind_a_new_log_start_gets_offset_out_of_range(tmp_path):
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=300, file_delete_delay_ms=0) as w, Log.open(path, read_only=True) as r:
        for i in range(20):
            w.append([b"v%d" % i])
        assert r.read(0).records()[0].offset == 0
        w.delete_records(15)
        with pytest.raises(OffsetOutOfRangeError):
            r.read(1)
        assert r.log_start_offset == 15
        assert [x.offset for x in r.records(15)] == list(range(15, 20))


def test_consume_follow_prints_every_record_once_while_the_writer_rolls(tmp_path):
    n = 300
    with LogManager(tmp_path, segment_bytes=1024) as manager:
        log = manager.create_topic("t", 1).log(0)
        log.append([b"r0"])
        proc = subprocess.Popen([sys.executable, "-m", "pylog", "consume", str(tmp_path), "--topic", "t",
                                 "--from-beginning", "--follow"], stdout=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": os.getcwd()})
        pending = _line_queue(proc.stdout)
        deadline = time.monotonic() + WAIT_S
        try:
            lines = [_next_line(pending, deadline, "consume printed nothing")]  # reading before the writer goes on
            for i in range(1, n, 3):
                log.append([b"r%d" % j for j in range(i, min(i + 3, n))])
            assert len(log.segments) > 5
            while len(lines) < n and lines[-1] is not None:
                lines.append(_next_line(pending, deadline, f"consume printed {len(lines)} of {n} records"))
        finally:
            proc.kill()
            proc.wait()
    assert lines == ["r%d" % i for i in range(n)]


def test_consume_follow_goes_on_from_the_log_start_when_retention_passed_it(tmp_path):
    with LogManager(tmp_path, segment_bytes=300, file_delete_delay_ms=0) as manager:
        log = manager.create_topic("t", 1).log(0)
        for i in range(20):
            log.append([b"r%d" % i])
        log.delete_records(12)
        proc = subprocess.Popen([sys.executable, "-m", "pylog", "consume", str(tmp_path), "--topic", "t",
                                 "--offset", "3", "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": os.getcwd()})
        pending = _line_queue(proc.stdout)
        deadline = time.monotonic() + WAIT_S
        try:
            lines = [_next_line(pending, deadline, "consume printed nothing") for _ in range(8)]
        finally:
            proc.kill()
            proc.wait()
    assert lines == ["r%d" % i for i in range(12, 20)]
    assert b"offset 3 is no longer in the log; going on from 12" in proc.stderr.read()


def test_reader_bounded_by_the_high_watermark_never_sees_what_truncation_removes(tmp_path):
    """As a Kafka follower does, the writer truncates only above its high watermark;
    a reader bounded by the checkpointed high watermark never saw those records."""
    path = tmp_path / "t-0"
    with Log.open(path, auto_high_watermark=False) as w, \
            Log.open(path, read_only=True, auto_high_watermark=False) as r:
        w.append([b"a", b"b"])
        w.high_watermark = 2
        w.append([b"doomed"])
        assert [x.value for x in r.records(isolation="high_watermark")] == [b"a", b"b"]
        w.truncate_to(2)
        w.append([b"c"])
        assert r.read(2, isolation="high_watermark").records() == []
        w.high_watermark = 3
        assert [x.value for x in r.read(2, isolation="high_watermark").records()] == [b"c"]


def _read_on(log: Log, offset: int, *, by_records: bool):
    """One read from ``offset``: (where it starts, its bytes, its values) and the next offset,
    as a consumer finds it (after the last record iterated) or from ``next_offset``."""
    f = log.read(offset, 1000)
    values = [x.value for records in f.record_lists() for x in records]
    return (f.first_offset, f.position, f.size_bytes, values), (offset + len(values) if by_records else f.next_offset)


@pytest.mark.parametrize("by_records", [False, True], ids=["next_offset", "after_the_records"])
def test_a_read_only_reader_reading_on_where_its_last_fetch_ended_looks_up_no_index(tmp_path, monkeypatch,
                                                                                     by_records):
    """A sequential reader's next read starts at the batch after its last fetch's bytes:
    the same fetches as a lookup of each offset, without the lookups."""
    path = tmp_path / "t-0"
    with Log.open(path, segment_bytes=1 << 20) as w:
        for i in range(40):
            w.append([b"%d-%d" % (i, j) * (1 + i % 7) for j in range(20)])
    with Log.open(path, read_only=True) as fresh:
        expected, offset = [], 0
        while offset < fresh.log_end_offset:
            expected.append(fresh.read(offset, 1000))
            offset = expected[-1].next_offset
        expected = [(f.first_offset, f.position, f.size_bytes, [x.value for x in f.records()]) for f in expected]
    lookups = []
    translate = Segment.translate_offset
    monkeypatch.setattr(Segment, "translate_offset", lambda seg, *a: lookups.append(a) or translate(seg, *a))
    with Log.open(path, read_only=True) as r:
        seen, offset = [], 0
        while offset < r.log_end_offset:
            fetch, offset = _read_on(r, offset, by_records=by_records)
            seen.append(fetch)
    assert seen == expected and len(seen) > 10
    assert len(lookups) == 1  # the first read's


def _batch_of_bytes(scratch, size: int) -> list[bytes]:
    """Five values whose batch takes exactly ``size`` bytes (measured in a scratch log)."""
    for pad in range(size):
        values = [b"v%d" % i + b"p" * (pad if i == 0 else 0) for i in range(5)]
        with Log.open(scratch / f"pad{pad}-0") as log:
            log.append(values)
            if log.active_segment.size_bytes == size:
                return values
    raise AssertionError(f"no batch of five values takes {size} bytes")


@pytest.mark.parametrize("own_log", [False, True], ids=["read_only", "writers_log"])
def test_a_reader_reading_on_from_its_last_fetch_after_a_truncation_gets_the_batches_written_since(tmp_path,
                                                                                                 own_log):
    """The writer cut the log below where the reader's last fetch ended and wrote batches
    holding more offsets in the same bytes: a batch begins there again, but a later one.
    The next read finds the batch holding its offset anew."""
    path = tmp_path / "t-0"
    with Log.open(path) as w, contextlib.nullcontext(w) if own_log else Log.open(path, read_only=True) as r:
        for value in (b"a", b"b", b"c"):
            w.append([value])
        two_batches = 2 * w.active_segment.size_bytes // 3
        first = r.read(0, max_bytes=two_batches + 10)
        assert first.next_offset == 2  # its bytes end where offset 2's batch began
        w.truncate_to(0)
        five = _batch_of_bytes(tmp_path, two_batches)
        w.append(five)  # offsets 0-4 in the bytes offsets 0 and 1 took
        w.append([b"after"])  # offset 5, where offset 2 began
        assert [x.value for x in r.read(2).records()] == five[2:] + [b"after"]
