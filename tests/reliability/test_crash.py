"""SIGKILL at random moments, under each flush policy and during rolls, retention and
checkpoint writes: every acknowledged record survives, none appears twice, offsets stay
contiguous, appends continue. ``pytest --soak`` runs 200 trials per case instead of a few."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pylog import Log

WRITER = textwrap.dedent("""
    import sys, time
    from pylog import Log
    path, flush, segment_bytes, retention = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    log = Log.open(path, segment_bytes=segment_bytes, flush_messages=flush, retention_bytes=20000 if retention else -1,
                   file_delete_delay_ms=0)
    i = log.log_end_offset
    acked = -1
    while True:
        info = log.append([b"%010d" % i + b"." * (i % 97)])
        i += 1
        if retention and i % 50 == 0:
            log.enforce_retention()
        if log.recovery_point - 1 > acked:
            acked = log.recovery_point - 1
            print(acked, flush=True)
""")

CASES = {
    "flush-every-append": (1, 1 << 20, False),
    "flush-every-10": (10, 1 << 20, False),
    "no-flush-rolls-flush": (2**62, 4096, False),
    "constant-rolls": (3, 600, False),
    "retention-deleting": (5, 2000, True),
}


def _trials(soak: bool) -> int:
    return 200 if soak else 2


@pytest.mark.parametrize("case", sorted(CASES))
def test_sigkill_loses_nothing_acknowledged(tmp_path, case, soak):
    flush, segment_bytes, retention = CASES[case]
    rng = random.Random(case)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    d = tmp_path / "t-0"
    acked = -1
    stats = {"trials": 0, "lost": 0}
    for trial in range(_trials(soak)):
        proc = subprocess.Popen([sys.executable, str(script), str(d), str(flush), str(segment_bytes),
                                 "1" if retention else "0"], stdout=subprocess.PIPE, env=env)
        time.sleep(0.25 + rng.random() * 0.5)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        lines = out.split()
        if lines:
            acked = max(acked, int(lines[-1]))
        with Log.open(d, segment_bytes=segment_bytes) as log:
            offsets = [r.offset for r in log.records()]
            start = log.log_start_offset
            assert offsets == list(range(start, start + len(offsets))), f"{case} trial {trial}: gap or repeat"
            for r in log.read(start).records()[:3]:
                assert r.value.startswith(b"%010d" % r.offset)
            assert log.log_end_offset >= acked + 1, f"{case} trial {trial}: acknowledged offset {acked} lost"
            assert log.check(deep=False) == []
        stats["trials"] += 1
    report = os.environ.get("PYLOG_SOAK_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"case": case, **stats, "acked_through": acked}) + "\n")
