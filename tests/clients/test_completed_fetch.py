"""``CompletedFetch``: a read's records handed out in offset order across batch lists,
whole batches (and the rest of a cut batch) as the lists their decode built, and no list
it returned touched by a later take."""

from __future__ import annotations

from pylog.clients.completed_fetch import CompletedFetch
from pylog.record import Record


def batch_lists(*sizes):
    """Lists of records with offsets following each other, one list a batch."""
    lists, offset = [], 10
    for size in sizes:
        lists.append([Record(b"%d" % o, offset=o) for o in range(offset, offset + size)])
        offset += size
    return lists


def offsets(records) -> list:
    return [r.offset for r in records]


def test_takes_cross_batches_in_offset_order_and_move_the_position():
    fetch = CompletedFetch(10, iter(batch_lists(5, 5, 5)))
    assert offsets(fetch.take(3)) == [10, 11, 12] and fetch.position == 13
    assert offsets(fetch.take(4)) == [13, 14, 15, 16] and fetch.position == 17
    assert offsets(fetch.take(100)) == list(range(17, 25)) and fetch.position == 25
    assert fetch.take(100) == [] and fetch.position == 25


def test_a_whole_batch_and_the_rest_of_a_cut_one_are_the_lists_their_decode_built():
    first, second = batch_lists(4, 6)
    fetch = CompletedFetch(10, iter([first, second]))
    assert fetch.take(4) is first
    assert offsets(fetch.take(2)) == [14, 15]
    rest = fetch.take(4)
    assert rest is second and offsets(rest) == [16, 17, 18, 19]  # the records given out cut from its front


def test_no_list_a_take_returned_changes_afterwards():
    fetch = CompletedFetch(10, iter(batch_lists(3, 3, 3, 3)))
    taken = [fetch.take(n) for n in (2, 2, 3, 100)]
    assert [offsets(t) for t in taken] == [[10, 11], [12, 13], [14, 15, 16], [17, 18, 19, 20, 21]]
    assert fetch.take(1) == []


def test_an_empty_batch_list_is_passed_over():
    lists = batch_lists(2, 0, 2)
    fetch = CompletedFetch(10, iter(lists))
    assert offsets(fetch.take(10)) == [10, 11, 12, 13]
