"""The ``pylog`` command, run for real in a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from pylog import Log, Record
from tests.conftest import needs_samples, sample_logs, sample_partitions
from tests.record.expected import expected_rows


def pylog(*args, stdin: bytes | None = None, cwd=None):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "pylog", *map(str, args)], input=stdin, capture_output=True,
                          env=env, cwd=cwd, timeout=120)


BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: "
                        r"(-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) "
                        r"isTransactional: (\w+) isControl: (\w+) deleteHorizonMs: \S+ position: (\d+) "
                        r"(\w+): (-?\d+) size: (\d+) magic: (\d) compresscodec: (\w+) crc: (\d+) isvalid: true$")
LEGACY_LINE = re.compile(r"^offset: (\d+) position: (\d+) (\w+): (-?\d+) size: (\d+) magic: (\d) "
                         r"compresscodec: (\w+) crc: (\d+) isvalid: true$")


@needs_samples
@pytest.mark.parametrize("log_path", sample_logs(), ids=lambda p: "/".join(p.parts[-2:]))
def test_dump_batch_lines_carry_kafkas_values(log_path):
    out = pylog("dump", "--files", log_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.decode().splitlines()
    assert lines[0] == f"Dumping {log_path}"
    batches = {}
    for row in expected_rows(log_path):
        batches.setdefault(row["position"], row)
    got = {}
    for line in lines[2:]:
        m = BATCH_LINE.match(line)
        if m:
            got[int(m[11])] = dict(base_offset=int(m[1]), last_offset=int(m[2]), base_sequence=int(m[4]),
                                   producer_id=int(m[6]), producer_epoch=int(m[7]),
                                   partition_leader_epoch=int(m[8]), transactional=m[9] == "true",
                                   control=m[10] == "true", timestamp_type=m[12], max_timestamp=int(m[13]),
                                   size=int(m[14]), magic=int(m[15]), codec=m[16], crc=int(m[17]))
            continue
        m = LEGACY_LINE.match(line)
        assert m, line
        got[int(m[2])] = dict(last_offset=int(m[1]), timestamp_type=m[3], max_timestamp=int(m[4]), size=int(m[5]),
                              magic=int(m[6]), codec=m[7], crc=int(m[8]))
    assert set(got) == set(batches)
    for pos, fields in got.items():
        assert fields == {k: batches[pos][k] for k in fields}


@needs_samples
def test_dump_deep_iteration_prints_a_line_per_record():
    path = [p for p in sample_logs() if "v2-txn" in str(p)][0]
    out = pylog("dump", "--files", path, "--deep-iteration").stdout.decode().splitlines()
    records = [line for line in out if line.startswith("| offset: ")]
    assert len(records) == len(expected_rows(path))
    assert any("endTxnMarker: ABORT coordinatorEpoch:" in line for line in records)


@needs_samples
def test_dump_index_files_list_real_entries():
    part = [p for p in sample_partitions() if p.name == "orders-0"][0]
    out = pylog("dump", "--files", f"{part}/00000000000000000000.index,{part}/00000000000000000000.timeindex")
    lines = out.stdout.decode().splitlines()
    assert sum(1 for line in lines if line.startswith("offset: ")) == 860
    assert any(line.startswith("timestamp: ") for line in lines)


def test_produce_consume_describe_verify_round_trip(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    r = pylog("produce", root, "--topic", "t", "--partitions", "3", "--key-separator", ":",
              stdin=b"".join(b"k%d:v%d\n" % (i, i) for i in range(30)))
    assert r.returncode == 0, r.stderr
    seen = []
    for p in range(3):
        out = pylog("consume", root, "--topic", "t", "--partition", p, "--format", "json")
        seen += [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert len(seen) == 30
    desc = json.loads(pylog("describe", root, "--json").stdout)
    assert sum(row["log_end_offset"] for row in desc) == 30
    assert pylog("verify", root).returncode == 0


def test_consume_from_offset_and_timestamp_with_limit(tmp_path):
    root = tmp_path / "root"
    with Log.open(root / "t-0") as log:
        for i in range(10):
            log.append([Record(b"v%d" % i, timestamp=1000 * (i + 1))])
    out = pylog("consume", root, "--topic", "t", "--offset", 7).stdout.decode().split()
    assert out == ["v7", "v8", "v9"]
    out = pylog("consume", root, "--topic", "t", "--timestamp", 4500, "--max-records", 2).stdout.decode().split()
    assert out == ["v4", "v5"]


def test_verify_reports_a_flipped_byte_with_file_and_position(tmp_path):
    d = tmp_path / "root" / "t-0"
    with Log.open(d) as log:
        for i in range(5):
            log.append([b"value-%d" % i])
    data = bytearray((d / "00000000000000000000.log").read_bytes())
    data[-3] ^= 0x40
    (d / "00000000000000000000.log").write_bytes(bytes(data))
    r = pylog("verify", tmp_path / "root")
    assert r.returncode == 1
    assert "00000000000000000000.log" in r.stdout.decode() and "position" in r.stdout.decode()


def test_verify_skips_the_partition_directories_kafka_renamed_away_and_reports_a_misnamed_one(tmp_path):
    """A broker's log dir holds ``<topic>-<p>.<uuid>-delete`` (topics being deleted),
    ``-future`` (replicas moving) and ``-stray`` directories: not partitions of it."""
    import shutil
    root = tmp_path / "root"
    with Log.open(root / "t-0") as log:
        log.append([b"v"])
    for suffix in ("delete", "future", "stray"):
        shutil.copytree(root / "t-0", root / f"t-0.6f6a1c3b2e3d4a5b9c8d7e6f5a4b3c2d-{suffix}")
    r = pylog("verify", root)
    assert r.returncode == 0 and r.stdout.decode().splitlines()[-1] == "1 partition(s) checked, 0 problem(s)"
    shutil.copytree(root / "t-0", root / "t-0.copy")
    r = pylog("verify", root)
    assert r.returncode == 1 and "'t-0.copy' is not named <topic>-<partition>" in r.stdout.decode()


def test_verify_of_a_file_says_to_give_a_directory(tmp_path):
    with Log.open(tmp_path / "t-0") as log:
        log.append([b"v"])
    r = pylog("verify", tmp_path / "t-0" / "00000000000000000000.log")
    assert r.returncode == 1 and "is a file: give a log dir or a partition directory" in r.stderr.decode()


@pytest.mark.parametrize("args", [["consume", "/nonexistent", "--topic", "t"], ["describe", "/nonexistent"],
                                  ["dump", "--files", "/nonexistent/x.log"], ["perf", "--records", "0"],
                                  ["dump", "--bogus", "x.log"], ["dump", "--max-bytes", "-5", "x.log"], ["topics"],
                                  ["no-such-command"]])
def test_user_mistakes_get_one_line_and_no_traceback(args):
    r = pylog(*args)
    assert r.returncode != 0
    err = r.stderr.decode()
    assert "Traceback" not in err and err.strip().count("\n") == 0, err


def test_perf_runs_a_small_workload(tmp_path):
    r = pylog("perf", "--records", 20000, "--batch-size", 500)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert re.search(r"produce: [\d,]+ records/s", out) and "consume (records)" in out
    assert re.search(r"^latency per append of 500 records \(ms\): p50 [\d.]+, p99", out, re.M)
    assert re.search(r"C speedups (on|off)", out) and "compared with docs/PERFORMANCE.md" in out
    assert "batch size 500 (bench: 1000)" in out  # the workload difference is named


PERF_JSON_KEYS = {"workload", "produce", "append_latency_ms", "consume", "consume_columnar", "environment",
                  "reference"}


def test_perf_json_is_one_object_with_the_documented_keys():
    r = pylog("perf", "--records", 3000, "--compression", "lz4", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert set(result) == PERF_JSON_KEYS
    assert result["workload"]["records"] == 3000 and result["workload"]["compression"] == "lz4"
    for phase in ("produce", "consume", "consume_columnar"):
        assert set(result[phase]) == {"seconds", "records_per_s", "mb_per_s"} and result[phase]["records_per_s"] > 0
    assert result["append_latency_ms"]["per"] == "append of 1,000 records"
    assert result["environment"]["codec"]["library"] == "lz4.frame" and result["environment"]["codec"]["version"]
    assert isinstance(result["environment"]["speedups"], bool)
    assert result["reference"]["produce_records_per_s"] > 0 and not result["reference"]["same_workload"]
    assert "compression lz4 (bench: none)" in result["reference"]["differences"]
    docs = open(os.path.join(os.getcwd(), "docs", "cli.md")).read()
    assert all(f"`{key}`" in docs for key in PERF_JSON_KEYS)


def test_perf_progress_bars_for_every_phase_stay_on_a_terminal():
    import fcntl
    import pty
    import struct
    import termios
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 120-column terminal
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    with os.fdopen(primary, "rb") as terminal:
        proc = subprocess.Popen([sys.executable, "-m", "pylog", "perf", "--records", "5000"], stderr=secondary,
                                stdout=subprocess.PIPE, env=env)
        os.close(secondary)
        err = b""
        while True:
            try:
                chunk = os.read(terminal.fileno(), 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        assert proc.wait(timeout=120) == 0
        proc.stdout.close()
    lines = [line.split("\r")[-1] for line in err.decode().splitlines()]
    for phase in ("produce", "consume (records)", "consume (columnar)"):
        assert any(line.startswith(f"{phase}: 100%") for line in lines), err.decode()


def test_retention_and_compact_commands(tmp_path):
    root = tmp_path / "root"
    with Log.open(root / "t-0", segment_bytes=500) as log:
        for i in range(30):
            log.append([Record(b"v" * 50, key=b"k", timestamp=1000)])
    assert "removed" in pylog("retention", root).stdout.decode()
    assert "skipped" in pylog("compact", root).stdout.decode()


def test_topic_takes_kafkas_comma_list(tmp_path):
    """Kafka's tools read --topic as an include list: a comma separates names."""
    root = tmp_path / "root"
    for name in ("topic1", "foo", "bar"):
        assert pylog("topics", root, "--create", "--topic", name).returncode == 0
    out = pylog("get-offsets", root, "--topic", "foo, topic1").stdout.decode().split()
    assert out == ["foo:0:0", "topic1:0:0"]
    described = pylog("topics", root, "--describe", "--topic", "'foo,topic1'").stdout.decode()
    assert "Topic: foo\t" in described and "Topic: topic1\t" in described and "bar" not in described
