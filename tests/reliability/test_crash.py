"""SIGKILL at random moments, under each flush policy and during rolls, retention,
compaction and checkpoint writes: every acknowledged record survives, none appears twice, offsets stay
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
    from pylog import Log, Record
    path, flush, segment_bytes, policy = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    log = Log.open(path, segment_bytes=segment_bytes, flush_messages=flush,
                   retention_bytes=20000 if policy == "delete" else -1, file_delete_delay_ms=0,
                   cleanup_policy="compact" if policy == "compact" else "delete", min_cleanable_dirty_ratio=0.0)
    i = log.log_end_offset
    acked = -1
    while True:
        log.append([Record(b"%010d" % i + b"." * (i % 97), key=b"k%d" % (i % KEYS))])
        i += 1
        if policy == "delete" and i % 50 == 0:
            log.enforce_retention()
        if policy == "compact" and i % 200 == 0:
            log.compact()
        if log.recovery_point - 1 > acked:
            acked = log.recovery_point - 1
            print(acked, flush=True)
""").replace("KEYS", "50")
KEYS = 50

CASES = {  # flush_messages, segment_bytes, cleanup while writing
    "flush-every-append": (1, 1 << 20, "none"),
    "flush-every-10": (10, 1 << 20, "none"),
    "no-flush-rolls-flush": (2**62, 4096, "none"),
    "constant-rolls": (3, 600, "none"),
    "retention-deleting": (5, 2000, "delete"),
    "compacting": (5, 2000, "compact"),
}


def _trials(soak: bool) -> int:
    return 200 if soak else 2


@pytest.mark.parametrize("case", sorted(CASES))
def test_sigkill_loses_nothing_acknowledged(tmp_path, case, soak):
    flush, segment_bytes, policy = CASES[case]
    rng = random.Random(case)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    d = tmp_path / "t-0"
    acked = -1
    stats = {"trials": 0, "lost": 0}
    for trial in range(_trials(soak)):
        proc = subprocess.Popen([sys.executable, str(script), str(d), str(flush), str(segment_bytes), policy],
                                stdout=subprocess.PIPE, env=env)
        first = proc.stdout.readline()  # the first acknowledgement, however long the start takes
        assert first, f"{case} trial {trial}: the writer exited before acknowledging anything"
        time.sleep(rng.random() * 0.5)  # then kill at a random moment
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        lines = (first + out).split()
        if lines:
            acked = max(acked, int(lines[-1]))
        with Log.open(d, segment_bytes=segment_bytes) as log:
            records = list(log.records())
            offsets = [r.offset for r in records]
            for r in records:
                assert r.value.startswith(b"%010d" % r.offset), f"{case} trial {trial}: record {r.offset} damaged"
            if policy == "compact":
                _assert_latest_per_key_survives(records, acked, f"{case} trial {trial}")
            else:
                start = log.log_start_offset
                assert offsets == list(range(start, start + len(offsets))), f"{case} trial {trial}: gap or repeat"
            assert log.log_end_offset >= acked + 1, f"{case} trial {trial}: acknowledged offset {acked} lost"
            assert log.check(deep=False) == []
        stats["trials"] += 1
    report = os.environ.get("PYLOG_SOAK_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"case": case, **stats, "acked_through": acked}) + "\n")


def _assert_latest_per_key_survives(records, acked: int, where: str) -> None:
    """Compaction may drop a record only for a later one of its key: for every key, the
    newest acknowledged offset (or a newer one) is still there; offsets only increase."""
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), f"{where}: offsets repeat or go back"
    newest = {}
    for r in records:
        newest[r.key] = r.offset
    for k in range(min(KEYS, acked + 1)):
        latest_acked = acked - (acked - k) % KEYS
        assert newest.get(b"k%d" % k, -1) >= latest_acked, f"{where}: key k{k} lost offset {latest_acked}"
