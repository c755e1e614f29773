"""``Log.read_arrow`` and ``Log.to_pandas``: the columnar decode as Arrow and pandas, the same
records as ``Log.records()``; without pyarrow a clear :class:`MissingDependencyError`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pylog import Log, Record

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (extra 'arrow')")

TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1, "NoTimestampType": -1}


def _rows(records) -> list[tuple]:
    return [(r.key, r.value, r.topic, r.partition, r.offset, r.timestamp, TIMESTAMP_TYPES[r.timestamp_type],
             list(r.headers)) for r in records]


def _table_rows(table) -> list[tuple]:
    d = table.to_pydict()
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()  # microseconds
    headers = d.get("headers") or [[]] * table.num_rows
    return [(d["key"][i], d["value"][i], d["topic"][i], d["partition"][i], d["offset"][i], stamps[i] // 1000,
             d["timestampType"][i], [(h["key"], h["value"]) for h in headers[i]]) for i in range(table.num_rows)]


@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "events-2", segment_bytes=1000) as log:
        for i in range(40):
            log.append([Record(b"v%d" % i, key=None if i % 3 else b"k%d" % i, timestamp=1000 + i,
                               headers=(("h", b"x"), ("n", None)) if i % 5 == 0 else ()),
                        Record(None, key=b"tomb")], compression="gzip" if i % 2 else "none")
        yield log


def test_read_arrow_holds_what_records_holds_across_segments(log):
    assert len(log.segments) > 3
    table = log.read_arrow(include_headers=True)
    assert table.num_rows == 80
    assert _table_rows(table) == _rows(log.records())
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")


def test_read_arrow_bounds_and_small_fetches(log):
    table = log.read_arrow(7, 61, max_bytes=100)
    assert table.column("offset").to_pylist() == list(range(7, 61))
    assert _table_rows(table) == [row[:-1] + ([],) for row in _rows(log.records(7, 61))]
    assert "headers" not in table.column_names
    assert log.read_arrow(80).num_rows == 0


def test_committed_read_arrow_leaves_aborted_transactions_out(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"a"])
        log.append([b"gone1", b"gone2"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(7, 0, commit=False)
        log.append([b"kept"], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append_txn_marker(8, 0, commit=True)
        log.append([b"open"], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
        committed = log.read_arrow(isolation="committed")
        assert committed.column("value").to_pylist() == [r.value for r in log.records(isolation="committed")]
        assert committed.column("value").to_pylist() == [b"a", b"kept"]
        assert log.read_arrow().column("value").to_pylist() == [b"a", b"gone1", b"gone2", b"kept", b"open"]


def test_to_pandas_has_a_row_per_record(log):
    pd = pytest.importorskip("pandas", reason="pandas is not installed (extra 'arrow')")
    df = log.to_pandas(0, 10)
    assert isinstance(df, pd.DataFrame)
    assert list(df["offset"]) == list(range(10))
    assert list(df["value"]) == [r.value for r in log.records(0, 10)]
    assert str(df["timestamp"].dt.tz) == "UTC" and df["timestamp"].iloc[0].value // 10**6 == 1000


def test_without_pyarrow_the_error_names_the_package_and_the_extra(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.modules["pyarrow"] = None   # an import of pyarrow now fails, as when it is not installed
        from pylog import Log, MissingDependencyError, PylogError
        with Log.open({str(tmp_path / "t-0")!r}) as log:
            log.append([b"x"])
            try:
                log.read_arrow()
            except MissingDependencyError as e:
                assert isinstance(e, PylogError) and isinstance(e, ImportError)
                print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Log.read_arrow needs the optional package 'pyarrow': pip install 'pylog-kafka[arrow]'"
