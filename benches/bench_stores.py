"""pylog beside the embedded stores a Python user would pick instead, in one run over the
same records: a plain file (the limit of a write), SQLite in WAL mode, LMDB (``lmdb``) and
RocksDB (``rocksdict``); for reads also ``Consumer.poll`` and the columnar reads
(``Log.read_arrow``, ``Consumer.poll_columns``).

Each store takes N records (a 16-byte key, a 100-byte value; N = 1,000,000, or 100,000
with ``PYLOG_BENCH_SMALL=1``) in batches of 1,000 with one fsync at the end, then reads
them back in order, each reader taking the key and the value of every record. Every
figure is the best of two rounds (``PYLOG_BENCH_ROUNDS`` to change), the stores of a round
measured one after another.

Run: ``PYTHONPATH=. python benches/bench_stores.py`` (prints the table and the ratios),
or ``pytest benches/bench_stores.py --benchmark-only`` (ratios in the session's table).
LMDB and RocksDB come with the ``bench`` extra; a store whose library is missing is left
out, with its ratios.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pylog import Consumer, Log, LogManager, TopicPartition, encode_batch  # noqa: E402

RECORDS = 100_000 if os.environ.get("PYLOG_BENCH_SMALL") == "1" else 1_000_000
BATCH = 1000
VALUE_BYTES = 100
ROUNDS = int(os.environ.get("PYLOG_BENCH_ROUNDS", "2"))
TOPIC = "stores"

#: (name of the ratio, numerator row, denominator row, goal)
RATIOS = (
    ("Log.records() vs LMDB cursor", "pylog records", "lmdb", 1.0),
    ("Log.records() vs RocksDB iterator", "pylog records", "rocksdb", 1.0),
    ("Log.records() vs SQLite select", "pylog records", "sqlite", None),
    ("Consumer.poll vs Log.records()", "Consumer.poll", "pylog records", 0.9),
    ("Consumer.poll (max_poll_records 500) vs Log.records()", "Consumer.poll, defaults", "pylog records", 0.9),
    ("Log.read_arrow vs Log.records()", "Log.read_arrow", "pylog records", 3.0),
    ("Consumer.poll_columns vs Log.records()", "Consumer.poll_columns", "pylog records", 3.0),
)
#: (name of the ratio, pylog's write row, the other row, goal): writes
WRITE_RATIOS = (
    ("Log.append vs plain buffered write + fsync (limit)", "pylog", "plain file", 0.75),
    ("Log.append vs LMDB putmulti", "pylog", "lmdb", None),
    ("Log.append vs RocksDB WriteBatch", "pylog", "rocksdb", None),
    ("Log.append vs SQLite executemany", "pylog", "sqlite", None),
)


def batches():
    """The records, ``BATCH`` (key, value) pairs a list; keys sort in record order."""
    pool = os.urandom(VALUE_BYTES * BATCH)
    values = [pool[i * VALUE_BYTES:(i + 1) * VALUE_BYTES] for i in range(BATCH)]
    for b in range(RECORDS // BATCH):
        yield [(b"%016d" % (b * BATCH + i), values[i]) for i in range(BATCH)]


def timed(fn) -> tuple[float, float]:
    """Wall and CPU (of the process: every thread) seconds of ``fn()``."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


# -- writes: each returns its (wall, CPU) seconds, fsync included ------------------------
def write_plain(path: Path, data) -> tuple[float, float]:
    raw = encode_batch(data[0])  # pylog's bytes of one batch, of the size of every other

    def run():
        with open(path, "wb") as f:
            for _ in data:
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
    return timed(run)


def write_pylog(path: Path, data) -> tuple[float, float]:
    with LogManager(path) as m:
        log = m.create_topic(TOPIC, 1).log(0)

        def run():
            for b in data:
                log.append(b)
            log.flush()
        return timed(run)


def write_sqlite(path: Path, data) -> tuple[float, float]:
    db = sqlite3.connect(path)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=normal")
    db.execute("create table t (id integer primary key, k blob, v blob)")

    def run():
        for b in data:
            with db:
                db.executemany("insert into t (k, v) values (?, ?)", b)
        db.execute("pragma wal_checkpoint(full)")  # the one sync of the run
    seconds = timed(run)
    db.close()
    return seconds


def write_lmdb(path: Path, data) -> tuple[float, float]:
    import lmdb
    env = lmdb.open(str(path), map_size=4 << 30, sync=False, metasync=False)

    def run():
        for b in data:
            with env.begin(write=True) as txn:
                txn.cursor().putmulti(b, append=True)
        env.sync(True)
    seconds = timed(run)
    env.close()
    return seconds


def write_rocksdb(path: Path, data) -> tuple[float, float]:
    from rocksdict import Rdict, WriteBatch
    db = Rdict(str(path))

    def run():
        for b in data:
            wb = WriteBatch()
            for k, v in b:
                wb.put(k, v)
            db.write(wb)  # with its write-ahead log, as pylog's and SQLite's writes
        db.flush(True)
        db.flush_wal(True)
    seconds = timed(run)
    db.close()
    return seconds


# -- reads: each returns (records, (wall, CPU) seconds) ----------------------------------
def read_pylog(path: Path):
    with Log.open(path / f"{TOPIC}-0", read_only=True) as log:
        def run():
            n = 0
            for r in log.records():
                r.key
                r.value
                n += 1
            return n
        return _counted(run)


def read_poll(path: Path, **settings):
    """``poll`` in the loop a user writes: 100,000 records at most a poll (a 1 MiB fetch,
    about 7,900 records, each time), or with ``settings``."""
    with Consumer(path, auto_offset_reset="earliest", **{"max_poll_records": 100_000, **settings}) as c:
        c.assign([TopicPartition(TOPIC, 0)])

        def run():
            n = 0
            while n < RECORDS:
                for records in c.poll(1000).values():
                    for r in records:
                        r.key
                        r.value
                        n += 1
            return n
        return _counted(run)


def read_poll_columns(path: Path):
    with Consumer(path, auto_offset_reset="earliest", max_poll_records=100_000) as c:
        c.assign([TopicPartition(TOPIC, 0)])

        def run():
            n = 0
            while n < RECORDS:
                for cols in c.poll_columns(1000).values():
                    cols.keys, cols.values  # noqa: B018
                    n += cols.num_rows
            return n
        return _counted(run)


def read_arrow(path: Path):
    with Log.open(path / f"{TOPIC}-0", read_only=True) as log:
        def run():
            table = log.read_arrow()
            table.column("key"), table.column("value")  # noqa: B018
            return table.num_rows
        return _counted(run)


def read_sqlite(path: Path):
    db = sqlite3.connect(path)

    def run():
        n = 0
        for k, v in db.execute("select k, v from t order by id"):
            n += 1
        return n
    out = _counted(run)
    db.close()
    return out


def read_lmdb(path: Path):
    import lmdb
    env = lmdb.open(str(path), readonly=True, lock=False)

    def run():
        n = 0
        with env.begin() as txn:
            for k, v in txn.cursor():
                n += 1
        return n
    out = _counted(run)
    env.close()
    return out


def read_rocksdb(path: Path):
    from rocksdict import AccessType, Rdict
    db = Rdict(str(path), access_type=AccessType.read_only())

    def run():
        n = 0
        for k, v in db.items():
            n += 1
        return n
    out = _counted(run)
    db.close()
    return out


def _counted(run):
    n = []
    seconds = timed(lambda: n.append(run()))
    return n[0], seconds


STORES = {  # name: (write, read, file or directory, needs)
    "plain file": (write_plain, None, "file", None),
    "pylog": (write_pylog, None, "dir", None),
    "sqlite": (write_sqlite, read_sqlite, "file", None),
    "lmdb": (write_lmdb, read_lmdb, "dir", "lmdb"),
    "rocksdb": (write_rocksdb, read_rocksdb, "dir", "rocksdict"),
}
PYLOG_READS = {"pylog records": read_pylog, "Consumer.poll": read_poll,
               "Consumer.poll, defaults": lambda path: read_poll(path, max_poll_records=500),
               "Log.read_arrow": read_arrow, "Consumer.poll_columns": read_poll_columns}


def available(module: str | None) -> bool:
    if module is None:
        return True
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def run(root: Path, rounds: int = ROUNDS) -> tuple[dict, dict]:
    """Best write and read rates, records/s by the wall clock and by CPU time, of every
    available store over ``rounds`` rounds: ``{store: (wall, cpu)}`` for writes and reads."""
    data = list(batches())
    writes: dict[str, list] = {}
    reads: dict[str, list] = {}
    for r in range(rounds):
        for name, (write, read, kind, needs) in STORES.items():
            if not available(needs):
                continue
            path = root / f"{name.replace(' ', '-')}-{r}"
            if kind == "dir" and name != "pylog":
                path.mkdir()
            _best(writes, name, write(path, data))
            readers = {name: read} if read else {}
            if name == "pylog":
                readers = PYLOG_READS
            for rname, reader in readers.items():
                if rname == "Log.read_arrow" and not available("pyarrow"):
                    continue
                n, seconds = reader(path)
                if n != RECORDS:
                    raise AssertionError(f"{rname} read {n} records, not {RECORDS}")
                _best(reads, rname, seconds)
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    return writes, reads


def _best(rates: dict, name: str, seconds: tuple[float, float]) -> None:
    """Keep the best records/s of ``name``, by each clock."""
    old = rates.get(name, (0.0, 0.0))
    rates[name] = tuple(max(o, RECORDS / max(s, 1e-9)) for o, s in zip(old, seconds))


def ratios(writes: dict, reads: dict, clock: int = 0) -> list[tuple[str, float, float | None]]:
    """(name, ratio, goal) of every ratio whose two rows were measured, by ``clock``."""
    out = []
    for rates, wanted in ((writes, WRITE_RATIOS), (reads, RATIOS)):
        for name, a, b, goal in wanted:
            if a in rates and b in rates:
                out.append((name, rates[a][clock] / rates[b][clock], goal))
    return out


def table(writes: dict, reads: dict) -> str:
    """The markdown table of docs/PERFORMANCE.md: M records/s, wall clock (CPU time)."""
    lines = ["| store | write (M records/s) | read in order (M records/s) |", "|---|---|---|"]
    for name in [*STORES, *PYLOG_READS]:
        if name == "pylog records":
            continue
        w, rd = writes.get(name), reads.get("pylog records" if name == "pylog" else name)
        if w is None and rd is None:
            continue
        lines.append(f"| {LABELS.get(name, name)} | {_rate(w)} | {_rate(rd)} |")
    return "\n".join(lines)


def _rate(rate) -> str:
    return "—" if rate is None else f"{rate[0] / 1e6:.2f} ({rate[1] / 1e6:.2f})"


LABELS = {"plain file": "plain file write (the limit)", "pylog": "pylog `Log.append` / `Log.records()`",
          "sqlite": "SQLite, WAL, `executemany` per 1,000 / `select ... order by id`",
          "lmdb": "LMDB (py-lmdb) `putmulti(append=True)` / cursor",
          "rocksdb": "RocksDB (rocksdict) `WriteBatch` / `items()`",
          "Consumer.poll": "pylog `Consumer.poll` (max_poll_records 100,000)",
          "Consumer.poll, defaults": "pylog `Consumer.poll` (default max_poll_records 500)",
          "Log.read_arrow": "pylog `Log.read_arrow`",
          "Consumer.poll_columns": "pylog `Consumer.poll_columns`"}


def report(writes: dict, reads: dict) -> str:
    """The table, then every ratio by the wall clock and by CPU time (on a busy machine the
    CPU times are the steadier: the other processes' share of the cores is not counted)."""
    lines = [f"{RECORDS:,} records of {VALUE_BYTES} B (16 B keys), batches of {BATCH}, best of {ROUNDS} rounds, "
             f"load average {os.getloadavg()[0]:.1f} at the end; M records/s by the wall clock (by CPU time)",
             "", table(writes, reads), "", f"{'ratio':<56} {'wall':>7}  {'CPU':>7}"]
    for (name, wall, goal), (_, cpu, _) in zip(ratios(writes, reads, 0), ratios(writes, reads, 1)):
        verdict = "" if goal is None else f"goal >= {goal}: " + ("met" if wall >= goal else "MISSED") + \
            " by wall, " + ("met" if cpu >= goal else "MISSED") + " by CPU"
        lines.append(f"{name:<56} {wall:6.2f}x  {cpu:6.2f}x  {verdict}")
    return "\n".join(lines)


def test_stores(benchmark, tmp_path):
    from benches.conftest import record_figure, record_ratio
    writes, reads = benchmark.pedantic(run, args=(tmp_path,), rounds=1)
    for name in [*STORES, *PYLOG_READS]:
        write, read = writes.get(name), reads.get("pylog records" if name == "pylog" else name)
        if name != "pylog records" and (write or read):
            record_figure(f"stores {name}", **({"write_records_per_s": round(write[0])} if write else {}),
                          **({"read_records_per_s": round(read[0])} if read else {}))
    for name, ratio, goal in ratios(writes, reads):
        record_ratio(name, ratio, goal)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        print(report(*run(Path(d))))
