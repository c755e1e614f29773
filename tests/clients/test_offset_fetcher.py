"""``OffsetFetcher``: a consumer's offset look-ups (beginning, end, by time) and position
resets are the partitions' ListOffsets at the consumer's isolation level: "latest" is the high
watermark for read_uncommitted, as Kafka's consumer has it, and the last stable offset for
read_committed. Real partition directories, no Consumer around it."""

from __future__ import annotations

import pytest

from pylog import Log, LogManager
from pylog.clients.offset_fetcher import OffsetAndTimestamp, OffsetFetcher
from pylog.clients.partition_logs import PartitionLogs
from pylog.clients.subscription_state import SubscriptionState, TopicPartition
from pylog.logdir.wakeup import DirWatch
from pylog.closing import close_all
from pylog.errors import InvalidArgumentError, OffsetOutOfRangeError

T0 = TopicPartition("t", 0)
TS = 1_700_000_000_000


class FollowerLogs(PartitionLogs):
    """The logs as a replica's follower knows them: the high watermark its leader committed
    (the checkpointed one), not the log end a reader of a single-node log takes."""

    def _open(self, tp):
        return Log.open(self.path(tp), read_only=True, auto_high_watermark=False)


@pytest.fixture
def offset_fetchers(root):
    """``make(isolation, auto_offset_reset, logs_class) -> (offset fetcher, subscriptions)``."""
    made = []

    def make(isolation="uncommitted", auto_offset_reset="latest", logs_class=PartitionLogs):
        watch, subscriptions = DirWatch(), SubscriptionState()
        logs = logs_class(root, subscriptions, watch)
        made.append((logs, watch))
        return OffsetFetcher(logs, subscriptions, isolation=isolation, auto_offset_reset=auto_offset_reset), \
            subscriptions
    yield make
    for logs, watch in made:
        close_all(logs.close_steps() + [watch.close])


def test_a_high_watermark_below_the_log_end_is_latest_for_read_uncommitted(root, offset_fetchers):
    """A replica's log: its leader committed 3 of its 5 records."""
    with Log.open(f"{root}/t-0", auto_high_watermark=False) as log:
        log.append([b"v%d" % i for i in range(5)])
        log.replica_view.update_high_watermark(3)
    for isolation in ("uncommitted", "committed"):
        offsets, subscriptions = offset_fetchers(isolation, logs_class=FollowerLogs)
        assert offsets.end_offsets([T0]) == {T0: 3}
        subscriptions.assign_from_user([T0])
        offsets.reset_positions()  # auto_offset_reset="latest"
        assert subscriptions.position(T0) == 3
        subscriptions.seek(T0, 0)
        offsets.seek_to(T0, "latest")
        assert subscriptions.position(T0) == 3


def test_latest_stops_at_an_open_transaction_for_read_committed(root, offset_fetchers):
    with LogManager(root) as m:
        log = m.create_topic("t", 1) and m.log("t", 0)
        log.append([b"a", b"b"], timestamp=TS)
        log.append([b"open"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True,
                   timestamp=TS + 10)
    committed, _ = offset_fetchers("committed")
    uncommitted, _ = offset_fetchers("uncommitted")
    assert (committed.end_offsets([T0]), uncommitted.end_offsets([T0])) == ({T0: 2}, {T0: 3})
    assert committed.beginning_offsets([T0]) == uncommitted.beginning_offsets([T0]) == {T0: 0}
    assert committed.offsets_for_times({T0: TS + 5}) == {T0: None}  # the open transaction's record
    assert uncommitted.offsets_for_times({T0: TS + 5}) == {T0: OffsetAndTimestamp(2, TS + 10)}


def test_auto_offset_reset_none_refuses_a_partition_without_a_position(root, offset_fetchers):
    with LogManager(root) as m:
        m.create_topic("t", 1).append([b"a"])
    offsets, subscriptions = offset_fetchers(auto_offset_reset="none")
    subscriptions.assign_from_user([T0])
    with pytest.raises(OffsetOutOfRangeError, match=r"t-0 has no committed offset \[0, 1\]"):
        offsets.reset_positions()
    with pytest.raises(InvalidArgumentError, match="timestamp"):
        offsets.offsets_for_times({T0: -1})
