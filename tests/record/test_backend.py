"""pylog.record.backend: each backend runs its own code (watched through the profiler, so a
parametrised test cannot run C three times), the three write the same bytes and name the
same faults, and the switch (``use``, ``PYLOG_NO_SPEEDUPS``) does what it says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pylog import InvalidArgumentError, InvalidRecordError, Record, decode_batches, encode_batch
from pylog.layout import BATCH_HEADER_BYTES
from pylog.record import backend
from pylog.record.encode import encode_batch_buffer

N = backend.VECTOR_MIN_RECORDS + 44
PAIRS = [(b"key-%d" % i, b"value-%d" % i * (i % 5)) for i in range(N)]
STAMPS = [1_700_000_000_000 + i % 7 for i in range(N)]

#: The codec functions each backend must run (module.function), and those it must not.
RUNS = {
    "c": {"pylog._speedups.decode_records", "pylog._speedups.encode_records", "pylog._speedups.encode_batch"},
    "numpy": {"pylog.record.vector_decode.decode_records_vectorised",
              "pylog.record.vector_encode.encode_records_vectorised"},
    "python": {"pylog.record.python_codec.decode_records", "pylog.record.python_codec.encode_columns"},
}


def functions_called(fn) -> set[str]:
    """``module.name`` of every function (Python or C) that ``fn()`` calls."""
    called = set()

    def hook(frame, event, arg):
        if event == "call":
            called.add(f"{frame.f_globals.get('__name__')}.{frame.f_code.co_name}")
        elif event == "c_call":
            called.add(f"{getattr(arg, '__module__', None)}.{arg.__name__}")

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return called


def encode_and_decode():
    raw = encode_batch(PAIRS, timestamp=5)
    stamped = bytes(encode_batch_buffer(PAIRS, timestamp=STAMPS))  # the append path's stamps, one per record
    return raw, stamped, [[(r.key, r.value, r.timestamp) for r in b] for b in decode_batches(raw + stamped)]


def test_the_fixture_switches_the_backend(impl):
    assert backend.current() == impl


def test_each_backend_runs_its_own_encoder_and_decoder_and_no_other(impl):
    called = functions_called(encode_and_decode)
    assert RUNS[impl] <= called, f"{impl} did not run its own codec functions: {RUNS[impl] - called}"
    others = set().union(*(RUNS[name] for name in RUNS if name != impl))
    assert not called & others, f"{impl} ran another backend's functions: {called & others}"


def test_the_numpy_backend_runs_the_python_loops_below_the_vector_threshold():
    with backend.use("numpy"):
        small = backend.VECTOR_MIN_RECORDS - 1
        assert backend.record_decoder(small).__module__ == "pylog.record.python_codec"
        assert backend.record_encoder(small).__module__ == "pylog.record.python_codec"
        assert backend.record_decoder(small + 1).__module__ == "pylog.record.vector_decode"
        assert backend.record_encoder(small + 1).__module__ == "pylog.record.vector_encode"
        assert backend.record_encoder(small + 1, values_only=True).__module__ == "pylog.record.python_codec"


def test_only_the_c_backend_hands_out_c_functions(impl):
    for name in ("scan_records", "gather", "segment_names", "encode_records", "encode_batch"):
        assert (backend.c_function(name) is not None) == (impl == "c")


def test_every_backend_writes_and_reads_what_the_python_one_does(impl):
    got = encode_and_decode()
    with backend.use("python"):
        want = encode_and_decode()
    assert [bytes(b) for b in got[:2]] == [bytes(b) for b in want[:2]]
    assert got[2] == want[2]
    assert got[2][0][-1] == (PAIRS[-1][0], PAIRS[-1][1], 5) and got[2][1][-1][2] == STAMPS[-1]


@pytest.mark.parametrize("records, options", [
    ([b"v%d" % i * (i % 300) for i in range(N)], {}),
    ([(None, b"v"), (b"k", None), (None, None), (b"", b"")], dict(base_offset=2**40, partition_leader_epoch=7)),
    (PAIRS, dict(producer_id=9, producer_epoch=2, base_sequence=2**31 - 10, is_transactional=True)),
    (PAIRS[:3], dict(timestamp_type="LogAppendTime", log_append_time=1_700_000_000_123)),
    (PAIRS[:3], dict(delete_horizon_ms=1_700_000_000_456)),
])
def test_the_c_extension_builds_a_whole_batch_with_the_python_encoders_bytes(records, options):
    if "c" not in backend.available():
        pytest.skip("pylog._speedups is not built (or PYLOG_NO_SPEEDUPS is set)")
    got = encode_batch_buffer(records, timestamp=1_700_000_000_000, **options)
    with backend.use("python"):
        want = encode_batch_buffer(records, timestamp=1_700_000_000_000, **options)
    assert "pylog._speedups.encode_batch" in functions_called(lambda: encode_batch_buffer(records, **options))
    assert bytes(got) == bytes(want)
    [batch] = decode_batches(bytes(got))
    assert batch.is_valid() and batch.record_count == len(records)


def test_records_the_c_batch_does_not_take_go_to_the_other_encoders():
    if "c" not in backend.available():
        pytest.skip("pylog._speedups is not built (or PYLOG_NO_SPEEDUPS is set)")
    with_headers = [Record(b"v", b"k", 5, [("h", b"x")])]
    [batch] = decode_batches(bytes(encode_batch_buffer(with_headers, timestamp=5)))
    assert [(r.key, r.value, r.headers) for r in batch] == [(b"k", b"v", (("h", b"x"),))]
    with pytest.raises(InvalidArgumentError, match="cannot append str"):
        encode_batch_buffer([b"ok", "text"], timestamp=5)


def _with_bad_value_length(raw: bytes, record: int) -> bytes:
    """``raw`` with record ``record``'s value length made -2 (CRC left stale)."""
    pos = BATCH_HEADER_BYTES
    for _ in range(record):
        pos += 1 + raw[pos] // 2  # one-byte length varints in this batch
    key_at = pos + 4  # length, attributes, timestamp delta and offset delta: one byte each here
    value_len_at = key_at + 1 + raw[key_at] // 2
    return raw[:value_len_at] + bytes([0x03]) + raw[value_len_at + 1:]  # zigzag -2


def test_a_fault_deep_in_a_large_batch_is_named_alike_by_every_backend(impl):
    records = [Record(b"v%d" % (i % 10), b"k%d" % (i % 10), 5) for i in range(N)]
    raw = _with_bad_value_length(bytes(encode_batch(records, timestamp=5)), 40)
    [batch] = decode_batches(raw)
    with pytest.raises(InvalidRecordError) as got:
        batch.records(verify=False)
    with backend.use("python"), pytest.raises(InvalidRecordError) as want:
        batch.records(verify=False)
    assert "invalid value length -2" in str(want.value)
    assert str(got.value) == str(want.value)


def test_use_refuses_an_unknown_backend_and_restores_the_previous_one():
    before = backend.current()
    with pytest.raises(InvalidArgumentError, match="fortran"):
        with backend.use("fortran"):
            pass
    with pytest.raises(RuntimeError):
        with backend.use("python"):
            assert backend.current() == "python"
            raise RuntimeError
    assert backend.current() == before


def test_the_environment_switch_runs_numpy_and_the_python_record_without_a_warning():
    code = ("import pylog; from pylog.record import backend, record\n"
            "print(backend.current(), pylog.SPEEDUPS, pylog.Record is record.PyRecord, backend.available())")
    env = {**os.environ, "PYTHONPATH": os.getcwd(), backend.ENV_SWITCH: "1"}
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["numpy", "False", "True", "('numpy',", "'python')"]
