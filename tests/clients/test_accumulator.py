"""``RecordAccumulator``: one open batch per partition, sealed when full, when it lingered
``linger_ms``, or at once without lingering; queued in the order filled; failed when
abandoned. Memory only (no log dir)."""

from __future__ import annotations

import time

from pylog.clients.accumulator import RecordAccumulator
from pylog.errors import ClientStateError

TP = ("t", 0)


def queued(accumulator, tp=TP) -> list:
    queue = accumulator.queue(tp)
    return [] if queue is None else [list(batch.records) for batch in queue.batches]


def test_without_linger_each_append_seals_its_batch():
    accumulator = RecordAccumulator(batch_size=1000, linger_ms=0)
    _, sealed = accumulator.append(TP, b"a", 10, sticky=False, sent_ms=None)
    assert sealed
    assert queued(accumulator) == [[b"a"]]


def test_a_lingering_batch_fills_until_batch_size_then_seals():
    accumulator = RecordAccumulator(batch_size=25, linger_ms=1000)
    assert accumulator.append(TP, b"a", 10, sticky=False, sent_ms=1)[1] is False
    assert accumulator.append(TP, b"b", 10, sticky=False, sent_ms=1)[1] is False
    assert accumulator.append(TP, b"c", 10, sticky=False, sent_ms=1)[1] is True
    assert accumulator.append(TP, b"d", 10, sticky=False, sent_ms=1)[1] is False
    assert queued(accumulator) == [[b"a", b"b", b"c"]]
    assert accumulator.seal() == [TP]
    assert queued(accumulator) == [[b"a", b"b", b"c"], [b"d"]]


def test_a_batch_is_ready_once_it_lingered_and_says_when_the_next_is_due():
    accumulator = RecordAccumulator(batch_size=1000, linger_ms=100)
    before = time.monotonic()
    accumulator.append(TP, b"a", 10, sticky=False, sent_ms=1)
    ready, due = accumulator.ready(before)
    assert ready == [] and before + 0.1 <= due <= time.monotonic() + 0.1
    assert accumulator.ready(due - 0.001) == ([], due)
    ready, due = accumulator.ready(due + 0.001)  # (created + linger) - created may round below linger
    assert ready == [TP] and due is None
    assert queued(accumulator) == [[b"a"]]


def test_opening_a_batch_is_announced_with_whether_it_is_sticky():
    opened = []
    accumulator = RecordAccumulator(batch_size=1000, linger_ms=100,
                                    on_new_batch=lambda tp, sticky: opened.append((tp, sticky)))
    accumulator.append(TP, b"a", 10, sticky=True, sent_ms=1)
    accumulator.append(TP, b"b", 10, sticky=True, sent_ms=1)  # joins the open batch
    accumulator.append(("t", 1), b"c", 10, sticky=False, sent_ms=1)
    assert opened == [(TP, True), (("t", 1), False)]


def test_an_atomic_batch_queues_after_the_open_one_and_alone():
    accumulator = RecordAccumulator(batch_size=1000, linger_ms=100)
    accumulator.append(TP, b"a", 10, sticky=False, sent_ms=1)
    batch = accumulator.append_atomic(TP, [b"x", b"y"])
    assert batch.atomic
    assert queued(accumulator) == [[b"a"], [b"x", b"y"]]


def test_batches_abandoned_at_close_fail_with_the_reason():
    accumulator = RecordAccumulator(batch_size=1000, linger_ms=100)
    future, _ = accumulator.append(TP, b"a", 10, sticky=False, sent_ms=1)
    accumulator.seal()
    other, _ = accumulator.append(("t", 1), b"b", 10, sticky=False, sent_ms=1)
    reason = ClientStateError("closed before appended")
    accumulator.abort_incomplete(reason)
    assert future.exception is reason and other.exception is reason
    assert queued(accumulator) == []
