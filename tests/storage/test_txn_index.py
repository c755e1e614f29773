"""``TxnIndex`` (pylog/index/txn_index.py): the ``.txnindex`` file, byte for byte as
docs/format/txnindex.md specifies, and its append, collect, truncation and sanity rules."""

from __future__ import annotations

import struct

import pytest

from pylog.errors import CorruptIndexError, InvalidOffsetError, ReadOnlyError
from pylog.index import AbortedTxn, TxnIndex


def entry_bytes(*txns, version=0) -> bytes:
    return b"".join(struct.pack(">hqqqq", version, *t) for t in txns)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "00000000000000000000.txnindex"


def index_with(path, *txns, base=0) -> TxnIndex:
    idx = TxnIndex(path, base_offset=base)
    for t in txns:
        idx.append(AbortedTxn(*t))
    return idx


# -- bytes on disk ---------------------------------------------------------------------------
def test_spec_worked_example_bytes(path):
    index_with(path, (4242, 4, 6, 7))
    assert path.read_bytes() == bytes.fromhex(
        "0000 0000000000001092 0000000000000004 0000000000000006 0000000000000007")


def test_entries_are_34_bytes_appended_in_order(path):
    index_with(path, (1, 0, 3, 4), (2**63 - 1, 5, 9, 10))
    assert path.read_bytes() == entry_bytes((1, 0, 3, 4), (2**63 - 1, 5, 9, 10))
    assert len(path.read_bytes()) == 68


def test_the_file_is_created_with_the_first_entry(path):
    idx = TxnIndex(path, base_offset=0)
    assert len(idx) == 0 and idx.entries() == []
    idx.flush()
    assert not path.exists()


def test_reopen_reads_the_entries_written(path):
    index_with(path, (7, 0, 3, 4), (8, 2, 9, 10))
    again = TxnIndex(path, base_offset=0, writable=False)
    assert again.entries() == [AbortedTxn(7, 0, 3, 4), AbortedTxn(8, 2, 9, 10)]


# -- appends ------------------------------------------------------------------------------------
def test_append_refuses_a_marker_not_after_the_last(path):
    idx = index_with(path, (7, 0, 3, 4))
    with pytest.raises(InvalidOffsetError):
        idx.append(AbortedTxn(8, 1, 3, 4))
    assert path.read_bytes() == entry_bytes((7, 0, 3, 4))


def test_read_only_index_refuses_appends(path):
    index_with(path, (7, 0, 3, 4))
    with pytest.raises(ReadOnlyError):
        TxnIndex(path, base_offset=0, writable=False).append(AbortedTxn(8, 5, 6, 7))
    assert path.read_bytes() == entry_bytes((7, 0, 3, 4))


# -- collect --------------------------------------------------------------------------------------
TXNS = [(1, 0, 10, 11), (2, 5, 20, 21), (3, 30, 40, 41)]


@pytest.mark.parametrize("fetch_offset, upper_bound, producers, complete", [
    (0, 12, [1, 2], True),     # producer 1's last stable offset 11 is below 12; producer 2's 21 is not
    (11, 15, [2], True),       # producer 1's marker is below the fetch; 21 >= 15 ends the search
    (21, 30, [], True),        # producer 3 starts at the bound; no entry overlaps
    (0, 100, [1, 2, 3], False),
    (41, 100, [], False),
])
def test_collect_returns_the_entries_overlapping_the_range(path, fetch_offset, upper_bound, producers, complete):
    found, done = index_with(path, *TXNS).collect(fetch_offset, upper_bound)
    assert [t.producer_id for t in found] == producers
    assert done is complete


def test_collect_stops_at_the_first_entry_whose_last_stable_offset_reaches_the_bound(path):
    found, done = index_with(path, *TXNS).collect(0, 11)
    assert [t.producer_id for t in found] == [1] and done


# -- truncation -----------------------------------------------------------------------------------
def test_truncate_to_removes_entries_whose_marker_is_at_or_after(path):
    idx = index_with(path, *TXNS)
    idx.truncate_to(20)
    assert idx.entries() == [AbortedTxn(1, 0, 10, 11)]
    assert path.read_bytes() == entry_bytes((1, 0, 10, 11))


def test_truncate_to_past_the_last_marker_changes_nothing(path):
    idx = index_with(path, *TXNS)
    idx.truncate_to(41)
    assert path.read_bytes() == entry_bytes(*TXNS)


def test_replace_rewrites_the_file_and_trusts_it(path):
    idx = index_with(path, *TXNS)
    idx.replace([AbortedTxn(*TXNS[0])])
    assert idx.trusted and path.read_bytes() == entry_bytes(TXNS[0])
    idx.replace([])
    assert len(idx) == 0 and path.read_bytes() == b""


def test_replace_of_a_read_only_index_keeps_the_entries_in_memory_only(path):
    index_with(path, *TXNS)
    before = path.read_bytes()
    idx = TxnIndex(path, base_offset=0, writable=False)
    idx.replace([AbortedTxn(*TXNS[0])])
    idx.close()
    assert idx.entries() == [AbortedTxn(*TXNS[0])] and path.read_bytes() == before


def test_verify_trusts_an_index_that_matches_the_markers_and_rebuilds_one_that_does_not(path):
    expected = [AbortedTxn(*t) for t in TXNS]
    index_with(path, *TXNS)
    idx = TxnIndex(path, base_offset=0, writable=True)
    assert idx.verify(expected, checked_to=10**9) is False and idx.trusted
    path.write_bytes(b"")
    idx = TxnIndex(path, base_offset=0, writable=True)
    assert idx.verify(expected, checked_to=10**9) is True and idx.trusted
    assert path.read_bytes() == entry_bytes(*TXNS)


# -- sanity check --------------------------------------------------------------------------------
def test_sanity_check_passes_a_good_index(path):
    index_with(path, *TXNS, base=0)
    TxnIndex(path, base_offset=10, writable=False).sanity_check()


def test_sanity_check_fails_an_entry_below_the_base_offset(path):
    index_with(path, *TXNS)
    with pytest.raises(CorruptIndexError) as e:
        TxnIndex(path, base_offset=11, writable=False).sanity_check()
    assert e.value.path == str(path)


def test_sanity_check_fails_a_size_not_a_multiple_of_34(path):
    path.write_bytes(entry_bytes((1, 0, 10, 11)) + b"\x00" * 10)
    with pytest.raises(CorruptIndexError) as e:
        TxnIndex(path, base_offset=0, writable=False).sanity_check()
    assert e.value.path == str(path)


def test_sanity_check_fails_an_unknown_version(path):
    path.write_bytes(entry_bytes((1, 0, 10, 11), version=1))
    with pytest.raises(CorruptIndexError) as e:
        TxnIndex(path, base_offset=0, writable=False).sanity_check()
    assert e.value.path == str(path)
