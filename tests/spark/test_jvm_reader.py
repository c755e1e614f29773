"""What the JVM reader adds to ``format("pylog")``: choosing it, building its jar, and the
reading rules it must share with the Python source (corrupt bytes, pruned columns)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pylog import Log, LogManager, Record
from tests.spark.conftest import read_with

pytestmark = pytest.mark.spark

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gappy(tmp_path_factory):
    """One partition of 40 batches of 25 records; reads below start and end inside batches."""
    root = tmp_path_factory.mktemp("jvm-root")
    with LogManager(root, segment_bytes=30_000) as m:
        log = m.create_topic("g", 1).log(0)
        for b in range(40):
            log.append([Record(b"v%d" % (25 * b + i), key=None if i % 3 else b"k", timestamp=5_000 + b,
                               headers=[("h", b"%d" % i)] if i % 2 else []) for i in range(25)])
    return root


def test_count_and_pruned_columns_agree_with_full_rows_inside_batches(spark, reader, gappy):
    import json
    df = (read_with(spark, reader).option("includeHeaders", "true")
          .option("startingOffsets", json.dumps({"g": {"0": 37}}))
          .option("endingOffsets", json.dumps({"g": {"0": 912}})).load(str(gappy)))
    rows = df.collect()
    assert [r.offset for r in sorted(rows, key=lambda r: r.offset)] == list(range(37, 912))
    assert all(r.value == b"v%d" % r.offset for r in rows)
    assert all((r.key is None) == bool(r.offset % 25 % 3) for r in rows)
    assert all(r.headers == ([("h", b"%d" % (r.offset % 25))] if r.offset % 25 % 2 else []) for r in rows)
    assert df.count() == 875
    assert df.where("offset >= 100 and offset < 130").count() == 30
    assert df.selectExpr("sum(length(value))").first()[0] == sum(len(b"v%d" % o) for o in range(37, 912))


def _ten_batches(root: Path) -> tuple[Path, bytearray, list[int]]:
    """A partition ``c-0`` of 10 batches of 10 records: its segment, its bytes, the batches' positions."""
    log_dir = root / "c-0"
    with Log.open(log_dir) as log:
        for b in range(10):
            log.append([b"x%d-%d" % (b, i) for i in range(10)])
    seg = sorted(log_dir.glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    positions = [0]
    for _ in range(9):
        positions.append(positions[-1] + 12 + int.from_bytes(data[positions[-1] + 8:positions[-1] + 12], "big"))
    return seg, data, positions


def _corrupt_middle_batch(root: Path) -> tuple[Path, int]:
    """Flips a byte inside the 6th batch's records; returns the file and the batch's position."""
    seg, data, positions = _ten_batches(root)
    data[positions[5] + 70] ^= 0xFF
    seg.write_bytes(bytes(data))
    return seg, positions[5]


def test_a_corrupt_batch_fails_the_query_naming_file_and_position(spark, reader, tmp_path):
    seg, pos = _corrupt_middle_batch(tmp_path)
    with pytest.raises(Exception) as e:
        read_with(spark, reader).load(str(tmp_path)).count()
    assert seg.name in str(e.value) and str(pos) in str(e.value)


def test_offsets_going_backwards_fail_the_query_naming_file_and_position(spark, reader, tmp_path):
    """The 6th batch's base offset (outside its CRC) rewritten to 20, below the 5th batch's
    offsets: not a log either reader may return rows from, whatever the columns asked."""
    seg, data, positions = _ten_batches(tmp_path)
    data[positions[5]:positions[5] + 8] = (20).to_bytes(8, "big")
    seg.write_bytes(bytes(data))
    for query in (lambda df: df.count(), lambda df: df.select("value").collect()):
        with pytest.raises(Exception) as e:
            query(read_with(spark, reader).load(str(tmp_path)))
        assert seg.name in str(e.value) and f"position {positions[5]}" in str(e.value)
        assert "offsets 20..29, expected after 49" in str(e.value)


def test_reader_jvm_without_the_jar_is_a_clear_error():
    from pylog.errors import InvalidConfigError
    pytest.importorskip("pyspark")
    from pylog.spark.source import PylogDataSource
    with pytest.raises(InvalidConfigError, match="reader=jvm needs pylog's jar"):
        PylogDataSource({"path": "/nowhere", "reader": "jvm"}).reader(None)
    with pytest.raises(InvalidConfigError, match="option reader"):
        PylogDataSource({"path": "/nowhere", "reader": "scala"}).reader(None)


def test_without_a_jdk_there_is_no_jar_and_one_notice(tmp_path):
    """A fresh process with no javac on PATH, no JAVA_HOME and no jar from the install:
    jar_path() is None, said once."""
    pytest.importorskip("pyspark")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=os.path.dirname(sys.executable), PYTHONPATH=str(CHECKOUT), PYLOG_CACHE_DIR=str(tmp_path))
    code = "import pylog.spark as s, pylog.spark.jvm as j; j.PACKAGED = j.PACKAGED / 'none'; print(s.jar_path(), s.jar_path())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["None", "None"]
    assert done.stderr.count("no JDK (javac) found") == 1
    assert not list(tmp_path.iterdir())


def test_the_jar_is_cached_by_source_hash_and_spark_version(tmp_path):
    pytest.importorskip("pyspark")
    from pylog.spark import jvm
    if jvm._javac() is None:
        pytest.skip("no JDK (javac)")
    assert jvm.jar_name("4.0.0") != jvm.jar_name("4.0.1")
    import zipfile
    with zipfile.ZipFile(jvm.jar_path()) as z:
        assert z.read(jvm.SERVICE).decode().strip() == jvm.PROVIDER
        assert "pylog/spark/RangeReader.class" in z.namelist()


def test_an_install_compiles_the_jar_into_the_package_and_jar_path_prefers_it(tmp_path, monkeypatch):
    """build_packaged (what setup.py runs) against the Spark jars named by $PYLOG_SPARK_JARS;
    jar_path() then returns that jar without building one in the cache, and ignores a
    packaged jar of other sources or another Spark version."""
    pytest.importorskip("pyspark")
    from pylog.spark import jvm
    if jvm._javac() is None:
        pytest.skip("no JDK (javac)")
    version, jars = jvm._spark()
    monkeypatch.setenv("PYLOG_SPARK_JARS", str(jars))
    monkeypatch.setenv("PYLOG_CACHE_DIR", str(tmp_path / "cache"))
    assert jvm.spark_at_install() == (version, jars)
    package = tmp_path / "site-packages" / "pylog" / "spark" / "jvm"
    (package / "jars").mkdir(parents=True)
    stale = package / "jars" / "pylog-spark-0.0.1-0123456789abcdef.jar"
    stale.write_bytes(b"from another install")
    jar = jvm.build_packaged(package)
    assert jar == package / "jars" / jvm.jar_name(version) and not stale.exists()
    monkeypatch.setattr(jvm, "PACKAGED", package / "jars")
    assert jvm.jar_path(build=False) == str(jar)
    jar.rename(package / "jars" / jvm.jar_name("0.0.1"))
    assert jvm.jar_path(build=False) is None  # not this Spark's: the cache would build one
    assert not (tmp_path / "cache").exists()


def test_an_install_without_a_jdk_says_so_in_one_line_and_packages_no_jar(tmp_path):
    """What setup.py prints when it cannot compile: one line, and the install goes on."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=os.path.dirname(sys.executable), PYTHONPATH=str(CHECKOUT))
    code = "import sys, pathlib, pylog.spark.jvm as j; print(j.build_packaged(pathlib.Path(sys.argv[1])))"
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["None"]
    assert [line for line in done.stderr.splitlines() if line.startswith("pylog:")] == [
        "pylog: no JDK (javac) found, so no Spark jar in the package; it is built on first use (docs/spark.md)"]
    assert not list(tmp_path.iterdir())


# ---- a compaction's swap, caught mid-way ---------------------------------------------------------
# Kafka's cleaner (and pylog's) writes a cleaned segment as "<base>.log.cleaned", renames it
# "<base>.log.swap", renames the segments it replaces "*.deleted", then drops the ".swap".
# A reader that lists the directory in between must read the ".swap" in their place.

SWAP_KINDS = (".log", ".index", ".timeindex", ".txnindex")


def _four_segments(root: Path) -> tuple[Path, list[int]]:
    """``s-0``: four segments; the second holds an aborted transaction. Returns the partition
    directory and the segments' base offsets."""
    part = root / "s-0"
    with Log.open(part) as log:
        log.append([b"a%d" % i for i in range(5)])
        log.roll()
        log.append([b"aborted-%d" % i for i in range(3)], producer_id=7, producer_epoch=0, base_sequence=0,
                   is_transactional=True)
        log.append([b"b%d" % i for i in range(4)])
        log.append_txn_marker(7, 0, commit=False)
        log.roll()
        log.append([b"c%d" % i for i in range(6)])
        log.roll()
        log.append([b"d%d" % i for i in range(2)])
        bases = [s.base_offset for s in log.segments]
    return part, bases


def _name(base: int, kind: str) -> str:
    return f"{base:020d}{kind}"


def _swap_in(part: Path, replaced: list[int], *, old_renamed: bool) -> None:
    """The cleaned replacement of the segments ``replaced`` (their files put end to end: a
    cleaning that kept every record; a merged one has no offset or time index, which a
    reader must do without) as ``.swap`` files, the replaced ones still there or already
    renamed ``.deleted``."""
    for kind in SWAP_KINDS:
        parts = [p for p in (part / _name(b, kind) for b in replaced) if p.exists()]
        if parts and (kind in (".log", ".txnindex") or len(replaced) == 1):  # fixed-size entries join up
            (part / (_name(replaced[0], kind) + ".swap")).write_bytes(b"".join(p.read_bytes() for p in parts))
        if old_renamed:
            for p in parts:
                p.rename(str(p) + ".deleted")


@pytest.mark.parametrize("replaced", [[1], [1, 2]], ids=["one-segment", "two-merged"])
@pytest.mark.parametrize("old_renamed", [False, True], ids=["old-still-there", "old-renamed-deleted"])
def test_a_log_caught_mid_swap_is_read_whole_once_by_both_readers(spark, reader, tmp_path, replaced, old_renamed):
    part, bases = _four_segments(tmp_path)
    with Log.open(part, read_only=True) as log:
        everything = [(r.offset, r.value) for r in log.records()]
    _swap_in(part, [bases[i] for i in replaced], old_renamed=old_renamed)
    uncommitted = read_with(spark, reader).load(str(tmp_path)).select("offset", "value").collect()
    assert sorted((r.offset, bytes(r.value)) for r in uncommitted) == everything
    committed = (read_with(spark, reader).option("isolationLevel", "read_committed").load(str(tmp_path))
                 .select("offset", "value").collect())
    assert sorted((r.offset, bytes(r.value)) for r in committed) == [
        (o, v) for o, v in everything if not v.startswith(b"aborted")]
    assert read_with(spark, reader).load(str(tmp_path)).count() == len(everything)


def test_a_swap_at_or_above_a_cleaned_file_is_an_interrupted_split_both_readers_ignore(spark, reader, tmp_path):
    """A split stopped before its renames: its first part (here the segment's first batch) as
    a ``.swap``, another still ``.cleaned``; the segment it splits is still whole."""
    part, bases = _four_segments(tmp_path)
    with Log.open(part, read_only=True) as log:
        everything = [(r.offset, r.value) for r in log.records()]
    data = (part / _name(bases[1], ".log")).read_bytes()
    first_batch = data[:12 + int.from_bytes(data[8:12], "big")]
    (part / (_name(bases[1], ".log") + ".swap")).write_bytes(first_batch)
    (part / (_name(bases[1], ".log") + ".cleaned")).write_bytes(b"")
    rows = read_with(spark, reader).load(str(tmp_path)).select("offset", "value").collect()
    assert sorted((r.offset, bytes(r.value)) for r in rows) == everything


def test_reads_while_the_log_compacts_return_every_key_s_latest_record_once(spark, reader, tmp_path, soak):
    """A writer appends keyed records and compacts (segments merged, renamed ``.swap``,
    ``.deleted``) while queries read: each query, whatever renames it met, returns no offset
    twice and every key's latest record of before it started that nothing superseded since
    (compaction never removes a key's latest record). The writer compacts several
    times a second, so each query (a Spark job, most of a second) meets renames: a dozen
    queries by default, 1000 with ``--soak``; the mid-swap states one by one are the
    deterministic tests above."""
    root = tmp_path / "root"
    config = dict(segment_bytes=4000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                  file_delete_delay_ms=0, min_compaction_lag_ms=0)
    with LogManager(root) as m:
        m.create_topic("k", 1, config)
    latest, lock, stop, failures = {}, threading.Lock(), threading.Event(), []

    def writer():
        try:
            with Log.open(root / "k-0", config) as log:
                for n in range(10**9):
                    if stop.is_set():
                        return
                    records = [Record(b"v%d" % i, key=b"key%d" % (i * 7 % 50)) for i in range(5 * n, 5 * n + 5)]
                    info = log.append(records)
                    with lock:
                        latest.update((r.key, info.first_offset + i) for i, r in enumerate(records))
                    if n % 40 == 39:
                        log.compact()
        except Exception as e:  # reported by the test, not lost in the thread
            failures.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(1000 if soak else 12):
            with lock:
                before = dict(latest)
            rows = read_with(spark, reader).load(str(root)).select("offset", "key").collect()
            with lock:
                after = dict(latest)
            offsets = [r.offset for r in rows]
            assert len(offsets) == len(set(offsets))
            read = set(offsets)
            assert [(k, o) for k, o in before.items() if after[k] == o and o not in read] == []
    finally:
        stop.set()
        thread.join()
    assert failures == []


def test_offsets_removed_by_retention_fail_the_query_unless_fail_on_data_loss_is_false(spark, reader, tmp_path):
    import json
    with LogManager(tmp_path, segment_bytes=300) as m:
        log = m.create_topic("t", 1).log(0)
        for i in range(40):
            log.append([b"v%d" % i])
        assert log.delete_records(20) == 20

    def read(fail_on_data_loss):
        return sorted(r.offset for r in read_with(spark, reader).option("failOnDataLoss", fail_on_data_loss)
                      .option("startingOffsets", json.dumps({"t": {"0": 5}})).load(str(tmp_path))
                      .select("offset").collect())
    with pytest.raises(Exception, match="t-0: offset 5 is missing: deleted by retention or delete_records \\(the log "
                                        "now starts at 20\\).*failOnDataLoss=false"):
        read("true")
    assert read("false") == list(range(20, 40))
