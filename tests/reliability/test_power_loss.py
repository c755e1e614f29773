"""Simulated power loss through the I/O seam: whatever was acknowledged by a flush survives."""

from __future__ import annotations

import json
import os

import pytest

from pylog import Log
from pylog.errors import StorageError
from tests.reliability.faulty_io import FaultyIO


def _value(i: int) -> bytes:
    return b"%08d" % i + b"#" * (i % 50)


@pytest.mark.parametrize("keep_prefix", [False, True])
def test_power_loss_keeps_every_flushed_record(tmp_path, keep_prefix, soak):
    trials = 200 if soak else 12
    lost_bytes = 0
    for seed in range(trials):
        lost_bytes += _power_loss_trial(tmp_path / f"trial-{seed}", seed, keep_prefix)
    report = os.environ.get("PYLOG_SOAK_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"case": f"power-loss keep_prefix={keep_prefix}", "trials": trials,
                                "unsynced_bytes_dropped": lost_bytes, "lost": 0}) + "\n")


def _power_loss_trial(tmp_path, seed, keep_prefix) -> int:
    io = FaultyIO(seed)
    d = tmp_path / "t-0"
    log = Log.open(d, io=io, segment_bytes=2048, flush_messages=1 + seed % 7)
    acked = 0
    for i in range(150 + 13 * seed):
        log.append([_value(i)])
        if log.recovery_point > acked:
            acked = log.recovery_point
    # the process dies here: no close, then the power goes
    log._dir.unlock()
    dropped = io.power_loss(str(tmp_path), keep_random_prefix=keep_prefix)
    with Log.open(d) as log:
        got = [(r.offset, r.value) for r in log.records()]
        assert len(got) >= acked, f"seed {seed}: acknowledged records lost"
        assert got == [(i, _value(i)) for i in range(len(got))]
        assert log.append([b"after"]).first_offset == len(got)
        assert log.check() == []
    return dropped


def test_disk_full_mid_append_leaves_no_partial_batch(tmp_path):
    io = FaultyIO()
    d = tmp_path / "t-0"
    log = Log.open(d, io=io)
    for i in range(10):
        log.append([_value(i)])
    io.fail_after_bytes = io.written + 30  # the next batch is torn after 30 bytes
    with pytest.raises(StorageError):
        log.append([_value(10) * 20])
    assert io.faults == 1
    assert log.log_end_offset == 10
    assert [r.offset for r in log.records()] == list(range(10))  # still readable
    io.fail_after_bytes = None
    assert log.append([b"later"]).first_offset == 10
    log.close()
    with Log.open(d) as log:
        assert [r.offset for r in log.records()] == list(range(11))


def test_eio_on_write_is_reported_and_log_stays_usable(tmp_path):
    import errno
    io = FaultyIO()
    with Log.open(tmp_path / "t-0", io=io) as log:
        log.append([b"a"])
        io.fail_after_bytes, io.fail_errno = io.written, errno.EIO
        with pytest.raises(StorageError) as e:
            log.append([b"b"])
        assert e.value.errno == errno.EIO
        io.fail_after_bytes = None
        assert [r.value for r in log.records()] == [b"a"]


def test_file_size_limit_mid_append_is_a_clear_error_and_recovers(tmp_path):
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import resource, signal, sys
        from pylog import Log, StorageError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG instead of a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
        log = Log.open(sys.argv[1])
        n = 0
        try:
            while True:
                log.append([b"%06d" % n + b"-" * 200])
                n += 1
        except StorageError as e:
            assert log.log_end_offset == n
            assert [r.offset for r in log.records()] == list(range(n))  # still readable
            print(n, e.errno)
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t-0")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.returncode == 0, out.stderr
    n, err = map(int, out.stdout.split())
    assert n > 10 and err == 27  # EFBIG
    with Log.open(tmp_path / "t-0") as log:
        assert [r.offset for r in log.records()] == list(range(n))
        assert log.append([b"after"]).first_offset == n
