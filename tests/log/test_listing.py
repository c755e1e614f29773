"""Reading a directory listing: segment files are "<20 digits><suffix>" and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylog.listing import KINDS, Listing, _bases_python
from pylog.log.loader import has_temp_files, live_segment_bases
from pylog.record import backend

STRAY = ["leader-epoch-checkpoint", "partition.metadata", ".kafka_cleanshutdown", "x.log", "",
         "0000000000000000000a.log", "000000000000000000001.log", "0000000000000000001.log",
         "00000000000000000001.log.deleted", "00000000000000000001.logx", "00000000000000000001.log\n",
         "٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠.log", "99999999999999999999.index", "00000000000000000001.index.swap"]


def reference(names, suffix):
    return [int(n[:20]) for n in names
            if n[20:] == suffix and len(n[:20]) == 20 and n[:20].isascii() and n[:20].isdigit()]


names_lists = st.lists(st.one_of(
    st.builds(lambda b, k: f"{b:020d}{k}", st.integers(0, 2**63 - 1), st.sampled_from(KINDS)),
    st.sampled_from(STRAY), st.text(max_size=30)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(names_lists)
def test_every_path_finds_exactly_the_segment_files(names):
    for suffix in KINDS:
        want = reference(names, suffix)
        assert _bases_python(names, suffix) == want
        assert Listing(names).bases(suffix) == want
        assert Listing(names).offsets(suffix) == sorted(want)


@pytest.mark.parametrize("name", backend.NAMES)
def test_every_backend_groups_a_large_kafka_listing_alike(name):
    if name not in backend.available():
        pytest.skip("the C extension is not built")
    names = [f"{b:020d}{k}" for b in range(0, 3_000_000, 300) for k in KINDS[:3]] + STRAY
    with backend.use(name):
        assert (backend.c_function("segment_names") is not None) == (name == "c")
        for suffix in KINDS:
            assert Listing(names).bases(suffix) == _bases_python(names, suffix)
        assert Listing(names).offsets(".log")[-1] == 2_999_700


leftover_listings = st.lists(st.builds(lambda b, k, extra: f"{b:020d}{k}{extra}", st.integers(0, 10**6),
                                       st.sampled_from(KINDS), st.sampled_from(["", "", ".deleted", ".cleaned"]))
                             | st.sampled_from(STRAY), unique=True, max_size=40)


@settings(max_examples=300, deadline=None)
@given(leftover_listings)
def test_a_read_only_open_sees_the_same_segments_whether_or_not_leftover_files_are_listed(names):
    """Without leftover files the names are only grouped, with them each is parsed: the
    segments found are the plain ``.log`` files either way (no ``.swap`` here, so the
    directory itself is never read)."""
    temp = (".deleted", ".cleaned", ".swap")
    assert has_temp_files(names) == any(n.endswith(temp) for n in names)
    plain = sorted(int(n[:20]) for n in names if n[20:] == ".log" and n[:20].isascii() and n[:20].isdigit())
    assert live_segment_bases("/nonexistent", names) == [(b, "") for b in plain]
    assert live_segment_bases("/nonexistent", [n for n in names if not n.endswith(temp)]) == [(b, "") for b in plain]
