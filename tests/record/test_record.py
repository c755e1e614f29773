"""``Record``'s attributes and behaviour, the same for the C type (the speedups built) and
the pure-Python class pylog uses without them (``PyRecord``)."""

from __future__ import annotations

import copy
import pickle

import pytest

from pylog import Log
from pylog.record.batch import decode_v2_records
from pylog.record.encode import encode_batch
from pylog.record.record import ControlRecord, PyRecord, Record

CLASSES = [pytest.param(PyRecord, id="python"),
           pytest.param(Record, id="c", marks=pytest.mark.skipif(Record is PyRecord, reason="speedups not built"))]


@pytest.fixture(params=CLASSES)
def cls(request):
    return request.param


def test_a_new_record_has_its_fields_and_no_place(cls):
    r = cls(b"v", key=b"k", timestamp=5, headers=(("h", b"1"),), offset=3)
    assert (r.value, r.key, r.timestamp, r.headers, r.offset) == (b"v", b"k", 5, (("h", b"1"),), 3)
    assert (r.topic, r.partition, r.timestamp_type) == (None, None, None)
    assert cls(b"v").headers == () and cls(b"v").key is None and cls(None).value is None
    assert cls.is_control is False


def test_fields_can_be_set(cls):
    r = cls(b"v")
    r.value, r.key, r.timestamp, r.offset, r.headers = b"w", b"k", 9, 4, (("a", None),)
    r.topic, r.partition, r.timestamp_type = "t", 2, "LogAppendTime"
    assert (r.value, r.key, r.timestamp, r.offset, r.headers) == (b"w", b"k", 9, 4, (("a", None),))
    assert (r.topic, r.partition, r.timestamp_type) == ("t", 2, "LogAppendTime")


def test_equality_compares_offset_timestamp_key_value_and_headers_not_the_place(cls):
    a = cls(b"v", key=b"k", timestamp=1, headers=[("h", b"x")], offset=0)
    b = cls(b"v", key=b"k", timestamp=1, headers=(("h", b"x"),), offset=0)
    b.topic, b.partition = "t", 1
    assert a == b and not a != b
    for other in (cls(b"w", key=b"k", timestamp=1, headers=(("h", b"x"),), offset=0),
                  cls(b"v", key=b"j", timestamp=1, headers=(("h", b"x"),), offset=0),
                  cls(b"v", key=b"k", timestamp=2, headers=(("h", b"x"),), offset=0),
                  cls(b"v", key=b"k", timestamp=1, headers=(), offset=0),
                  cls(b"v", key=b"k", timestamp=1, headers=(("h", b"x"),), offset=1)):
        assert a != other and not a == other
    assert a != (b"k", b"v") and a != b"v"


def test_records_are_unhashable(cls):
    with pytest.raises(TypeError):
        hash(cls(b"v"))
    assert cls.__hash__ is None


def test_repr_shows_a_long_value_cut_at_32_bytes_with_its_size(cls):
    assert repr(cls(b"v", key=b"k", timestamp=5, offset=2)) == \
        "Record(offset=2, timestamp=5, key=b'k', value=b'v', headers=())"
    assert repr(cls(b"x" * 40)) == ("Record(offset=None, timestamp=None, key=None, "
                                    "value=b'" + "x" * 32 + "...' (40 bytes), headers=())")
    assert repr(cls(None, headers=(("h", None),))) == \
        "Record(offset=None, timestamp=None, key=None, value=None, headers=(('h', None),))"


def test_pickle_and_copy_keep_fields_and_place(cls):
    r = cls(b"v", key=b"k", timestamp=5, headers=(("h", b"1"),), offset=3)
    r.topic, r.partition, r.timestamp_type = "t", 0, "CreateTime"
    for back in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert type(back) is cls and back == r
        assert (back.topic, back.partition, back.timestamp_type) == ("t", 0, "CreateTime")


def test_decoded_records_equal_the_appended_ones_with_their_place(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([Record(b"a", key=b"k", timestamp=5, headers=(("h", b"1"),)), b"b"])
        got = list(log.records())
    assert got == [Record(b"a", key=b"k", timestamp=5, headers=(("h", b"1"),), offset=0),
                   Record(b"b", timestamp=got[1].timestamp, offset=1)]
    assert all(type(r) is Record and (r.topic, r.partition, r.timestamp_type) == ("t", 0, "CreateTime")
               for r in got)


def test_a_decoded_record_becomes_a_subclass_by_a_class_change():
    class Sub(Record):
        __slots__ = ()
    r = decode_v2_records(bytes(encode_batch([b"v"]))[61:], 1, 7, 100, None)[0]
    r.__class__ = Sub
    assert isinstance(r, Sub) and (r.value, r.offset, r.timestamp) == (b"v", 7, 100)


def test_control_records_are_a_subclass_with_their_marker():
    raw = encode_batch([Record(b"\x00\x00\x00\x00\x00\x05", key=b"\x00\x00\x00\x01")], is_control=True)
    r = decode_v2_records(bytes(raw)[61:], 1, 0, 0, None, ControlRecord)[0]
    assert isinstance(r, Record) and r.is_control
    assert (r.control_type, r.coordinator_epoch) == ("COMMIT", 5)
    assert pickle.loads(pickle.dumps(r)).control_type == "COMMIT"


def test_memory_of_freed_records_and_subclass_instances_is_reused_safely():
    import gc
    import weakref

    class WithDict(Record):
        pass

    class WithWeakref(Record):
        __slots__ = ("__weakref__",)

    class Plain(Record):
        __slots__ = ()
    raw = bytes(encode_batch([b"v%d" % i for i in range(3000)]))[61:]
    for _ in range(5):
        records = decode_v2_records(raw, 3000, 0, 0, None)
        for r in records[::2]:
            r.__class__ = Plain
        with_dict = [WithDict(b"x") for _ in range(200)]
        for d in with_dict:
            d.me = [d]  # a cycle through its __dict__
        with_weakref = [WithWeakref(b"y") for _ in range(200)]
        refs = [weakref.ref(w) for w in with_weakref]
        del records, with_dict, with_weakref
        gc.collect()
        assert all(ref() is None for ref in refs)
        again = decode_v2_records(raw, 3000, 5, 0, None)
        assert [(r.value, r.offset) for r in again[:2]] + [(again[-1].value, again[-1].offset)] == \
            [(b"v0", 5), (b"v1", 6), (b"v2999", 3004)]


def test_records_decode_straight_into_a_subclass_and_its_constructor_runs_if_it_has_one():
    class Plain(Record):
        __slots__ = ()
    built = []

    class Constructed(Record):
        __slots__ = ()

        def __init__(self, *args):
            super().__init__(*args)
            built.append(self.offset)
    raw = bytes(encode_batch([b"a", b"b"]))[61:]
    plain = decode_v2_records(raw, 2, 10, 100, None, Plain, place=("t", 1, "CreateTime"))
    assert [type(r) for r in plain] == [Plain, Plain] and [r.value for r in plain] == [b"a", b"b"]
    assert [(r.offset, r.timestamp, r.topic, r.partition, r.timestamp_type) for r in plain] == \
        [(10, 100, "t", 1, "CreateTime"), (11, 100, "t", 1, "CreateTime")]
    constructed = decode_v2_records(raw, 2, 10, 100, None, Constructed)
    assert [type(r) for r in constructed] == [Constructed, Constructed] and built == [10, 11]


def test_decoded_headers_read_compare_pickle_and_replace_as_given():
    headers = (("trace", b"x" * 16), ("none", None), ("\u00e9", b""))
    raw = bytes(encode_batch([Record(b"v", key=b"k", timestamp=1, headers=headers)]))[61:]
    first, second = (decode_v2_records(raw, 1, 0, 0, None)[0] for _ in range(2))
    assert repr(first).endswith(f"headers={headers!r})") and first == second  # decoded by repr, then by ==
    assert second.headers == headers and second.headers is second.headers
    assert pickle.loads(pickle.dumps(decode_v2_records(raw, 1, 0, 0, None)[0])).headers == headers
    second.headers = (("a", b"b"),)
    assert second.headers == (("a", b"b"),) and second != first


def test_freed_as_record_refuses_a_subclass_with_fields_of_its_own_or_a_finalizer():
    speedups = pytest.importorskip("pylog._speedups", reason="the C speedups are not built here")

    class Plain(speedups.Record):
        __slots__ = ()

    class WithField(speedups.Record):
        __slots__ = ("extra",)

    class WithDel(speedups.Record):
        __slots__ = ()

        def __del__(self):
            pass

    assert speedups.freed_as_record(Plain) is Plain
    records = speedups.decode_records(encode_batch([b"a", b"b"])[61:], 2, 0, 0, None, Plain)
    assert [type(r) for r in records] == [Plain, Plain] and [r.value for r in records] == [b"a", b"b"]
    del records  # freed by Record's dealloc, into its free list, and made again from it
    assert [r.value for r in speedups.decode_records(encode_batch([b"c"])[61:], 1, 0, 0, None, Plain)] == [b"c"]
    for cls in (WithField, WithDel, int):
        with pytest.raises(TypeError):
            speedups.freed_as_record(cls)
