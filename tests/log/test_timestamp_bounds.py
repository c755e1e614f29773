"""CreateTime timestamp bounds (``message_timestamp_before_max_ms``/``after_max_ms``,
pylog/log/validation.py) as Kafka's broker applies them, and ``preallocate``, which pylog
refuses. The bounds are hours wide, so the test's own run time never matters."""

from __future__ import annotations

import pytest

from pylog import Log, LogConfig, Record, decode_batches, encode_batch
from pylog.errors import InvalidConfigError, InvalidTimestampError
from pylog.log.validation import validate_timestamps
from pylog.record.encode import now_ms

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def batches(records, **options):
    return list(decode_batches(encode_batch(records, **options)))


# -- the rule, as a pure function --------------------------------------------------------------------
@pytest.mark.parametrize("timestamp_ms, refused", [
    (1_000_000 + HOUR_MS, False), (1_000_000 + HOUR_MS + 1, True),  # after_max_ms: at most one hour ahead
    (1_000_000 - 500_000, False), (1_000_000 - 500_001, True),  # before_max_ms: 500 s
    (-1, False),  # no timestamp
])
def test_a_record_is_refused_exactly_past_either_bound(timestamp_ms, refused):
    config = LogConfig(message_timestamp_before_max_ms=500_000, message_timestamp_after_max_ms=HOUR_MS)
    checked = batches([Record(b"a", timestamp=1_000_000), Record(b"b", timestamp=timestamp_ms)], base_offset=7)
    if refused:
        with pytest.raises(InvalidTimestampError, match=f"{timestamp_ms} of the record at offset 8"):
            validate_timestamps(checked, config, 1_000_000)
    else:
        validate_timestamps(checked, config, 1_000_000)


def test_a_record_older_than_its_batch_first_one_is_caught():
    config = LogConfig(message_timestamp_before_max_ms=DAY_MS)
    now = 100 * DAY_MS
    checked = batches([Record(b"a", timestamp=now), Record(b"b", timestamp=now - 2 * DAY_MS)])
    with pytest.raises(InvalidTimestampError, match="offset 1"):
        validate_timestamps(checked, config, now)


def test_log_append_time_topics_and_followers_are_not_checked():
    far_future = batches([Record(b"a", timestamp=2**62)])
    validate_timestamps(far_future, LogConfig(message_timestamp_type="LogAppendTime"), 0)
    validate_timestamps(far_future, LogConfig(), 0, from_client=False)
    with pytest.raises(InvalidTimestampError):
        validate_timestamps(far_future, LogConfig(), 0)


def test_kafkas_long_max_means_no_bound():
    config = LogConfig(message_timestamp_before_max_ms=2**63 - 1, message_timestamp_after_max_ms=2**63 - 1)
    validate_timestamps(batches([Record(b"a", timestamp=2**63 - 1), Record(b"b", timestamp=0)]), config, 10**12)


# -- through Log ---------------------------------------------------------------------------------------
@pytest.fixture
def log(tmp_path):
    with Log.open(tmp_path / "events-0") as log:
        log.append([b"existing"])
        yield log


def test_the_default_refuses_a_record_more_than_an_hour_ahead_and_writes_nothing(log):
    size = log.size_bytes
    with pytest.raises(InvalidTimestampError, match="offset 2"):
        log.append([Record(b"ok"), Record(b"ahead", timestamp=now_ms() + 2 * HOUR_MS)])
    with pytest.raises(InvalidTimestampError):
        log.append([b"ahead"], timestamp=now_ms() + 2 * HOUR_MS)
    with pytest.raises(InvalidTimestampError):
        log.append_batches(encode_batch([Record(b"ahead", timestamp=now_ms() + 2 * HOUR_MS)]))
    assert (log.log_end_offset, log.size_bytes) == (1, size)
    assert log.append([Record(b"soon", timestamp=now_ms() + HOUR_MS // 2),
                       Record(b"old", timestamp=now_ms() - 3650 * DAY_MS)]).num_records == 2


def test_a_before_bound_refuses_old_records_from_every_client_path(tmp_path):
    with Log.open(tmp_path / "events-0", message_timestamp_before_max_ms=DAY_MS) as log:
        with pytest.raises(InvalidTimestampError, match="message_timestamp_before_max_ms"):
            log.append([Record(b"old", timestamp=now_ms() - 2 * DAY_MS)])
        with pytest.raises(InvalidTimestampError):
            log.append_batches(encode_batch([Record(b"new", timestamp=now_ms()),
                                             Record(b"old", timestamp=now_ms() - 2 * DAY_MS)]))
        assert log.log_end_offset == 0
        log.append([Record(b"recent", timestamp=now_ms() - DAY_MS // 2)])
        log.append_txn_marker(5, 0, commit=True)  # markers carry the log's own time
        assert log.log_end_offset == 2


def test_followers_and_log_append_time_topics_keep_any_timestamp(tmp_path):
    far = now_ms() + 1000 * DAY_MS
    with Log.open(tmp_path / "copy-0") as log:
        log.append_as_follower(encode_batch([Record(b"x", timestamp=far)], base_offset=0))
        assert next(log.records()).timestamp == far
    with Log.open(tmp_path / "stamped-0", message_timestamp_type="LogAppendTime") as log:
        log.append([Record(b"x", timestamp=far)])
        assert next(log.records()).timestamp <= now_ms()


def test_preallocate_is_refused_saying_pylog_does_not_preallocate(tmp_path):
    with pytest.raises(InvalidConfigError, match="does not preallocate"):
        LogConfig(preallocate=True)
    with pytest.raises(InvalidConfigError, match="does not preallocate"):
        Log.open(tmp_path / "t-0", preallocate=True)
    with pytest.raises(InvalidConfigError, match="preallocate"):
        LogConfig.from_kafka({"preallocate": "true"})
    assert not (tmp_path / "t-0").exists()
