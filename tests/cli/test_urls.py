"""The CLI on object storage URLs: ``describe``, ``dump``, ``verify``, ``get-offsets`` and
``console-consumer`` on a log dir copied to the loopback S3 endpoint print what they print
for the local dir (the path shown aside); a damaged object is reported by its URL; a
missing bucket or object, no credentials and an unreachable endpoint are one line on stderr
and exit code 1, never a traceback or a credential."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pylog
from pylog.cli.main import main
from tests.s3_endpoint import ACCESS_KEY, REGION, SECRET_KEY

SEGMENT_BYTES = 2048
TS = 1_700_000_000_000


def _fill(root) -> None:
    """``events-0``: several segments, a committed and an aborted transaction, a topic
    config; ``events-1`` and ``other-0`` a few records."""
    with pylog.LogManager(root, segment_bytes=SEGMENT_BYTES, index_interval_bytes=128) as m:
        m.create_topic("events", partitions=2, config={"retention_ms": 3_600_000})
        m.create_topic("other", partitions=1)
        log = m.log("events", 0)
        for i in range(60):
            log.append([pylog.Record(b"value-%d" % i * 4, key=b"k%d" % (i % 5), timestamp=TS + i * 10)])
        for pid, commit in ((7, True), (8, False)):
            log.append([pylog.Record(b"txn-%d" % pid, timestamp=TS + 5000)], producer_id=pid, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
            log.append_txn_marker(pid, 0, commit=commit)
        for i in range(10):
            log.append([pylog.Record(b"after-%d" % i, timestamp=TS + 6000 + i)])
        m.log("events", 1).append([pylog.Record(b"one", timestamp=TS), pylog.Record(b"two", timestamp=TS + 1)])
        m.log("other", 0).append([pylog.Record(b"v", key=b"k", timestamp=TS)])


@pytest.fixture(scope="module")
def copied(s3, tmp_path_factory):
    """A pylog log dir on disk and the same files in a bucket: (local root, its URL)."""
    root = tmp_path_factory.mktemp("cli-urls") / "data"
    _fill(root)
    url = s3.url(s3.bucket(), "backup", "data")
    s3.upload_dir(root, url)
    return root, url


@pytest.fixture
def aws_env(s3, monkeypatch):
    """Credentials and endpoint from the standard AWS environment, as a user's shell has them."""
    for name, value in (("AWS_ACCESS_KEY_ID", ACCESS_KEY), ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
                        ("AWS_ENDPOINT_URL", s3.endpoint_url), ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch.setenv(name, value)


def run(capsys, *args) -> tuple[int, str, str]:
    """``pylog ARGS`` in this process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_process(*args, env: dict) -> subprocess.CompletedProcess:
    """``pylog ARGS`` in a fresh process with ``env`` only (plus PATH and PYTHONPATH)."""
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.getcwd(), "HOME": os.environ.get("HOME", "/"),
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true"}
    return subprocess.run([sys.executable, "-m", "pylog", *map(str, args)], capture_output=True, text=True,
                          env={**base, **env}, timeout=120)


def same_output(capsys, local_args, url_args, *, local: str, url: str) -> str:
    """Run a command on the local dir and on its URL; both succeed and print the same
    (the URL replaced by the local path); the local output."""
    code, expected, err = run(capsys, *local_args)
    assert code == 0, err
    code, got, err = run(capsys, *url_args)
    assert code == 0, err
    assert got.replace(url, local) == expected
    return expected


# -- describe -------------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [[], ["--json"], ["--raw", "--topic", "events"]])
def test_describe_of_a_bucket_prints_what_it_prints_for_the_local_dir(capsys, aws_env, copied, options):
    root, url = copied
    out = same_output(capsys, ["describe", root, *options], ["describe", url, *options], local=str(root), url=url)
    assert "events" in out


def test_describe_of_a_partition_directory_url_shows_that_partition(capsys, aws_env, copied):
    root, url = copied
    same_output(capsys, ["describe", root / "events-0"], ["describe", url + "/events-0"], local=str(root), url=url)


def test_s3a_and_storage_options_instead_of_the_environment(capsys, s3, copied):
    root, url = copied
    s3a = "s3a" + url[len("s3"):]
    options = ["--storage-option", f"key={ACCESS_KEY}", "--storage-option", f"secret={SECRET_KEY}",
               "--storage-option", f"client_kwargs.endpoint_url={s3.endpoint_url}",
               "--storage-option", f"client_kwargs.region_name={REGION}"]
    code, expected, _ = run(capsys, "describe", root, "--json")
    code, got, err = run(capsys, "describe", s3a, "--json", *options)
    assert code == 0, err
    assert got == expected


# -- get-offsets, console-consumer --------------------------------------------------------------------

@pytest.mark.parametrize("time", ["latest", "earliest", "max-timestamp", str(TS + 555), str(TS + 6005)])
def test_get_offsets_of_a_bucket_prints_what_it_prints_for_the_local_dir(capsys, aws_env, copied, time):
    root, url = copied
    out = same_output(capsys, ["get-offsets", root, "--time", time], ["get-offsets", url, "--time", time],
                      local=str(root), url=url)
    assert out.startswith("events:0:")


@pytest.mark.parametrize("options", [["--from-beginning"], ["--isolation-level", "read_committed", "--from-beginning"],
                                     ["--partition", "0", "--offset", "50"], ["--timestamp", str(TS + 300)],
                                     ["--include", "e.*", "--from-beginning", "--property", "print.offset=true"]])
def test_console_consumer_of_a_bucket_prints_what_it_prints_for_the_local_dir(capsys, aws_env, copied, options):
    root, url = copied
    topic = [] if "--include" in options else ["--topic", "events"]
    args = ["--no-follow", *topic, *options]
    out = same_output(capsys, ["console-consumer", root, *args], ["console-consumer", url, *args],
                      local=str(root), url=url)
    assert out


def test_committed_reads_of_a_bucket_leave_out_the_aborted_transaction(capsys, aws_env, copied):
    _, url = copied
    code, out, err = run(capsys, "consume", url, "--topic", "events", "--partition", "0",
                         "--isolation-level", "read_committed")
    assert code == 0, err
    assert "txn-7" in out.split() and "txn-8" not in out.split()


def test_console_consumer_of_a_topic_missing_from_a_bucket_fails_instead_of_waiting(capsys, aws_env, copied):
    _, url = copied
    code, out, err = run(capsys, "console-consumer", url, "--topic", "nope")
    assert code == 1
    assert "no topic 'nope'" in err and "Traceback" not in err


# -- verify ------------------------------------------------------------------------------------------

def test_verify_of_a_bucket_prints_what_it_prints_for_the_local_dir(capsys, aws_env, copied):
    root, url = copied
    out = same_output(capsys, ["verify", root], ["verify", url], local=str(root), url=url)
    assert out == "3 partition(s) checked, 0 problem(s)\n"


@pytest.fixture(scope="module")
def damaged(s3, copied, tmp_path_factory):
    """``events-0`` copied again with one byte flipped inside a record of a batch in the
    middle of its second segment: (the copy's log dir URL, the damaged object's URL, the
    batch's position)."""
    root, _ = copied
    url = s3.url(s3.bucket(), "damaged")
    s3.upload_dir(root / "events-0", url + "/events-0")
    name = sorted(p.name for p in (root / "events-0").glob("*.log"))[1]
    data = bytearray((root / "events-0" / name).read_bytes())
    with pylog.Log.open(root / "events-0", read_only=True) as log:
        seg = next(s for s in log.segments if s.log_path.endswith(name))
        batch = list(seg.headers(0))[2]
    data[batch.position + batch.size - 3] ^= 0xFF
    from pylog.remote.store import ObjectStore
    ObjectStore.from_url(url, s3.storage_options).put(f"events-0/{name}", bytes(data))
    return url, url + f"/events-0/{name}", batch.position


def test_verify_names_the_damaged_object_and_exits_non_zero(capsys, aws_env, damaged):
    url, object_url, position = damaged
    code, out, err = run(capsys, "verify", url)
    assert code == 1, err
    problems = out.splitlines()[:-1]
    assert problems and all(line.startswith(object_url) for line in problems), out
    assert f"position {position}" in out and "crc" in out.lower()
    assert out.splitlines()[-1] == f"1 partition(s) checked, {len(problems)} problem(s)"


def test_verify_of_a_partition_url_checks_that_partition(capsys, aws_env, copied, damaged):
    url, object_url, _ = damaged
    code, out, _ = run(capsys, "verify", copied[1] + "/events-1")
    assert (code, out) == (0, "1 partition(s) checked, 0 problem(s)\n")
    code, out, _ = run(capsys, "verify", url + "/events-0")
    assert code == 1 and object_url in out


def test_verify_repair_refuses_a_url(capsys, aws_env, copied):
    _, url = copied
    code, _, err = run(capsys, "verify", "--repair", url)
    assert code == 1 and "read only" in err


# -- dump --------------------------------------------------------------------------------------------

def _segment_files(root) -> list[str]:
    """The files of events-0's first segment and of the one holding the aborted transaction,
    relative to the root: every kind dump reads."""
    partition = root / "events-0"
    aborted = next(p for p in partition.glob("*.txnindex") if p.stat().st_size)
    bases = {min(p.stem for p in partition.glob("*.log")), aborted.stem}
    names = sorted(p.name for p in partition.iterdir() if p.stem in bases
                   and p.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"))
    names += sorted(p.name for p in partition.glob("*.snapshot"))[:1]
    assert {n.rsplit(".", 1)[1] for n in names} >= {"log", "index", "timeindex", "txnindex", "snapshot"}
    return [f"events-0/{n}" for n in names]


@pytest.mark.parametrize("options", [[], ["--print-data-log"], ["--index-sanity-check"]])
def test_dump_of_objects_prints_what_it_prints_for_the_local_files(capsys, aws_env, copied, options):
    root, url = copied
    files = _segment_files(root)
    local = [str(root / f) for f in files]
    remote = [f"{url}/{f}" for f in files]
    code, expected, expected_err = run(capsys, "dump", *options, *local)
    assert code == 0, expected_err
    code, got, err = run(capsys, "dump", *options, *remote)
    assert code == 0, err
    assert got.replace(url, str(root)) == expected
    assert err.replace(url, str(root)) == expected_err
    if not options:  # the transaction's marker and the abort's entry in the transaction index are there
        assert "isControl: true" in expected and "version: 0 producerId: 8 firstOffset:" in expected


def test_dump_of_a_damaged_object_shows_the_invalid_batch(capsys, aws_env, damaged):
    url, object_url, position = damaged
    code, out, err = run(capsys, "dump", "--deep-iteration", object_url)
    assert out.splitlines()[0] == f"Dumping {object_url}"
    assert f"position: {position} " in out and "isvalid: false" in out


# -- errors: one line on stderr, exit code 1, no credential ------------------------------------------

#: options that make a failing request fail fast: one attempt, one-second timeouts, a client of its own
FAIL_FAST = ["--storage-option", 'config_kwargs={"retries": {"total_max_attempts": 1}, "connect_timeout": 1, '
                                 '"read_timeout": 1}', "--storage-option", "retries=1"]


def one_error_line(code: int, out: str, err: str, command: str) -> str:
    assert code == 1, (out, err)
    assert len(err.splitlines()) == 1 and err.startswith(f"pylog {command}: error: "), err
    assert "Traceback" not in err and SECRET_KEY not in out + err and ACCESS_KEY not in out + err
    return err


@pytest.mark.parametrize("command", ["describe", "verify", "get-offsets", "console-consumer"])
def test_a_missing_bucket_is_one_error_line(capsys, aws_env, command):
    topic = ["--topic", "events"] if command == "console-consumer" else []
    err = one_error_line(*run(capsys, command, "s3://pylog-no-such-bucket/data", *topic), command)
    assert "s3://pylog-no-such-bucket/data" in err


def test_a_missing_object_is_one_error_line_naming_it(capsys, aws_env, copied):
    _, url = copied
    missing = f"{url}/events-0/00000000000000999999.log"
    code, out, err = run(capsys, "dump", missing)
    assert out == f"Dumping {missing}\n"
    assert missing in one_error_line(code, out, err, "dump")


def test_no_credentials_is_one_error_line(s3, copied):
    """In a process whose environment names the endpoint but holds no credential."""
    _, url = copied
    r = run_process("describe", url, env={"AWS_ENDPOINT_URL": s3.endpoint_url})
    err = one_error_line(r.returncode, r.stdout, r.stderr, "describe")
    assert "NoCredentialsError" in err


@pytest.mark.parametrize("command", ["describe", "dump"])
def test_a_closed_port_is_one_error_line(capsys, aws_env, copied, monkeypatch, command):
    import socket
    _, url = copied
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    target = url + "/events-0/00000000000000000000.log" if command == "dump" else url
    code, out, err = run(capsys, command, target, *FAIL_FAST)
    assert "Could not connect" in one_error_line(code, out, err, command)


def test_a_stalled_endpoint_is_one_error_line(capsys, s3, copied):
    _, url = copied
    faulty = s3.faulty(s3.Fault("stall", times=float("inf"), stall_s=10))
    options = ["--storage-option", f"key={ACCESS_KEY}", "--storage-option", f"secret={SECRET_KEY}",
               "--storage-option", f"client_kwargs.endpoint_url={faulty.endpoint_url}",
               "--storage-option", f"client_kwargs.region_name={REGION}", *FAIL_FAST]
    err = one_error_line(*run(capsys, "get-offsets", url, *options), "get-offsets")
    assert "timeout" in err.lower()


def test_a_storage_option_that_is_not_key_value_is_not_echoed(capsys, aws_env, copied):
    _, url = copied
    err = one_error_line(*run(capsys, "describe", url, "--storage-option", SECRET_KEY), "describe")
    assert "KEY=VALUE" in err


# -- Aiven's tiered objects ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiered(s3, copied):
    """The segment of ``events-0`` holding the aborted transaction, copied as Aiven's plugin
    copies it (zstd-compressed chunks): (the local segment's path without suffix, the URL of
    its objects without suffix, the producer snapshot copied with it)."""
    from pylog.remote.aiven import upload_segment
    from pylog.remote.store import ObjectStore
    root, _ = copied
    partition = root / "events-0"
    logs = sorted(partition.glob("*.log"))
    log = next(p for p in logs if p.with_suffix(".txnindex").exists() and p.with_suffix(".txnindex").stat().st_size)
    snapshot = sorted(partition.glob("*.snapshot"))[-1]
    indexes = {"offset": log.with_suffix(".index").read_bytes(),
               "timestamp": log.with_suffix(".timeindex").read_bytes(), "producer_snapshot": snapshot.read_bytes(),
               "leader_epoch": b"0\n1\n0 0\n", "transaction": log.with_suffix(".txnindex").read_bytes()}
    url = s3.url(s3.bucket(), "tiered")
    manifest_key = upload_segment(ObjectStore.from_url(url, s3.storage_options), "", "events", bytes(15) + b"\x01", 0,
                                  bytes(15) + b"\x02", log, indexes, chunk_size=512, compression=True)
    assert manifest_key.compression
    name = f"{log.stem}-AAAAAAAAAAAAAAAAAAAAAg"
    return log.with_suffix(""), f"{url}/events-AAAAAAAAAAAAAAAAAAAAAQ/0/{name}", snapshot


def test_dump_of_an_aiven_log_object_prints_the_segment_as_its_file(capsys, aws_env, tiered):
    local, url, _ = tiered
    code, expected, expected_err = run(capsys, "dump", "--deep-iteration", f"{local}.log")
    code, got, err = run(capsys, "dump", "--deep-iteration", f"{url}.log")
    assert code == 0, err
    assert got.splitlines()[1:] == expected.splitlines()[1:]
    assert err == (f"pylog dump: Kafka's DumpLogSegments does not take {url.rsplit('/', 1)[1]}.log: its name is a "
                   f"tiered layout's <start offset>-<segment id>.log, not <base offset>.log; and its chunks are "
                   f"transformed (compressed or encrypted): pylog reads them through the manifest\n"
                   + expected_err.replace(f"{local}.log", f"{url}.log"))


def test_dump_of_an_aiven_indexes_object_prints_each_index_as_its_file(capsys, aws_env, tiered):
    local, url, snapshot = tiered

    def body(path) -> list[str]:
        code, out, err = run(capsys, "dump", path)
        assert code == 0, err
        return out.splitlines()[1:]
    code, out, err = run(capsys, "dump", f"{url}.indexes")
    assert code == 0, err
    assert "does not take" in err and ".indexes" in err
    assert out.splitlines() == [f"Dumping {url}.indexes",
                                "Offset index:", *body(f"{local}.index"),
                                "Time index:", *body(f"{local}.timeindex"),
                                "Transaction index:", *body(f"{local}.txnindex"),
                                "Producer snapshot:", *body(snapshot),
                                "Leader epoch checkpoint:", "0", "1", "0 0"]
    assert any(line.startswith("version: 0 producerId: 8 ") for line in out.splitlines())


@pytest.fixture(scope="module")
def tiered_with_metadata(s3, copied, tmp_path_factory):
    """``events-0``'s first two segments copied in Aiven's layout, and a
    ``__remote_log_metadata`` log dir saying only the first one's copy finished:
    (the layout's URL, the metadata dir, the first segment's end offset + 1, the second's)."""
    from pylog.remote.aiven import upload_segment
    from pylog.remote.metadata import COPY_SEGMENT_FINISHED, RemoteLogMetadataWriter, RemoteSegmentInfo
    from pylog.remote.store import ObjectStore
    root, _ = copied
    with pylog.Log.open(root / "events-0", read_only=True) as log:
        bases = [s.base_offset for s in log.segments][:3]
    url = s3.url(s3.bucket(), "tiered")
    store = ObjectStore.from_url(url, s3.storage_options)
    topic_id = bytes(15) + b"\x01"
    metadata = tmp_path_factory.mktemp("metadata")
    with pylog.LogManager(metadata) as manager:
        writer = RemoteLogMetadataWriter(manager, partitions=1)
        for i, segment_id in enumerate((bytes(15) + b"\x02", bytes(15) + b"\x03")):
            log = root / "events-0" / f"{bases[i]:020d}.log"
            indexes = {"offset": log.with_suffix(".index").read_bytes(),
                       "timestamp": log.with_suffix(".timeindex").read_bytes(), "producer_snapshot": b"",
                       "leader_epoch": b""}
            upload_segment(store, "", "events", topic_id, 0, segment_id, log, indexes)
            info = writer.copy_started(RemoteSegmentInfo("events", topic_id, 0, segment_id, bases[i],
                                                         bases[i + 1] - 1, TS, segment_leader_epochs={0: bases[i]}))
            if i == 0:
                writer.update(info, COPY_SEGMENT_FINISHED)
    return url, metadata, bases[1], bases[2]


def test_remote_log_metadata_says_which_tiered_segments_are_live(capsys, aws_env, tiered_with_metadata):
    url, metadata, first_end, second_end = tiered_with_metadata
    code, out, err = run(capsys, "get-offsets", url, "--remote-log-metadata", metadata)
    assert (code, out, err) == (0, f"events:0:{first_end}\n", "")
    code, out, err = run(capsys, "describe", url)
    assert code == 0 and out.splitlines()[2].split()[:3] == ["0", "0", str(second_end)]
    assert err.startswith("pylog describe: warning: events-0 is read without remote_log_metadata=") and \
        len(err.splitlines()) == 1, err
    code, out, err = run(capsys, "get-offsets", url)
    assert (code, out) == (0, f"events:0:{second_end}\n")
    assert err.startswith("pylog get-offsets: warning: ") and len(err.splitlines()) == 1, err


def test_verify_of_an_aiven_layout_reads_its_chunked_segments(capsys, aws_env, tiered_with_metadata):
    url, metadata, _, _ = tiered_with_metadata
    code, out, err = run(capsys, "verify", url, "--remote-log-metadata", metadata)
    assert (code, out, err) == (0, "1 partition(s) checked, 0 problem(s)\n", "")


def test_a_file_url_of_a_log_dir_reads_as_its_path(capsys, copied):
    root, _ = copied
    for command in (["describe"], ["get-offsets"], ["verify"], ["consume", "--topic", "events"]):
        same_output(capsys, [command[0], root, *command[1:]], [command[0], f"file://{root}", *command[1:]],
                    local=str(root), url=f"file://{root}")


def test_a_group_reading_a_url_is_refused(capsys, aws_env, copied):
    _, url = copied
    err = one_error_line(*run(capsys, "console-consumer", url, "--topic", "events", "--group", "g"),
                         "console-consumer")
    assert "local log dir" in err


def test_a_tiered_partition_url_reads_as_its_log_dir_does(capsys, aws_env, tiered_with_metadata):
    url, metadata, first_end, _ = tiered_with_metadata
    partition_url = f"{url}/events-AAAAAAAAAAAAAAAAAAAAAQ/0"
    for command in ("describe", "get-offsets", "verify"):
        same_output(capsys, [command, url, "--remote-log-metadata", metadata],
                    [command, partition_url, "--remote-log-metadata", metadata], local=url, url=partition_url)


def test_verify_reports_a_wrong_index_entry_naming_the_index_object(capsys, s3, aws_env, copied, tmp_path):
    """A segment whose offset index points between batches: the index's problem as the local
    run says it, naming the object's URL. (Opened on disk, the last segment's tail is also
    walked from that entry, which reports the batch there as torn: an object is read whole
    from its start, so only the index is wrong.)"""
    import shutil

    from pylog.layout import OFFSET_INDEX_ENTRY
    root, _ = copied
    local = tmp_path / "events-0"
    local.mkdir()
    first = min((root / "events-0").glob("*.log"))
    for suffix in (".log", ".timeindex"):
        shutil.copy(first.with_suffix(suffix), local / first.with_suffix(suffix).name)
    (local / first.with_suffix(".index").name).write_bytes(OFFSET_INDEX_ENTRY.pack(3, 7))
    url = s3.url(s3.bucket(), "events-0")
    s3.upload_dir(local, url)
    code, expected, err = run(capsys, "verify", local)
    assert code == 1 and "does not point at a batch start" in expected, expected
    code, got, err = run(capsys, "verify", url)
    assert code == 1, err
    index_problem = f"{url}/{first.stem}.index: entry (3, position 7) does not point at a batch start"
    assert got.splitlines() == [index_problem, "1 partition(s) checked, 1 problem(s)"]
    assert index_problem.replace(url, str(local)) in expected.splitlines()


def test_dump_decodes_remote_log_metadata_objects_as_their_files(capsys, s3, aws_env, tiered_with_metadata):
    _, metadata, _, _ = tiered_with_metadata
    segment = min((metadata / "__remote_log_metadata-0").glob("*.log"))
    url = s3.url(s3.bucket(), "__remote_log_metadata-0")
    s3.upload_dir(segment.parent, url)
    options = ["--remote-log-metadata-decoder"]
    code, expected, _ = run(capsys, "dump", *options, segment)
    code, got, err = run(capsys, "dump", *options, f"{url}/{segment.name}")
    assert code == 0, err
    assert got.replace(f"{url}/{segment.name}", str(segment)) == expected
    assert expected.count("state=COPY_SEGMENT_STARTED") == 2 and expected.count("state=COPY_SEGMENT_FINISHED") == 1
