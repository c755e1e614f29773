"""``Log.list_offset(spec, isolation=...)``: Kafka's ListOffsets (``Partition.fetchOffsetForTimestamp``).
"latest" is the log end without an isolation level, the high watermark for uncommitted reads
and the last stable offset for committed ones; a record found by time at or past that bound
is not readable yet, so there is none."""

from __future__ import annotations

import pytest

import pylog
from pylog import Log
from pylog.errors import InvalidArgumentError, LogClosedError

TS = 1_700_000_000_000
TXN = dict(producer_epoch=0, is_transactional=True)
ISOLATIONS = (None, "uncommitted", "committed")


def answers(log, spec) -> tuple:
    """``log.list_offset(spec)`` at each isolation: (None, uncommitted, committed)."""
    return tuple(log.list_offset(spec, isolation=i) for i in ISOLATIONS)


@pytest.fixture
def open_transaction(tmp_path):
    """Offsets 0-1 committed at TS, TS+10; 2 an open transaction at TS+20; 3 plain at TS+30."""
    log = Log.open(tmp_path / "t-0")
    log.append([b"a", b"b"], timestamp=[TS, TS + 10])
    log.append([b"open"], producer_id=7, base_sequence=0, timestamp=TS + 20, **TXN)
    log.append([b"after"], timestamp=TS + 30)
    yield log
    log.close()


def test_an_empty_log_has_earliest_and_latest_at_zero_and_nothing_by_time(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        assert answers(log, "earliest") == answers(log, "latest") == (0, 0, 0)
        assert answers(log, "max-timestamp") == answers(log, TS) == answers(log, 0) == (None, None, None)


def test_latest_stops_before_an_open_transaction_for_committed_reads_only(open_transaction):
    log = open_transaction
    assert answers(log, "earliest") == (0, 0, 0)
    assert answers(log, "latest") == answers(log, -1) == (4, 4, 2)


def test_by_time_the_first_record_stamped_at_or_after_it_below_the_bound(open_transaction):
    log = open_transaction
    assert answers(log, 0) == answers(log, TS) == (0, 0, 0)
    assert answers(log, TS + 5) == (1, 1, 1)
    assert answers(log, TS + 15) == (2, 2, None)  # the open transaction's record: not readable committed
    assert answers(log, TS + 30) == (3, 3, None)
    assert answers(log, TS + 31) == (None, None, None)
    assert answers(log, "max-timestamp") == answers(log, -3) == (3, 3, None)


def test_a_completed_transaction_no_longer_holds_latest_back(open_transaction):
    log = open_transaction
    log.append_txn_marker(7, 0, commit=False)
    assert answers(log, "latest") == (5, 5, 5)
    assert answers(log, TS + 15) == (2, 2, 2)  # an aborted record's offset is still an offset, as Kafka's


def test_a_replica_high_watermark_below_the_log_end_bounds_uncommitted_and_committed(tmp_path):
    """A follower's log: its leader committed 3 of its 5 records."""
    with Log.open(tmp_path / "t-0", auto_high_watermark=False) as log:
        log.append([b"v%d" % i for i in range(5)], timestamp=[TS + i for i in range(5)])
        log.replica_view.update_high_watermark(3)
        assert answers(log, "latest") == (5, 3, 3)
        assert answers(log, TS + 2) == (2, 2, 2)
        assert answers(log, TS + 3) == (3, None, None)
        assert answers(log, "max-timestamp") == (4, None, None)
        assert answers(log, "earliest") == (0, 0, 0)


def test_a_moved_log_start_is_earliest_and_time_lookups_start_there(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"v%d" % i for i in range(5)], timestamp=[TS + i for i in range(5)])
        log.delete_records(3)
        assert answers(log, "earliest") == answers(log, -2) == (3, 3, 3)
        assert answers(log, 0) == answers(log, TS + 1) == (3, 3, 3)
        assert answers(log, "latest") == (5, 5, 5)
        assert answers(log, "earliest-local") == (3, 3, 3)
        assert answers(log, "latest-tiered") == (None, None, None)  # nothing is tiered


def test_a_read_only_log_answers_what_its_writer_appended_since(tmp_path):
    with Log.open(tmp_path / "t-0") as writer, Log.open(tmp_path / "t-0", read_only=True) as reader:
        assert reader.list_offset("latest", isolation="uncommitted") == 0
        writer.append([b"a", b"b"], timestamp=TS)
        assert reader.list_offset("latest", isolation="uncommitted") == 2
        assert reader.list_offset(TS, isolation="committed") == 0


@pytest.mark.parametrize("spec, named", [("newest", "'newest'"), ("LATEST", "'LATEST'"), (-6, "-6"),
                                         (True, "bool"), (1.5, "float"), (None, "NoneType")])
def test_a_bad_spec_is_refused_naming_it(tmp_path, spec, named):
    with Log.open(tmp_path / "t-0") as log:
        with pytest.raises(InvalidArgumentError, match="offset spec") as e:
            log.list_offset(spec)
        assert named in str(e.value)


def test_a_bad_isolation_is_refused_naming_it(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        with pytest.raises(InvalidArgumentError, match="isolation .*'read_committed'"):
            log.list_offset("latest", isolation="read_committed")


def test_a_closed_log_says_so(tmp_path):
    log = Log.open(tmp_path / "t-0")
    log.close()
    with pytest.raises(LogClosedError):
        log.list_offset("latest", isolation="uncommitted")


def test_a_log_in_object_storage_answers_as_the_same_log_on_disk(s3, tmp_path):
    root = tmp_path / "data"
    with pylog.LogManager(root) as m:
        m.create_topic("t", 1)
        log = m.log("t", 0)
        log.append([b"a", b"b"], timestamp=[TS, TS + 10])
        log.append([b"c"], producer_id=7, base_sequence=0, timestamp=TS + 20, **TXN)
        log.append_txn_marker(7, 0, commit=True)
        log.append([b"open"], producer_id=8, base_sequence=0, timestamp=TS + 30, **TXN)
    url = s3.url(s3.bucket(), "list-offset")
    s3.upload_dir(root, url)
    specs = ["earliest", "latest", "max-timestamp", 0, TS + 5, TS + 20, TS + 25, TS + 31]
    with Log.open(root / "t-0", read_only=True) as local, \
            Log.open(url + "/t-0", read_only=True, storage_options=s3.storage_options) as remote:
        assert [answers(remote, s) for s in specs] == [answers(local, s) for s in specs]
        assert answers(remote, "latest") == (5, 5, 4)
